package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// postgresqlCommonGlob is the pattern of Debian's postgresql-common
// logrotate entry (/etc/logrotate.d/postgresql-common).
const postgresqlCommonGlob = "/var/log/postgresql/*.log"

// etc/pgturnstile.logrotate works beside Debian's postgresql-common: none
// of its paths is one postgresql-common rotates already (a duplicate entry
// is an error that stops logrotate's run), and each block switches to the
// logfile's owner with su (logrotate refuses a directory a non-root user
// may write). Where logrotate is installed, it reads the file without an
// error.
func TestLogrotateFile(t *testing.T) {
	path := filepath.Join("..", "..", "etc", "pgturnstile.logrotate")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []string
	su := map[string]bool{}
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasSuffix(line, "{") && cur == "":
			cur = strings.TrimSpace(strings.TrimSuffix(line, "{"))
			blocks = append(blocks, cur)
		case line == "}":
			cur = ""
		case cur != "" && strings.HasPrefix(line, "su "):
			su[cur] = true
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s: no log block", path)
	}
	for _, b := range blocks {
		for _, p := range strings.Fields(b) {
			if ok, _ := filepath.Match(postgresqlCommonGlob, p); ok || p == postgresqlCommonGlob {
				t.Errorf("%s: %s is rotated by postgresql-common's %s already", path, p, postgresqlCommonGlob)
			}
		}
		if !su[b] {
			t.Errorf("%s: block %s has no su directive", path, b)
		}
	}
	lr, err := exec.LookPath("logrotate")
	if err != nil {
		t.Logf("no logrotate: %v", err)
		return
	}
	out, err := exec.Command(lr, "-d", "-s", filepath.Join(t.TempDir(), "state"), path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "error:") {
		t.Errorf("logrotate -d %s: %v\n%s", path, err, out)
	}
}
