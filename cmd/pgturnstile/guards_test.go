//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// goneProcessPid is the pid of a process that has exited and been reaped.
func goneProcessPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// A pidfile naming a live process, or one that cannot be judged, refuses
// the start in PgBouncer's words; one naming a process that is gone is
// stale and removed; none is fine.
func TestCheckPidfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pgbouncer.pid")
	if stale, err := checkPidfile(path); stale || err != nil {
		t.Fatalf("no pidfile: stale=%v err=%v", stale, err)
	}
	inUse := "pidfile '" + path + "' exists, another instance running?"
	for _, content := range []string{strconv.Itoa(os.Getpid()) + "\n", "", "junk\n", "0\n"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if stale, err := checkPidfile(path); stale || err == nil || err.Error() != inUse {
			t.Errorf("pidfile %q: stale=%v err=%v, want %q", content, stale, err, inUse)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("pidfile %q removed: %v", content, err)
		}
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(goneProcessPid(t))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stale, err := checkPidfile(path); !stale || err != nil {
		t.Fatalf("stale pidfile: stale=%v err=%v, want stale", stale, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("stale pidfile still there: %v", err)
	}
}

// The pidfile is created exclusively, holds our pid, and is removed on
// exit only while it still does.
func TestPidfileWriteAndRemove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pgbouncer.pid")
	pf, err := writePidfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Fatalf("pidfile holds %q", b)
	}
	if _, err := writePidfile(path); err == nil || !strings.HasPrefix(err.Error(), "could not open pidfile '"+path+"': File exists") {
		t.Fatalf("second write: %v, want could not open pidfile … File exists", err)
	}
	pf.remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("our pidfile not removed: %v", err)
	}

	pf, err = writePidfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pf.remove()
	if b, err := os.ReadFile(path); err != nil || string(b) != "1\n" {
		t.Fatalf("another process's pidfile removed or changed: %q %v", b, err)
	}
}

// -d needs a pidfile (PgBouncer's message) and a logfile or syslog.
func TestCheckDaemonConfig(t *testing.T) {
	cases := []struct {
		st   config.Settings
		want string
	}{
		{config.Settings{Logfile: "/x.log"}, "daemon needs pidfile configured"},
		{config.Settings{Pidfile: "/x.pid"}, "daemon needs logfile or syslog configured"},
		{config.Settings{Pidfile: "/x.pid", Logfile: "/x.log"}, ""},
		{config.Settings{Pidfile: "/x.pid", Syslog: true}, ""},
	}
	for _, c := range cases {
		err := checkDaemonConfig(&c.st)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%+v: %q, want %q", c.st, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%+v: accepted, want %q", c.st, c.want)
		}
	}
}

// With syslog on, lines go to syslog as well, tagged ident[pid], at the
// facility and PgBouncer's priority for the level; DEBUG lines do not.
func TestSyslog(t *testing.T) {
	conn := fakeSyslog(t)

	var local bytes.Buffer
	st := config.Settings{Syslog: true, SyslogIdent: "pgt-test", SyslogFacility: "local3"}
	log, sink := withSyslog(slog.New(slog.NewTextHandler(&local, &slog.HandlerOptions{Level: slog.LevelDebug})), &st)
	defer sink.Close()
	log.Debug("a debug line")
	log.Info("process up", "k", 1)
	log.Warn("a warning")
	fatal(log, "a fatal line")

	tag := "pgt-test[" + strconv.Itoa(os.Getpid()) + "]: "
	// local3 = 19; info 6, warning 4, crit 2: <19*8+prio>.
	want := []string{"<158>", tag + "process up k=1", "<156>", tag + "a warning", "<154>", tag + "a fatal line"}
	buf := make([]byte, 2048)
	var got []string
	for range 3 {
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("syslog datagram: %v (got %q)", err, got)
		}
		got = append(got, string(buf[:n]))
	}
	for i, g := range got {
		if !strings.HasPrefix(g, want[2*i]) || !strings.HasSuffix(strings.TrimSuffix(g, "\n"), want[2*i+1]) {
			t.Errorf("syslog line %d = %q, want %s…%s", i, g, want[2*i], want[2*i+1])
		}
	}
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := conn.Read(buf); err == nil {
		t.Errorf("extra syslog line %q (DEBUG must stay out)", buf[:n])
	}
	// The local log has them all.
	for _, s := range []string{"a debug line", "process up", "a warning", "a fatal line"} {
		if !strings.Contains(local.String(), s) {
			t.Errorf("local log lacks %q:\n%s", s, local.String())
		}
	}
	// PgBouncer's word for its die() lines.
	if got := levelName(levelFatal); got != "FATAL" {
		t.Errorf("levelName(levelFatal) = %q", got)
	}
}

// -u wins over user =; an unknown user is PgBouncer's error; root needs a
// user to switch to that is not root.
func TestTargetUserAndRoot(t *testing.T) {
	if tg, err := lookupTarget("", ""); tg != nil || err != nil {
		t.Fatalf("no user: %+v %v", tg, err)
	}
	tg, err := lookupTarget("root", "no_such_user_pgt")
	if err != nil || tg.name != "root" || tg.uid != 0 || tg.gid != 0 {
		t.Fatalf("-u root over user = no_such_user_pgt: %+v %v", tg, err)
	}
	if _, err := lookupTarget("", "no_such_user_pgt"); err == nil || err.Error() != "could not find user 'no_such_user_pgt' to switch to" {
		t.Fatalf("unknown user: %v", err)
	}
	nobody := &target{name: "nobody", uid: 65534, gid: 65534}
	for _, c := range []struct {
		t    *target
		root bool // refused when we are root
	}{{nil, true}, {tg, true}, {nobody, false}} {
		err := checkRoot(c.t)
		if want := c.root && os.Getuid() == 0; (err != nil) != want || (err != nil && err.Error() != "PgBouncer should not run as root") {
			t.Errorf("checkRoot(%+v) as uid %d: %v", c.t, os.Getuid(), err)
		}
	}
}

// fakeSyslog points the syslog writer at a Unix datagram socket of the
// test's own for its duration and returns the socket to read lines from.
func fakeSyslog(t *testing.T) *net.UnixConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "log")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	syslogNetwork, syslogAddr = "unixgram", sock
	t.Cleanup(func() {
		syslogNetwork, syslogAddr = "", ""
		conn.Close()
	})
	return conn
}
