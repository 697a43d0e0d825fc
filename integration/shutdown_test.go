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

// TestShutdownWaitForServersClosesNewTransactions: during SHUTDOWN
// WAIT_FOR_SERVERS a transaction in progress finishes, but a client that
// starts a new one, or that was already waiting for a server when the
// shutdown began, is closed at once with PgBouncer's FATAL 08P01 "server
// shutting down" (not left queued until query_wait_timeout), and the close
// is logged as "closing because: server shutting down".
func TestShutdownWaitForServersClosesNewTransactions(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{"default_pool_size": "1"}), ""), opsUserlist)
	ctx := ctxT(t, 60*time.Second)
	holder := connectPgx(t, p.App())
	if _, err := holder.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	queryInt(t, holder, "SELECT 1")
	idle := connectPgx(t, p.App())
	waiter := connectPgx(t, p.App())
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(ctx, "SELECT 1")
		waited <- err
	}()
	console := adminConsole(t, p)
	waitPool(t, console, appDB, appUser, 10*time.Second, "a client waiting for the pool's one server",
		func(r map[string]string) bool { return r["cl_waiting"] == "1" })

	adminExec(t, console, "SHUTDOWN WAIT_FOR_SERVERS")

	// The client that was waiting: closed, not served and not timed out
	// (query_wait_timeout is 20 s here, the context 60 s).
	wantPgError(t, <-waited, "FATAL", "08P01", "server shutting down")
	// The transaction in progress goes on.
	if got := queryInt(t, holder, "SELECT 2"); got != 2 {
		t.Fatalf("open transaction after SHUTDOWN: got %d", got)
	}
	// A new transaction is refused the same way.
	_, err := idle.Exec(ctx, "SELECT 1")
	wantPgError(t, err, "FATAL", "08P01", "server shutting down")
	// Both closes are logged (the log reaches the test through a pipe,
	// maybe after the client's error).
	p.waitLog(t, "closing because: server shutting down", 1, 5*time.Second)
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatalf("COMMIT after SHUTDOWN: %v", err)
	}
	code, ok := p.waitExit(t, 10*time.Second)
	if !ok {
		p.DumpGoroutines()
		t.Fatal("pooler still running 10s after the last server was released")
	}
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

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
	out, stderr, err := psqlAsPooler(t, "", "-X", "-tA", "-h", sock, "-p", port, "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW VERSION")
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

// TestSignalAfterConsoleShutdownExits: SIGINT or SIGTERM during a console
// SHUTDOWN WAIT_FOR_* is PgBouncer's fast exit ("got SIGTERM while
// shutting down, fast exit"), as a second signal is, even with a
// transaction open.
func TestSignalAfterConsoleShutdownExits(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	app := connectPgx(t, p.App())
	if _, err := app.Exec(ctxT(t, 10*time.Second), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	queryInt(t, app, "SELECT 1")
	console := adminConsole(t, p)
	adminExec(t, console, "SHUTDOWN WAIT_FOR_SERVERS")
	if _, ok := p.waitExit(t, 300*time.Millisecond); ok {
		t.Fatal("exited on SHUTDOWN WAIT_FOR_SERVERS with a transaction open")
	}
	p.signal(t, syscall.SIGTERM)
	code, ok := p.waitExit(t, 5*time.Second)
	if !ok {
		p.DumpGoroutines()
		t.Fatal("SIGTERM during SHUTDOWN WAIT_FOR_SERVERS did not exit")
	}
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if !p.LogContains("got SIGTERM while shutting down, fast exit") {
		t.Errorf("no %q in the log", "got SIGTERM while shutting down, fast exit")
	}
}
