package pooler

import (
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// The per-user and per-database timeouts ([users] query_timeout,
// idle_transaction_timeout, transaction_timeout, client_idle_timeout,
// query_wait_timeout; [databases] server_lifetime, query_wait_timeout)
// and transaction_timeout, on the timing rig (timingrig_synctest_test.go).
// The rig's settings end its [pgbouncer] section, so a test's [users] or
// [databases] lines follow them.

// awaitClose reads c's next reply in the background and checks that none
// has come by just before want, then that it is FATAL 08P01 text at want
// exactly (a read deadline, not a janitor tick); got is the reply of a
// query in flight, nil for none, and that the server the
// client held was closed with text as the reason.
func awaitClose(t *testing.T, r *timingRig, c *pipeClient, got <-chan reply, want time.Duration, code pgerror.Code, text string) {
	t.Helper()
	if got == nil {
		ch := make(chan reply, 1)
		go func() { ch <- c.readReply() }()
		got = ch
	}
	r.sleepUntil(want - time.Nanosecond)
	select {
	case rep := <-got:
		t.Fatalf("client closed at %v, before %v: %v", r.elapsed(rep.at), want, rep)
	default:
	}
	var rep reply
	select {
	case rep = <-got:
	case <-time.After(time.Minute): // fake time: a failure, not a hang
		t.Fatalf("no close in the minute after %v", want)
	}
	checkError(t, rep, code, "FATAL", "08P01", text)
	if at := r.elapsed(rep.at); at != want {
		t.Errorf("closed at %v; want %v", at, want)
	}
	// The server's close may wait for serve to come off it (a janitor
	// period at most).
	time.Sleep(janitorPeriod)
	synctest.Wait()
	if !strings.Contains(r.log.String(), "closing because: "+text) {
		t.Errorf("log lacks the server's close line %q:\n%s", text, r.log.String())
	}
	if p := r.pool("u"); p.SvActive != 0 || p.SvIdle != 0 {
		t.Errorf("pool after the close: %+v; want the server closed", p)
	}
}

// transaction_timeout: a transaction open longer than that closes its
// client with FATAL "transaction timeout" (PgBouncer 1.25), counted from
// its first request, while the client is idle in it.
func TestTimingTransactionTimeoutIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\ntransaction_timeout = 2\n")
		c := r.connect("u", nil)
		r.sleepUntil(time.Second)
		if rep := c.query("BEGIN"); !rep.ready || rep.status != 'T' {
			t.Fatalf("BEGIN: %v", rep)
		}
		r.sleepUntil(2 * time.Second)
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query 1s into the transaction: %v", rep)
		}
		awaitClose(t, r, c, nil, 3*time.Second, pgerror.TransactionTimeout, "transaction timeout")
		// Outside a transaction the setting does not count.
		d := r.connect("u", nil)
		if rep := d.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("autocommit query: %v", rep)
		}
		r.sleepUntil(6 * time.Second)
		if rep := d.query("SELECT 2"); !rep.ready || rep.err != nil {
			t.Errorf("query after 3s idle outside a transaction: %v", rep)
		}
	})
}

// A [users] transaction_timeout beats the global one, and it also ends a
// query still running in the transaction.
func TestTimingUserTransactionTimeoutRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\ntransaction_timeout = 100\n[users]\nu = transaction_timeout=2\n")
		c := r.connect("u", nil)
		if rep := c.query("BEGIN"); !rep.ready || rep.status != 'T' {
			t.Fatalf("BEGIN: %v", rep)
		}
		r.sleepUntil(time.Second)
		awaitClose(t, r, c, c.queryAsync("SLEEP"), 2*time.Second, pgerror.TransactionTimeout, "transaction timeout")
		r.sleepUntil(11 * time.Second) // the fake's SLEEP ends
	})
}

// A [users] query_timeout beats the global one.
func TestTimingUserQueryTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = statement\nquery_timeout = 100\n[users]\nu = query_timeout=1\n")
		c := r.connect("u", nil)
		awaitClose(t, r, c, c.queryAsync("SLEEP"), time.Second, pgerror.QueryTimeout, "query timeout")
		r.sleepUntil(11 * time.Second) // the fake's SLEEP ends
	})
}

// A [users] idle_transaction_timeout applies where the global one is off.
func TestTimingUserIdleTransactionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\n[users]\nu = pool_mode=transaction idle_transaction_timeout=1\n")
		c := r.connect("u", nil)
		if rep := c.query("BEGIN"); !rep.ready || rep.status != 'T' {
			t.Fatalf("BEGIN: %v", rep)
		}
		awaitClose(t, r, c, nil, time.Second, pgerror.IdleTransactionTimeout, "idle transaction timeout")
	})
}

// A [users] client_idle_timeout beats the global one; another user keeps
// the global.
func TestTimingUserClientIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\nclient_idle_timeout = 100\n[users]\nu = client_idle_timeout=2\n")
		c, other := r.connect("u", nil), r.connect("v", nil)
		got := make(chan reply, 1)
		go func() { got <- c.readReply() }()
		r.sleepUntil(2*time.Second - time.Nanosecond)
		select {
		case rep := <-got:
			t.Fatalf("closed at %v, before 2s: %v", r.elapsed(rep.at), rep)
		default:
		}
		rep := <-got
		checkError(t, rep, pgerror.ClientIdleTimeout, "FATAL", "08P01", "client_idle_timeout")
		if at := r.elapsed(rep.at); at != 2*time.Second {
			t.Errorf("closed at %v; want 2s", at)
		}
		r.sleepUntil(5 * time.Second)
		if rep := other.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Errorf("the other user's query at 5s: %v", rep)
		}
	})
}

// A [users] query_wait_timeout beats the global one.
func TestTimingUserQueryWaitTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\ndefault_pool_size = 1\nreserve_pool_size = 0\nquery_wait_timeout = 100\n[users]\nu = query_wait_timeout=1\n")
		holder := r.connect("u", nil)
		if rep := holder.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("holder's query: %v", rep)
		}
		waiter := r.connect("u", nil)
		got := waiter.queryAsync("SELECT 2")
		rep := <-got
		checkError(t, rep, pgerror.QueryWaitTimeout, "FATAL", "08P01", "query_wait_timeout")
		if at := r.elapsed(rep.at); at < time.Second || at > time.Second+janitorPeriod {
			t.Errorf("error at %v; want query_wait_timeout (1s) to the next janitor tick", at)
		}
	})
}

// A [databases] server_lifetime beats the global one for that database's
// servers only.
func TestTimingDatabaseServerLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\nserver_lifetime = 100\nserver_lifetime_jitter = 0\nserver_idle_timeout = 0\n[databases]\nshort = host=fake.invalid port=5432 dbname=fake server_lifetime=2\n")
		for _, db := range []string{"db", "short"} {
			if rep := connectTo(r, db).query("SELECT 1"); !rep.ready || rep.err != nil {
				t.Fatalf("query on %s: %v", db, rep)
			}
		}
		if n := len(r.serverPIDs()); n != 2 {
			t.Fatalf("%d servers; want one per database", n)
		}
		r.sleepUntil(2*time.Second + janitorPeriod)
		if pids := r.serverPIDs(); len(pids) != 1 || pids[0] != 1 {
			t.Errorf("servers open at 2s: %v; want only db's (pid 1)", pids)
		}
		if n := strings.Count(r.log.String(), "closing because: server lifetime over"); n != 1 {
			t.Errorf("%d lifetime closes; want 1:\n%s", n, r.log.String())
		}
	})
}

// connectTo logs user u in to database db, as timingRig.connect does for db.
func connectTo(r *timingRig, db string) *pipeClient {
	r.t.Helper()
	mine, theirs := net.Pipe()
	r.svc.serveConn(theirs)
	pc := &pipeClient{conn: mine, fe: pgproto3.NewFrontend(mine, mine)}
	r.clients = append(r.clients, pc)
	pc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: 196608, Parameters: map[string]string{"user": "u", "database": db}})
	if err := pc.fe.Flush(); err != nil {
		r.t.Fatalf("startup: %v", err)
	}
	if rep := pc.readReply(); !rep.ready || rep.err != nil {
		r.t.Fatalf("login to %s: %+v", db, rep)
	}
	return pc
}
