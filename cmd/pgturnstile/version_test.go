package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// --version: SHOW VERSION's line, then the commit and the Go version.
func TestVersionOutput(t *testing.T) {
	goLine := "go: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	defer func(c, m string) { commit, modified = c, m }(commit, modified)
	cases := []struct {
		commit, modified string
		want             *regexp.Regexp // the commit line
	}{
		{"0123456789abcdef0123456789abcdef01234567", "", regexp.MustCompile(`^commit: 0123456789abcdef0123456789abcdef01234567$`)},
		{"0123456789abcdef0123456789abcdef01234567", "true", regexp.MustCompile(`^commit: 0123456789abcdef0123456789abcdef01234567 \(modified\)$`)},
		// No ldflags: the build info's vcs.revision, which test binaries
		// do not carry, hence "unknown"; a revision is fine too.
		{"", "", regexp.MustCompile(`^commit: (unknown|[0-9a-f]{40}( \(modified\))?)$`)},
	}
	for _, c := range cases {
		commit, modified = c.commit, c.modified
		var out bytes.Buffer
		printVersion(&out)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 3 || lines[0] != versionLine || !c.want.MatchString(lines[1]) || lines[2] != goLine {
			t.Errorf("commit %q modified %q: got\n%s", c.commit, c.modified, out.String())
		}
	}
	// pgbouncer_exporter reads the PgBouncer level from the first line.
	if !regexp.MustCompile(`^PgBouncer \d+\.\d+\.\d+ \(pgturnstile .+\)$`).MatchString(versionLine) {
		t.Errorf("first line %q", versionLine)
	}
}

// `make release` builds a static binary whose -V names the commit it was
// built from (git rev-parse HEAD, passed with -ldflags) and the Go version.
func TestMakeRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module from scratch the first time (-short)")
	}
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "pgturnstile")
	// GOOS/GOARCH as the host: the binary must run here.
	cmd := exec.Command("make", "-s", "-C", root, "release", "RELEASE_BIN="+bin)
	cmd.Env = append(os.Environ(), "GOOS=", "GOARCH=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("release binary has a program interpreter: dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
		t.Errorf("release binary needs shared libraries %v", libs)
	}

	v, err := exec.Command(bin, "-V").Output()
	if err != nil {
		t.Fatalf("-V: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(v), "\n"), "\n")
	wantCommit := regexp.MustCompile(`^commit: ` + strings.TrimSpace(string(head)) + `( \(modified\))?$`)
	if len(lines) != 3 || lines[0] != versionLine || !wantCommit.MatchString(lines[1]) || !strings.HasPrefix(lines[2], "go: "+runtime.Version()+" ") {
		t.Errorf("-V of the release binary:\n%s", v)
	}
}
