package pooler

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
)

// newTestService builds a Service on the default configuration, without
// listeners; nothing is started.
func newTestService(t *testing.T, opts ...Option) *Service {
	t.Helper()
	cfg := config.Default()
	cfg.Settings.AuthType = "any"
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// SHOW VERSION reports what the command passed to New, and a default
// without it: there is no process-wide variable to set.
func TestWithVersion(t *testing.T) {
	if got := newTestService(t).Console().Version(); got != "pgturnstile" {
		t.Errorf("default Version() = %q, want %q", got, "pgturnstile")
	}
	const v = "PgBouncer 1.25.0 (pgturnstile test)"
	if got := newTestService(t, WithVersion(v)).Console().Version(); got != v {
		t.Errorf("Version() = %q, want %q", got, v)
	}
}

// sessionClient logs in to database db of tp and runs one query, so that
// in session mode it holds a server until it leaves.
func sessionClient(t *testing.T, tp *testPooler, db string) net.Conn {
	t.Helper()
	conn, query := queryClient(t, tp, [][2]string{{"user", "sd"}, {"database", db}})
	query("SELECT 1")
	return conn
}

// queryClient logs in to tp with the startup parameters and returns the
// connection and a function that runs one simple query to its
// ReadyForQuery; an ErrorResponse on the way fails the test.
func queryClient(t *testing.T, tp *testPooler, startup [][2]string) (net.Conn, func(q string)) {
	t.Helper()
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // a failsafe, not a measurement
	br := newBackendReader(conn)
	untilReady := func(step string) {
		t.Helper()
		for {
			typ, body, err := br.next()
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if typ == 'E' {
				t.Fatalf("%s: error %q", step, body)
			}
			if typ == 'Z' {
				return
			}
		}
	}
	if _, err := conn.Write(startupPacket(0, startup)); err != nil {
		t.Fatal(err)
	}
	untilReady("login")
	return conn, func(q string) {
		t.Helper()
		m := append([]byte{'Q', 0, 0, 0, 0}, q+"\x00"...)
		binary.BigEndian.PutUint32(m[1:], uint32(len(m)-1))
		if _, err := conn.Write(m); err != nil {
			t.Fatal(err)
		}
		untilReady(q)
	}
}

// startSessionPooler serves database "sd" in session mode in front of a
// fake Postgres; the cleanup stops both.
func startSessionPooler(t *testing.T) *testPooler {
	t.Helper()
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"sd": "pool_mode=session"}, "")
	t.Cleanup(func() {
		tp.svc.Shutdown(context.Background(), admin.ShutdownImmediate)
		tp.stop()
		fake.Close()
	})
	return tp
}

// served waits (with a failsafe) for Serve to return.
func (tp *testPooler) awaitServed(t *testing.T, why string) {
	t.Helper()
	select {
	case err := <-tp.served:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve did not return: %s", why)
	}
}

// notServed fails if Serve has returned already.
func (tp *testPooler) notServed(t *testing.T, why string) {
	t.Helper()
	select {
	case err := <-tp.served:
		t.Fatalf("Serve returned (%v) %s", err, why)
	default:
	}
}

// poolTotal is the number of servers the pools of db hold or are logging in.
func poolTotal(s *Service, db string) int {
	n := 0
	for _, p := range s.poolsOf(db) {
		p.mu.Lock()
		n += p.total
		p.mu.Unlock()
	}
	return n
}

// SHUTDOWN WAIT_FOR_CLIENTS ends when the last client leaves, woken by its
// leaving rather than a poll.
func TestShutdownWaitForClients(t *testing.T) {
	tp := startSessionPooler(t)
	conn := sessionClient(t, tp, "sd")
	tp.svc.Shutdown(context.Background(), admin.ShutdownWaitForClients)
	if _, err := net.Dial("tcp", tp.addr); err == nil {
		t.Error("a new connection was accepted after SHUTDOWN")
	}
	tp.notServed(t, "while a client was connected")
	conn.Close()
	tp.awaitServed(t, "after the last client left")
}

// SHUTDOWN WAIT_FOR_SERVERS pauses everything and ends when the last
// server is released (and closed).
func TestShutdownWaitForServers(t *testing.T) {
	tp := startSessionPooler(t)
	conn := sessionClient(t, tp, "sd")
	tp.svc.Shutdown(context.Background(), admin.ShutdownWaitForServers)
	if !tp.svc.Console().State().Paused {
		t.Error("SHOW STATE: not paused during SHUTDOWN WAIT_FOR_SERVERS")
	}
	tp.notServed(t, "while a session client held a server")
	if n := poolTotal(tp.svc, "sd"); n != 1 {
		t.Errorf("pool holds %d servers during the wait, want 1", n)
	}
	conn.Close()
	tp.awaitServed(t, "after the last server was released")
	if n := poolTotal(tp.svc, "sd"); n != 0 {
		t.Errorf("pool holds %d servers after shutdown, want 0", n)
	}
}

// The context given to Shutdown bounds the wait: when it ends, the service
// stops with clients still connected.
func TestShutdownContextEndsWait(t *testing.T) {
	tp := startSessionPooler(t)
	sessionClient(t, tp, "sd")
	ctx, cancel := context.WithCancel(context.Background())
	tp.svc.Shutdown(ctx, admin.ShutdownWaitForClients)
	tp.notServed(t, "before the context ended")
	cancel()
	tp.awaitServed(t, "after Shutdown's context ended")
}

// PAUSE returns once the database's servers are released and closed;
// WAIT_CLOSE once the servers RECONNECT marked are closed.
func TestPauseAndWaitCloseWake(t *testing.T) {
	tp := startSessionPooler(t)
	con := tp.svc.Console()

	conn := sessionClient(t, tp, "sd")
	if err := con.Reconnect("sd"); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- con.WaitClose("sd") }()
	select {
	case err := <-waited:
		t.Fatalf("WAIT_CLOSE returned (%v) while the marked server was linked", err)
	default:
	}
	conn.Close()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WAIT_CLOSE did not return after the marked server was released")
	}

	conn = sessionClient(t, tp, "sd")
	paused := make(chan error, 1)
	go func() { paused <- con.Pause("sd") }()
	select {
	case err := <-paused:
		t.Fatalf("PAUSE returned (%v) while a server was linked", err)
	default:
	}
	conn.Close()
	select {
	case err := <-paused:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PAUSE did not return after the server was released")
	}
	if n := poolTotal(tp.svc, "sd"); n != 0 {
		t.Errorf("pool holds %d servers after PAUSE, want 0", n)
	}
	if err := con.Resume("sd"); err != nil {
		t.Fatal(err)
	}
}

// parseTestConfig parses ini text as a config file.
func parseTestConfig(t *testing.T, ini string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.ini", []byte(ini))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, ini)
	}
	return cfg
}

// Apply derives everything from the new configuration before it swaps:
// a bad file changes nothing, not even the runtime overrides the file would
// replace; a good one replaces them.
func TestApplyDeriveThenSwap(t *testing.T) {
	const base = "[databases]\nd = host=127.0.0.1\n[pgbouncer]\nauth_type = any\n"
	svc := newTestService(t)
	if err := svc.Apply(parseTestConfig(t, base), true); err != nil {
		t.Fatal(err)
	}
	con := svc.Console()
	// u is in no file yet: the override is kept, with a NOTICE saying so.
	var notice *admin.Notice
	if err := con.SetUser("u", "pool_size=3"); !errors.As(err, &notice) || notice.Message != "no such user: u" {
		t.Fatalf("SET USER of a user not known yet: %v, want the NOTICE no such user: u", err)
	}
	if got := svc.config().Users["u"]; got == nil || got.PoolSize != 3 {
		t.Fatalf("after SET USER: [users] u = %+v, want pool_size 3", got)
	}
	running := svc.config()

	// The file now has a line for u, but names an auth_file that is not there.
	bad := parseTestConfig(t, base+"auth_file = "+t.TempDir()+"/missing.txt\n[users]\nu = pool_size=5\n")
	if err := svc.Apply(bad, true); err == nil {
		t.Fatal("Apply with a missing auth_file succeeded")
	}
	if svc.config() != running {
		t.Error("a failed Apply replaced the running configuration")
	}
	svc.mu.Lock()
	_, kept := svc.userOverrides["u"]
	svc.mu.Unlock()
	if !kept {
		t.Error("a failed Apply dropped the SET USER override")
	}

	// The same file without the bad auth_file: its line replaces the override.
	good := parseTestConfig(t, base+"[users]\nu = pool_size=5\n")
	if err := svc.Apply(good, true); err != nil {
		t.Fatal(err)
	}
	if got := svc.config().Users["u"]; got == nil || got.PoolSize != 5 {
		t.Errorf("after RELOAD: [users] u = %+v, want the file's pool_size 5", got)
	}
	svc.mu.Lock()
	_, kept = svc.userOverrides["u"]
	svc.mu.Unlock()
	if kept {
		t.Error("the file's line for u did not replace the SET USER override")
	}
}
