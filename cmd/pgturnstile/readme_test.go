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
