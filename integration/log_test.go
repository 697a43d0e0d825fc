//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Logs (issue 19, items 2 and 5) on the real binary: the logfile reopened
// after mv + SIGHUP and after a console RELOAD, logrotate's copytruncate,
// PgBouncer's line format in local time, and log_format = json.

// logLoginRE is the line of a client's login attempt as PgBouncer writes
// it, its prefix included.
var logLoginRE = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \S+ \[\d+\] LOG C-\d+: appdb/app@127\.0\.0\.1:\d+ login attempt: db=appdb user=app tls=no replication=no$`)

// logPooler starts a pooler that logs to pgbouncer.log in a directory of
// its own and returns it with the logfile's path.
func logPooler(t *testing.T, settings map[string]string, userlist string, env []string) (*Pooler, string) {
	t.Helper()
	path := filepath.Join(guardDir(t), "pgbouncer.log")
	s := map[string]string{"logfile": path}
	for k, v := range settings {
		s[k] = v
	}
	p := startPoolerEnv(t, iniSettings(s, ""), userlist, env)
	waitLogFile(t, path, "listening on")
	return p, path
}

// waitLogFile waits up to 5 s for the file at path to contain s and returns
// its content.
func waitLogFile(t *testing.T, path, s string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(s)) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not contain %q within 5s:\n%s", path, s, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkRotated checks that after a rotation (pgbouncer.log renamed to
// .1, then reopened) the next client's login went to a new pgbouncer.log,
// and the renamed file kept the start and not that login.
func checkRotated(t *testing.T, p *Pooler, path string) {
	t.Helper()
	selectOne(t, p.App())
	now := waitLogFile(t, path, "login attempt")
	if !logLoginRE.MatchString(now) {
		t.Errorf("new %s has no PgBouncer login line matching %s:\n%s", path, logLoginRE, now)
	}
	old := readLog(t, path+".1")
	if !strings.Contains(old, "listening on") || strings.Contains(old, "appdb/app@") {
		t.Errorf("rotated file should hold the start and not the client's login:\n%s", old)
	}
}

// mv pgbouncer.log pgbouncer.log.1; kill -HUP: new lines go to a new
// pgbouncer.log. The lines are PgBouncer's, in local time with the zone
// (TZ is honoured).
func TestLogReopenAfterMvSIGHUP(t *testing.T) {
	env := []string{"TZ=Asia/Tokyo"} // no daylight saving time: always JST
	if _, err := os.Stat("/usr/share/zoneinfo/Asia/Tokyo"); err != nil {
		env = nil
	}
	p, path := logPooler(t, nil, testUserlist, env)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	p.Reload()
	checkRotated(t, p, path)
	if env != nil && !regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} JST \[\d+\] LOG `).MatchString(readLog(t, path)) {
		t.Errorf("TZ=Asia/Tokyo: no line in JST:\n%s", readLog(t, path))
	}
}

// A console RELOAD reopens the logfile too.
func TestLogReopenAfterRELOAD(t *testing.T) {
	p, path := logPooler(t, withConsoleUsers(nil), opsUserlist, nil)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	admin := adminConsole(t, p)
	adminExec(t, admin, "RELOAD")
	checkRotated(t, p, path)
}

// logrotate's copytruncate: the file is truncated in place while the
// pooler has it open; the next lines land at its new start (O_APPEND), not
// after a hole of NUL bytes as long as the old content.
func TestLogCopytruncate(t *testing.T) {
	p, path := logPooler(t, nil, testUserlist, nil)
	selectOne(t, p.App()) // more to truncate
	waitLogFile(t, path, "login attempt")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	selectOne(t, p.App())
	got := waitLogFile(t, path, "login attempt")
	if strings.ContainsRune(got, 0) || !regexp.MustCompile(`^\d{4}-\d\d-\d\d `).MatchString(got) {
		t.Errorf("after truncation the file does not start with a log line:\n%q", got)
	}
}

// log_format = json: every line of the logfile is one JSON object with
// time, level, msg and pid, and a line about a client has its prefix as
// fields (conn, db, user, addr). SET log_format = 'text' switches back.
func TestLogFormatJSON(t *testing.T) {
	p, path := logPooler(t, withConsoleUsers(map[string]string{"log_format": "json"}), opsUserlist, nil)
	selectOne(t, p.App())
	text := waitLogFile(t, path, "login attempt")
	var login map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %v\n%s", err, line)
		}
		for _, k := range []string{"time", "level", "msg", "pid"} {
			if _, ok := m[k]; !ok {
				t.Errorf("no %q in %s", k, line)
			}
		}
		if ts, _ := m["time"].(string); ts != "" {
			if _, err := time.Parse(time.RFC3339, ts); err != nil {
				t.Errorf("time %q: %v", ts, err)
			}
		}
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, "login attempt:") {
			login = m
		}
	}
	if login == nil {
		t.Fatalf("no login attempt line:\n%s", text)
	}
	if login["level"] != "LOG" || login["msg"] != "login attempt: db=appdb user=app tls=no replication=no" || login["db"] != "appdb" || login["user"] != "app" {
		t.Errorf("login line %v", login)
	}
	if c, _ := login["conn"].(string); !regexp.MustCompile(`^C-\d+$`).MatchString(c) {
		t.Errorf("conn %v, want C-n", login["conn"])
	}
	if a, _ := login["addr"].(string); !strings.HasPrefix(a, "127.0.0.1:") {
		t.Errorf("addr %v, want 127.0.0.1:port", login["addr"])
	}
	if pid, _ := login["pid"].(float64); int(pid) != p.cmd.Process.Pid {
		t.Errorf("pid %v, want %d", login["pid"], p.cmd.Process.Pid)
	}

	// SET log_format on the console applies from the next line.
	admin := adminConsole(t, p)
	adminExec(t, admin, "SET log_format = 'text'")
	selectOne(t, p.App())
	waitLogFile(t, path, "LOG C-")
	if !logLoginRE.MatchString(readLog(t, path)) {
		t.Errorf("after SET log_format = 'text', no text login line:\n%s", readLog(t, path))
	}
}

// A client on the Unix socket is "unix(pid):port" in the prefix, as
// PgBouncer writes it: the client's process id and the socket's port.
func TestLogUnixClientPrefix(t *testing.T) {
	sock := t.TempDir()
	p := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock}, ""), testUserlist)
	if !p.WaitLog("listening on unix:", 5*time.Second) { // after the TCP listeners
		t.Fatalf("no Unix socket:\n%s", p.Log())
	}
	selectOne(t, fmt.Sprintf("host=%s port=%d dbname=%s user=%s password=%s", sock, p.Port, appDB, appUser, appPassword))
	want := fmt.Sprintf("LOG C-%%d: appdb/app@unix(%d):%d login attempt: db=appdb user=app tls=no replication=no", os.Getpid(), p.Port)
	re := regexp.MustCompile(strings.Replace(regexp.QuoteMeta(want), "%d", `\d+`, 1))
	if !p.WaitLog("login attempt", 5*time.Second) || !re.MatchString(p.Log()) {
		t.Errorf("no line %q in the log:\n%s", want, p.Log())
	}
}

// Lines about a server carry its prefix, "S-n: db/user@host:port": a new
// connection, and a login that failed (nothing listens on port 1).
func TestLogServerPrefix(t *testing.T) {
	c := needPG(t)
	ini := strings.Replace(iniSettings(map[string]string{"server_login_retry": "30", "query_wait_timeout": "3"}, ""),
		"[databases]\n", "[databases]\ndeaddb = host=127.0.0.1 port=1 dbname=deaddb\n", 1)
	p := startPooler(t, ini, testUserlist)
	selectOne(t, p.App())
	dead := p.ConnString("deaddb", appUser, appPassword)
	go func() {
		// Fails with query_wait_timeout, or when the pooler stops.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dead); err == nil {
			conn.Close(ctx)
		}
	}()
	if !p.WaitLog("server login failed: closing because", 10*time.Second) {
		t.Fatalf("no failed server login:\n%s", p.Log())
	}
	for _, re := range []string{
		fmt.Sprintf(`LOG S-\d+: appdb/app@127\.0\.0\.1:%d new connection to server \(from 127\.0\.0\.1:\d+\)`, c.port),
		`WARNING S-\d+: deaddb/app@127\.0\.0\.1:1 server login failed: closing because: connect failed \(`,
	} {
		if !regexp.MustCompile(re).MatchString(p.Log()) {
			t.Errorf("no line matching %s in\n%s", re, p.Log())
		}
	}
}
