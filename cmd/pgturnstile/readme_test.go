package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README and the pages it links are read in a fresh clone: every
// relative link names a file or folder of the repository (not one beside
// it, as ../shared), and none names the design notes that never were in it.
func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	pages := []string{"README.md", "CHANGELOG.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		pages = append(pages, rel)
	}
	if len(pages) < 3 {
		t.Fatalf("no docs/*.md: %v", pages)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	rootAbs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"DESIGN.md", "research/", "../shared"} {
			if strings.Contains(string(text), bad) {
				t.Errorf("%s mentions %s, which is not in the repository", page, bad)
			}
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, err := filepath.Abs(filepath.Join(root, filepath.Dir(page), target))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(path, rootAbs+string(filepath.Separator)) {
				t.Errorf("%s links %s, outside the repository", page, m[1])
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s: %v", page, m[1], err)
			}
		}
	}
}

// section returns the text of the README's "## title" section.
func section(t *testing.T, readme, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README has no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// The README warns where it walks a reader into a surprise: "Try it" has
// SET USER before a RELOAD, and the override outlives the RELOAD; users
// of PgBouncer 1.18 (Debian 12's) get SIGTERM's new meaning and the
// start-up refusals.
func TestReadmeNotes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	try := strings.Join(strings.Fields(section(t, readme, "Try it")), " ")
	if strings.Contains(try, "SET USER") && strings.Contains(try, "RELOAD") && !strings.Contains(try, "outlives the RELOAD") {
		t.Errorf("Try it runs SET USER and RELOAD without saying that the override outlives the RELOAD")
	}
	mig := strings.Join(strings.Fields(section(t, readme, "Coming from PgBouncer 1.18")), " ")
	for _, want := range []string{"SIGTERM waits for the clients", "SHUTDOWN WAIT_FOR_CLIENTS", "SIGQUIT", "Start-up refuses what 1.18 only warned about", "auth_file"} {
		if !strings.Contains(mig, want) {
			t.Errorf("the 1.18 migration note does not say %q", want)
		}
	}
}
