//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

var (
	psqlLineRE  = regexp.MustCompile(`^psql "([^"]+)"$`)
	runTmpDirRE = regexp.MustCompile(`initdb in (\S+)/data`)
)

// TestMakeRun runs scripts/run-local.sh (what `make run` runs after `make
// build`) for real: it must print the psql line, and that line must give
// SELECT 1. Ctrl-C (SIGINT to the process group) must stop PostgreSQL and
// remove the temp dir. The script's default listen port 6432 is used when it
// is free (the README path); otherwise PGTURNSTILE_RUN_PORT moves it. The
// README's tour must work too: the admin console as user admin (SET USER,
// RELOAD of the printed config file after an edit) and the metrics URL.
func TestMakeRun(t *testing.T) {
	needPG(t)
	bin := poolerBinary(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pgPort, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PGTURNSTILE_BIN="+bin, "PGTURNSTILE_PG_PORT="+strconv.Itoa(pgPort))
	listenPort := 6432
	if l, err := net.Listen("tcp", "127.0.0.1:6432"); err == nil {
		l.Close()
		t.Log("6432 is free: running the README's path")
	} else {
		listenPort, err = pgtest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, "PGTURNSTILE_RUN_PORT="+strconv.Itoa(listenPort))
		t.Logf("6432 is busy: PGTURNSTILE_RUN_PORT=%d", listenPort)
	}

	cmd := exec.Command(filepath.Join(root, "scripts", "run-local.sh"))
	cmd.Dir = root
	cmd.Env = env
	stderr := newLogBuffer()
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	lines := make(chan string, 100)
	exited := make(chan error, 1)
	done := make(chan struct{}) // closed once the script has exited
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody listens any more; keep draining
			}
		}
		close(lines)
		// Wait only after stdout is drained (StdoutPipe rule).
		exited <- cmd.Wait()
		close(done)
	}()
	var out []string
	// A test that fails midway still lets the script stop its PostgreSQL
	// (pg_ctl runs it outside the process group, so SIGKILL would orphan
	// it): Ctrl-C first, SIGKILL only if the script hangs.
	t.Cleanup(func() {
		select {
		case <-done:
			return
		default:
		}
		_ = syscall.Kill(-pgid, syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})

	// The psql line.
	var connstr string
	timeout := time.After(60 * time.Second)
	for connstr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("run-local.sh closed stdout without a psql line; stdout %q\nstderr:\n%s", out, stderr.String())
			}
			out = append(out, l)
			if m := psqlLineRE.FindStringSubmatch(l); m != nil {
				connstr = m[1]
			}
		case <-timeout:
			t.Fatalf("no psql line within 60 s; stdout %q\nstderr:\n%s", out, stderr.String())
		}
	}
	wantConn := fmt.Sprintf("host=127.0.0.1 port=%d dbname=postgres user=postgres", listenPort)
	if connstr != wantConn {
		t.Errorf("printed psql line has %q, want %q", connstr, wantConn)
	}

	// The pooler starts right after the line; retry psql for a few seconds.
	deadline := time.Now().Add(15 * time.Second)
	for {
		o, e, err := psql(t, "", connstr, "-tAc", "SELECT 1")
		if err == nil {
			if strings.TrimSpace(o) != "1" {
				t.Errorf("SELECT 1 through the printed line returned %q", o)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("psql %q -c 'SELECT 1' kept failing: %v %s\nscript stderr:\n%s", connstr, err, e, stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	tryConsoleAndMetrics(t, lines, stderr)

	// Ctrl-C.
	m := runTmpDirRE.FindStringSubmatch(stderr.String())
	if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Logf("run-local.sh exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("run-local.sh still running 30 s after SIGINT; stderr:\n%s", stderr.String())
	}
	if m == nil {
		t.Errorf("script did not say where its temp dir is; stderr:\n%s", stderr.String())
	} else if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("temp dir %s still exists after Ctrl-C (%v)", m[1], err)
	}
	for _, port := range []int{pgPort, listenPort} {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			t.Errorf("127.0.0.1:%d still accepts connections after Ctrl-C", port)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("script stdout: %q\nstderr:\n%s", out, stderr.String())
	}
}

// tryConsoleAndMetrics follows the lines run-local.sh prints after the
// application's psql line: the admin console's psql line, the metrics URL
// and the config file, as a newcomer would.
func tryConsoleAndMetrics(t *testing.T, lines <-chan string, stderr *logBuffer) {
	t.Helper()
	var admin, metricsURL, iniPath string
	timeout := time.After(10 * time.Second)
	for iniPath == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("run-local.sh closed stdout before the config path; stderr:\n%s", stderr.String())
			}
			switch {
			case psqlLineRE.MatchString(l):
				admin = psqlLineRE.FindStringSubmatch(l)[1]
			case strings.HasPrefix(l, "curl "):
				metricsURL = strings.TrimPrefix(l, "curl ")
			case strings.HasSuffix(l, "/pgbouncer.ini"):
				iniPath = l
			}
		case <-timeout:
			t.Fatalf("no admin line, metrics URL and config path within 10 s (got %q %q); stderr:\n%s", admin, metricsURL, stderr.String())
		}
	}
	if !strings.Contains(admin, "dbname=pgbouncer user=admin") {
		t.Fatalf("admin console line %q", admin)
	}

	// SET USER, as the README shows.
	if _, e, err := psql(t, "", admin, "-tAc", "SET USER postgres = 'pool_size=5'"); err != nil {
		t.Fatalf("SET USER as admin: %v %s", err, e)
	}
	o, e, err := psql(t, "", admin, "-tAF,", "-c", "SHOW USERS")
	if err != nil || !regexp.MustCompile(`(?m)^postgres, *5,`).MatchString(o) { // "%9d", as PgBouncer
		t.Errorf("SHOW USERS after SET USER: %q %v %s", o, err, e)
	}

	// An edit of the printed config file, then RELOAD.
	ini, err := os.ReadFile(iniPath)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(ini), "default_pool_size = 20", "default_pool_size = 7", 1)
	if edited == string(ini) {
		t.Fatalf("no default_pool_size = 20 in %s:\n%s", iniPath, ini)
	}
	if err := os.WriteFile(iniPath, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, e, err := psql(t, "", admin, "-tAc", "RELOAD"); err != nil {
		t.Fatalf("RELOAD: %v %s", err, e)
	}
	o, e, err = psql(t, "", admin, "-tAF,", "-c", "SHOW CONFIG")
	if err != nil || !regexp.MustCompile(`(?m)^default_pool_size,7,`).MatchString(o) {
		t.Errorf("default_pool_size after the edit and RELOAD: %v %s\n%s", err, e, o)
	}

	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatalf("GET %s: %v", metricsURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "pgturnstile_") {
		t.Errorf("GET %s: %s\n%.500s", metricsURL, resp.Status, body)
	}
}
