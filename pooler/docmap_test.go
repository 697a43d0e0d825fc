package pooler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocMapListsEveryFile: the file map in doc.go ("# Files") names every
// non-test Go file of the package (an entry may be a pattern such as
// directtls_*.go), and every entry names a file that exists: the map is
// how a reader finds the path of one query, so it must not fall behind.
func TestDocMapListsEveryFile(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "// # Files\n")
	if start < 0 {
		t.Fatal(`doc.go has no "# Files" section`)
	}
	section := text[start+len("// # Files\n"):]
	if end := strings.Index(section, "\n// #"); end >= 0 {
		section = section[:end]
	}
	var entries []string
	for _, line := range strings.Split(section, "\n") {
		rest, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " ")
		if strings.HasSuffix(name, ".go") {
			entries = append(entries, name)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "doc.go" {
			continue
		}
		found := false
		for _, e := range entries {
			if ok, _ := filepath.Match(e, f); ok {
				found, used[e] = true, true
			}
		}
		if !found {
			t.Errorf("%s is not in doc.go's file map", f)
		}
	}
	for _, e := range entries {
		if !used[e] {
			t.Errorf("doc.go's file map names %s, which is no file of the package", e)
		}
	}
}
