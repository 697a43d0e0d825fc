//go:build linux

package integration

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The process guards and privileges of PgBouncer (issue 19, item 1): the
// pidfile, the Unix socket, root, the user switch and -d, on the real
// binary. Tests that need root skip without it (CI runs as root).

// guardDir is a fresh directory the pooler can still write in (its pidfile)
// after switching to PostgreSQL's OS user.
func guardDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 && pg != nil && pg.cred != nil {
		os.Chmod(filepath.Dir(dir), 0o711)
		if err := os.Chown(dir, int(pg.cred.Uid), int(pg.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// guardIni writes iniSettings(settings) and the test userlist into dir and
// returns the config's path.
func guardIni(t *testing.T, dir string, settings map[string]string) string {
	t.Helper()
	c := needPG(t)
	authFile := filepath.Join(dir, "userlist.txt")
	ini := strings.NewReplacer("@PGPORT@", strconv.Itoa(c.port), "@AUTH_FILE@", authFile).Replace(iniSettings(settings, ""))
	if err := os.WriteFile(authFile, []byte(testUserlist), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(path, []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// guarded is a pgturnstile process a guard test starts itself.
type guarded struct {
	cmd    *exec.Cmd
	out    *logBuffer
	exited chan struct{}
}

// runGuarded starts the binary with args: as root when asRoot (the test
// must be root), else as the harness starts it (not root).
func runGuarded(t *testing.T, asRoot bool, args ...string) *guarded {
	t.Helper()
	g := &guarded{cmd: exec.Command(poolerBinary(t), args...), out: newLogBuffer(), exited: make(chan struct{})}
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	if asRoot {
		g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	} else {
		g.cmd.SysProcAttr = poolerProcAttr("")
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		select {
		case <-g.exited:
		default:
			g.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-g.exited:
			case <-time.After(5 * time.Second):
				syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
				<-g.exited
			}
		}
	})
	return g
}

// exitCode waits for the process to exit and returns its status.
func (g *guarded) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-g.exited:
		return g.cmd.ProcessState.ExitCode()
	case <-time.After(15 * time.Second):
		t.Fatalf("still running after 15 s; output:\n%s", g.out.String())
	}
	return -1
}

// waitOutput waits until the output holds s.
func (g *guarded) waitOutput(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for !strings.Contains(g.out.String(), s) {
		select {
		case <-g.exited:
			if strings.Contains(g.out.String(), s) {
				return
			}
			t.Fatalf("exited (%v) without logging %q:\n%s", g.cmd.ProcessState, s, g.out.String())
		case <-deadline:
			t.Fatalf("no %q within 15 s:\n%s", s, g.out.String())
		case <-g.out.changed():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readPid returns the pid a pidfile holds.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("pidfile: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pidfile holds %q", b)
	}
	return pid
}

// procStatus returns a line's fields from /proc/PID/status ("Uid", "Gid",
// "Groups", "PPid").
func procStatus(t *testing.T, pid int, key string) []string {
	t.Helper()
	return procStatusOf(t, strconv.Itoa(pid), key)
}

// procStatusOf is procStatus for /proc/WHICH/status (WHICH: PID or
// PID/task/TID).
func procStatusOf(t *testing.T, which, key string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + which + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.Fields(v)
		}
	}
	t.Fatalf("/proc/%s/status has no %s", which, key)
	return nil
}

// checkRunsAsPostgresUser fails unless every uid and gid of every thread
// of pid is the one PostgreSQL runs as and its only group is that user's.
func checkRunsAsPostgresUser(t *testing.T, pid int) {
	t.Helper()
	uid, gid := strconv.Itoa(int(pg.cred.Uid)), strconv.Itoa(int(pg.cred.Gid))
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads of %d: %d (%v)", pid, len(tasks), err)
	}
	for _, task := range tasks {
		status := strconv.Itoa(pid) + "/task/" + task.Name()
		for key, want := range map[string]string{"Uid": uid + " " + uid + " " + uid + " " + uid, "Gid": gid + " " + gid + " " + gid + " " + gid, "Groups": gid} {
			if got := strings.Join(procStatusOf(t, status, key), " "); got != want {
				t.Errorf("/proc/%s/status %s: %q, want %q", status, key, got, want)
			}
		}
	}
}

// procSession is the session id of pid (/proc/PID/stat's sixth field).
func procSession(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// After "pid (comm) ": state ppid pgrp session …
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	sid, _ := strconv.Atoi(f[3])
	return sid
}

func needRoot(t *testing.T) {
	t.Helper()
	needPG(t)
	if os.Geteuid() != 0 || pg.cred == nil {
		t.Skip("needs root (CI runs as root)")
	}
}

var guardListenRE = regexp.MustCompile(`listening on 127\.0\.0\.1:(\d+)`)

// selectOneThrough checks a query goes through the pooler on the port its
// log names.
func selectOneThrough(t *testing.T, log string) {
	t.Helper()
	m := guardListenRE.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no listening line in:\n%s", log)
	}
	port, _ := strconv.Atoi(m[1])
	p := &Pooler{Port: port}
	conn := connectPgx(t, p.App())
	// Closed now: SIGTERM's shutdown waits for clients.
	defer conn.Close(ctxT(t, 5*time.Second))
	var one int
	if err := conn.QueryRow(ctxT(t, 10*time.Second), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 through the pooler: %v %d", err, one)
	}
}

// A second instance with the same pidfile refuses to start in PgBouncer's
// words and leaves the first one's pidfile alone; the first removes it
// when it exits.
func TestGuardPidfileLive(t *testing.T) {
	dir := guardDir(t)
	pidPath := filepath.Join(dir, "pgbouncer.pid")
	p := startPooler(t, iniSettings(map[string]string{"pidfile": pidPath}, ""), testUserlist)
	p.WaitLog("process up", 10*time.Second) // the pidfile follows the listeners
	if pid := readPid(t, pidPath); pid != p.cmd.Process.Pid {
		t.Fatalf("pidfile holds %d, pooler is %d", pid, p.cmd.Process.Pid)
	}
	second := runGuarded(t, false, guardIni(t, guardDir(t), map[string]string{"pidfile": pidPath}))
	if code := second.exitCode(t); code != 1 {
		t.Fatalf("second instance exit %d, want 1; output:\n%s", code, second.out.String())
	}
	want := "FATAL pidfile '" + pidPath + "' exists, another instance running?"
	if !strings.Contains(second.out.String(), want) {
		t.Errorf("second instance output lacks %q:\n%s", want, second.out.String())
	}
	if pid := readPid(t, pidPath); pid != p.cmd.Process.Pid {
		t.Fatalf("after the refused start the pidfile holds %d, want the first pooler's %d", pid, p.cmd.Process.Pid)
	}
	p.Stop()
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Fatalf("pidfile left after exit: %v", err)
	}
}

// A pidfile naming a process that is gone is removed ("stale pidfile,
// removing") and replaced by ours.
func TestGuardPidfileStale(t *testing.T) {
	dir := guardDir(t)
	pidPath := filepath.Join(dir, "pgbouncer.pid")
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startPooler(t, iniSettings(map[string]string{"pidfile": pidPath}, ""), testUserlist)
	if !p.WaitLog("LOG stale pidfile, removing", 10*time.Second) {
		t.Errorf("no stale pidfile line:\n%s", p.Log())
	}
	// The pidfile is written after the listeners open.
	p.WaitLog("process up", 10*time.Second)
	if pid := readPid(t, pidPath); pid != p.cmd.Process.Pid {
		t.Fatalf("pidfile holds %d, pooler is %d", pid, p.cmd.Process.Pid)
	}
}

// A Unix-socket-only second instance refuses to start while the first
// listens on the socket, which stays reachable; a stale socket file (its
// process gone) is removed and bound.
func TestGuardUnixSocket(t *testing.T) {
	sock := guardDir(t)
	p := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock}, ""), testUserlist)
	path := filepath.Join(sock, ".s.PGSQL."+strconv.Itoa(p.Port))
	unixOnly := map[string]string{"listen_addr": "", "listen_port": strconv.Itoa(p.Port), "unix_socket_dir": sock}
	second := runGuarded(t, false, guardIni(t, guardDir(t), unixOnly))
	if code := second.exitCode(t); code != 1 || !strings.Contains(second.out.String(), "FATAL unix socket is in use, cannot continue") {
		t.Fatalf("second instance: exit %d, want 1 and FATAL unix socket is in use, cannot continue; output:\n%s", code, second.out.String())
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the first pooler's socket is gone: %v", err)
	}
	c.Close()
	p.Alive(t)

	stalePath := filepath.Join(sock, ".s.PGSQL.6999")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stalePath, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	unixOnly["listen_port"] = "6999"
	third := runGuarded(t, false, guardIni(t, guardDir(t), unixOnly))
	third.waitOutput(t, "listening on unix:"+stalePath)
	c, err = net.Dial("unix", stalePath)
	if err != nil {
		t.Fatalf("socket over the stale one: %v", err)
	}
	c.Close()
}

// Root is refused without a user to switch to, and with user = root.
func TestGuardRootRefused(t *testing.T) {
	needRoot(t)
	for _, settings := range []map[string]string{{}, {"user": "root"}} {
		g := runGuarded(t, true, guardIni(t, guardDir(t), settings))
		if code := g.exitCode(t); code != 1 || !strings.Contains(g.out.String(), "FATAL PgBouncer should not run as root") {
			t.Errorf("%v as root: exit %d, want 1 and FATAL PgBouncer should not run as root; output:\n%s", settings, code, g.out.String())
		}
	}
}

// Started as root with user = (or -u) naming PostgreSQL's OS user, the
// pooler switches after opening its listeners: every uid and gid of the
// process is that user's, its only group that user's group, the pidfile
// and the logfile it created are that user's, and it serves; on SIGTERM
// it exits 0 and removes its pidfile.
func TestGuardUserSwitchAsRoot(t *testing.T) {
	needRoot(t)
	for _, how := range []string{"user =", "-u"} {
		t.Run(strings.TrimSuffix(how, " ="), func(t *testing.T) {
			dir := guardDir(t)
			settings := map[string]string{"pidfile": filepath.Join(dir, "p.pid"), "logfile": filepath.Join(dir, "l.log")}
			var args []string
			if how == "-u" {
				args = []string{"-u", "postgres"}
			} else {
				settings["user"] = "postgres"
			}
			g := runGuarded(t, true, append(args, guardIni(t, dir, settings))...)
			g.waitOutput(t, "process up")
			pid := g.cmd.Process.Pid
			checkRunsAsPostgresUser(t, pid)
			if got := readPid(t, settings["pidfile"]); got != pid {
				t.Errorf("pidfile holds %d, want %d", got, pid)
			}
			for _, f := range []string{settings["pidfile"], settings["logfile"]} {
				if fi, err := os.Stat(f); err != nil || fi.Sys().(*syscall.Stat_t).Uid != pg.cred.Uid {
					t.Errorf("%s: not owned by uid %d (%v)", f, pg.cred.Uid, err)
				}
			}
			selectOneThrough(t, g.out.String())
			g.cmd.Process.Signal(syscall.SIGTERM)
			if code := g.exitCode(t); code != 0 {
				t.Fatalf("exit %d after SIGTERM; output:\n%s", code, g.out.String())
			}
			if _, err := os.Stat(settings["pidfile"]); !os.IsNotExist(err) {
				t.Errorf("pidfile left after exit: %v", err)
			}
		})
	}
}

// -d: the command returns 0 once the daemon is up; the daemon, found by
// its pidfile, runs in its own session, as the user it switched to, with
// its log in the logfile, and serves; SIGTERM stops it and removes the
// pidfile. -d without a pidfile, or with neither logfile nor syslog, is
// refused.
func TestGuardDaemon(t *testing.T) {
	needRoot(t)
	dir := guardDir(t)
	pidPath, logPath := filepath.Join(dir, "p.pid"), filepath.Join(dir, "l.log")
	ini := guardIni(t, dir, map[string]string{"pidfile": pidPath, "logfile": logPath, "user": "postgres"})
	g := runGuarded(t, true, "-d", ini)
	if code := g.exitCode(t); code != 0 || g.out.String() != "" {
		t.Fatalf("-d: exit %d, output %q; want 0 and nothing", code, g.out.String())
	}
	pid := readPid(t, pidPath)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	checkRunsAsPostgresUser(t, pid)
	if ppid := procStatus(t, pid, "PPid")[0]; ppid == strconv.Itoa(g.cmd.Process.Pid) || ppid == strconv.Itoa(os.Getpid()) {
		t.Errorf("daemon's parent is %s: not detached", ppid)
	}
	if sid := procSession(t, pid); sid != pid {
		t.Errorf("daemon's session %d, want its own (%d)", sid, pid)
	}
	// The parent returns once the pidfile is written, just before this line.
	var logText []byte
	for i := 0; !strings.Contains(string(logText), "["+strconv.Itoa(pid)+"] LOG process up"); i++ {
		if i == 100 {
			t.Fatalf("logfile lacks the daemon's process up line:\n%s", logText)
		}
		time.Sleep(100 * time.Millisecond)
		logText, _ = os.ReadFile(logPath)
	}
	selectOneThrough(t, string(logText))
	syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; ; i++ {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			break
		}
		if i == 150 {
			t.Fatalf("daemon still running 15 s after SIGTERM")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Errorf("pidfile left after exit: %v", err)
	}

	for _, c := range []struct {
		settings map[string]string
		want     string
	}{
		{map[string]string{"logfile": logPath, "user": "postgres"}, "FATAL daemon needs pidfile configured"},
		{map[string]string{"pidfile": pidPath, "user": "postgres"}, "FATAL daemon needs logfile or syslog configured"},
	} {
		g := runGuarded(t, true, "-d", guardIni(t, guardDir(t), c.settings))
		if code := g.exitCode(t); code != 1 || !strings.Contains(g.out.String(), c.want) {
			t.Errorf("-d with %v: exit %d, output %q; want 1 and %q", c.settings, code, g.out.String(), c.want)
		}
	}
}

// Debian's /etc/init.d/pgbouncer (pgbouncer package) starts, reloads and
// stops pgturnstile unchanged but for its paths: DAEMON pointing at our
// binary, the pidfile and config in a temp dir. It runs start-stop-daemon
// --chuid postgres -- -d CONFIG, then finds the process by its pidfile.
func TestDebianInitScript(t *testing.T) {
	needRoot(t)
	const script = "/etc/init.d/pgbouncer"
	orig, err := os.ReadFile(script)
	if err != nil {
		t.Skip("no " + script + " (Debian's pgbouncer package)")
	}
	for _, tool := range []string{"/sbin/start-stop-daemon", "/lib/lsb/init-functions"} {
		if _, err := os.Stat(tool); err != nil {
			t.Skip("no " + tool)
		}
	}
	dir := guardDir(t)
	// The binary where the postgres user can run it.
	bin := filepath.Join(dir, "pgturnstile")
	b, err := os.ReadFile(poolerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	pidPath, logPath := filepath.Join(dir, "pgbouncer.pid"), filepath.Join(dir, "pgbouncer.log")
	ini := guardIni(t, dir, map[string]string{"pidfile": pidPath, "logfile": logPath})
	text := string(orig)
	for _, r := range [][2]string{
		{"\nDAEMON=/usr/sbin/$NAME\n", "\nDAEMON=" + bin + "\n"},
		{"\nPIDDIR=/var/run/postgresql\n", "\nPIDDIR=" + dir + "\n"},
		{"\nOPTS=\"-d /etc/pgbouncer/$NAME.ini\"\n", "\nOPTS=\"-d " + ini + "\"\n"},
		{"if [ -f /etc/default/pgbouncer ] ; then", "if false ; then"},
	} {
		if !strings.Contains(text, r[0]) {
			t.Skipf("%s has no line %q to point elsewhere", script, r[0])
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	initScript := filepath.Join(dir, "init-pgbouncer")
	if err := os.WriteFile(initScript, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	initd := func(action string) (string, int) {
		out, err := exec.CommandContext(ctxT(t, 60*time.Second), initScript, action).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s %s: %v", initScript, action, err)
		}
		return string(out), 0
	}
	if out, code := initd("start"); code != 0 {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("start: exit %d, %q; log:\n%s", code, out, log)
	}
	pid := readPid(t, pidPath)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if u := procStatus(t, pid, "Uid")[0]; u != strconv.Itoa(int(pg.cred.Uid)) {
		t.Errorf("daemon runs as uid %s, want postgres's %d", u, pg.cred.Uid)
	}
	if out, code := initd("status"); code != 0 {
		t.Errorf("status while running: exit %d, %q", code, out)
	}
	if out, code := initd("reload"); code != 0 {
		t.Errorf("reload: exit %d, %q", code, out)
	}
	waitFile(t, logPath, "got SIGHUP, re-reading config")
	if out, code := initd("stop"); code != 0 {
		t.Fatalf("stop: exit %d, %q", code, out)
	}
	waitFile(t, logPath, "shutdown complete")
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Errorf("pidfile left after stop: %v", err)
	}
	if out, code := initd("status"); code != 3 {
		t.Errorf("status after stop: exit %d, %q; want 3 (not running)", code, out)
	}
}

// waitFile waits until the file at path holds s.
func waitFile(t *testing.T, path, s string) {
	t.Helper()
	for i := 0; ; i++ {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), s) {
			return
		}
		if i == 100 {
			t.Fatalf("%s lacks %q after 10 s:\n%s", path, s, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Not root, -u naming the user it already runs as is fine (PgBouncer's
// setgid/setuid to oneself succeed); naming another user fails as
// PgBouncer's does.
func TestGuardUserFlagNotRoot(t *testing.T) {
	needRoot(t) // to run it as PostgreSQL's OS user, the harness's way
	ok := runGuarded(t, false, "-u", "postgres", guardIni(t, guardDir(t), nil))
	ok.waitOutput(t, "process up")
	// Not root, the groups are left as they were (PgBouncer's rule).
	if u := procStatus(t, ok.cmd.Process.Pid, "Uid")[0]; u != strconv.Itoa(int(pg.cred.Uid)) {
		t.Errorf("runs as uid %s, want %d", u, pg.cred.Uid)
	}
	other := runGuarded(t, false, "-u", "nobody", guardIni(t, guardDir(t), nil))
	if code := other.exitCode(t); code != 1 || !strings.Contains(other.out.String(), "FATAL failed to assume identity of user 'nobody': Operation not permitted") {
		t.Errorf("-u nobody as postgres: exit %d; output:\n%s", code, other.out.String())
	}
}
