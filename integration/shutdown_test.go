//go:build linux

package integration

import (
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestKillWithoutDatabaseSparesConsole: KILL with no argument kills the
// clients of real databases; the console sessions, the one that sent it
// among them, stay connected and usable.
func TestKillWithoutDatabaseSparesConsole(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	ctx := ctxT(t, 30*time.Second)
	app := connectPgx(t, p.App())
	queryInt(t, app, "SELECT 1")
	other := adminConsole(t, p)
	console := adminConsole(t, p)

	adminExec(t, console, "KILL")

	if _, err := app.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("the application client was not killed")
	}
	for i, c := range []*pgx.Conn{console, other} {
		res, err := tryShow(c, "SHOW CLIENTS")
		if err != nil {
			t.Fatalf("console session %d after KILL: %v", i, err)
		}
		for _, r := range res.rows {
			if r["database"] != "pgbouncer" {
				t.Errorf("SHOW CLIENTS after KILL still lists %v", r)
			}
		}
		if len(res.rows) != 2 {
			t.Errorf("SHOW CLIENTS after KILL: %d rows, want the 2 console sessions", len(res.rows))
		}
	}
	adminExec(t, console, "RESUME")
}

// TestShutdownKeepsConsoleOnUnixSocket: a graceful shutdown (here
// WAIT_FOR_CLIENTS) closes the TCP listener but keeps the Unix socket
// until the end, so the console stays reachable there while clients drain;
// other logins through it are refused. RESUME and SIGUSR2 are refused
// while shutting down, in PgBouncer's words.
func TestShutdownKeepsConsoleOnUnixSocket(t *testing.T) {
	sock := t.TempDir()
	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{"unix_socket_dir": sock}), ""), opsUserlist)
	port := strconv.Itoa(p.Port)
	app := connectPgx(t, p.App())
	queryInt(t, app, "SELECT 1")
	console := adminConsole(t, p)

	adminExec(t, console, "SHUTDOWN WAIT_FOR_CLIENTS")

	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the TCP listener still accepts during SHUTDOWN")
	}
	out, stderr, err := psql(t, "", "-X", "-tA", "-h", sock, "-p", port, "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW VERSION")
	if err != nil || !strings.HasPrefix(out, "PgBouncer ") {
		t.Fatalf("console over the Unix socket during SHUTDOWN: %q %v %s", out, err, stderr)
	}
	_, stderr, err = psql(t, appPassword, "-X", "-tA", "-h", sock, "-p", port, "-U", appUser, "-d", appDB, "-c", "SELECT 1")
	if err == nil || !strings.Contains(stderr, "pooler is shutting down") {
		t.Errorf("application login over the Unix socket during SHUTDOWN: err=%v stderr=%q, want FATAL pooler is shutting down", err, stderr)
	}
	adminExecErr(t, console, "RESUME", "08P01", "pooler is shutting down")
	p.signal(t, syscall.SIGUSR2)
	p.waitLog(t, "got SIGUSR2 while shutting down, ignoring", 0, 5*time.Second)
	if strings.Contains(p.Log(), "got SIGUSR2, resuming") {
		t.Error("SIGUSR2 resumed during SHUTDOWN")
	}
	// The clients leave; the pooler exits and the socket goes with it.
	app.Close(ctxT(t, 5*time.Second))
	console.Close(ctxT(t, 5*time.Second))
	code, ok := p.waitExit(t, 10*time.Second)
	if !ok {
		p.DumpGoroutines()
		t.Fatal("pooler still running 10s after its last client left")
	}
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if c, err := net.DialTimeout("unix", sock+"/.s.PGSQL."+port, time.Second); err == nil {
		c.Close()
		t.Error("the Unix socket still accepts after the pooler exited")
	}
}
