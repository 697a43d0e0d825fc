package pooler

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// A server that cannot be reached while a client waits for it (Postgres
// restarting): the client keeps waiting, the login is retried once
// server_login_retry has passed (at the janitor's next pass), and the
// client is served when the server is back, with no error. Only a refusal
// by Postgres itself fails waiters at once (loginfail.FailsWaiters).
func TestTimingWaitersSurviveServerDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		var dials atomic.Int32
		var failedAt atomic.Int64
		r := startTimingRig(t, "pool_mode = session\ndefault_pool_size = 2\nserver_login_retry = 1\nquery_wait_timeout = 10\n", func(s *Service) {
			pgDial := s.dial
			s.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
				dials.Add(1)
				if down.Load() {
					failedAt.Store(time.Now().UnixNano())
					return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
				}
				return pgDial(ctx, network, address)
			}
		})
		holder := r.connect("u", nil) // logs the pool's first server in
		if rep := holder.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("holder's query: %v", rep)
		}
		waiter := r.connect("u", nil)
		down.Store(true)
		r.sleepUntil(350 * time.Millisecond)
		got := waiter.queryAsync("SELECT 2") // needs a second server
		synctest.Wait()
		if failedAt.Load() == 0 {
			t.Fatal("no login was tried for the waiting client")
		}
		failed := time.Unix(0, failedAt.Load())
		select {
		case rep := <-got:
			t.Fatalf("the waiting client was answered while the server was down: %+v", rep)
		default:
		}
		if p := r.pool("u"); p.ClWaiting != 1 {
			t.Errorf("pool after the failed login: %+v; want the client still waiting", p)
		}
		// Postgres is back half a second later; the next login waits for
		// server_login_retry from the failure, then serves the client.
		time.Sleep(500 * time.Millisecond)
		down.Store(false)
		rep := <-got
		if !rep.ready || rep.err != nil {
			t.Fatalf("the waiting client's query after the server came back: %+v", rep)
		}
		if waited := rep.at.Sub(failed); waited < time.Second || waited > time.Second+janitorPeriod {
			t.Errorf("served %v after the failed login; want server_login_retry (1s) to the next janitor tick", waited)
		}
		if n := dials.Load(); n != 3 {
			t.Errorf("%d dials; want 3 (the first server, the failed login, the retry)", n)
		}
	})
}

// A client that (re)connects while the pool's server is unreachable, after
// the pool has served (its welcome is cached): like the connected clients
// it waits for the server rather than being refused with the cached error
// ("server login has been failing"), so a client reconnecting during a
// Postgres restart is served when Postgres is back. (A pool that never
// logged in, or whose server refused the login, still fails it at once:
// TestHostileErrorTexts, TestServerLoginRetry.)
func TestTimingNewClientWaitsThroughServerDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var down atomic.Bool
		r := startTimingRig(t, "pool_mode = transaction\ndefault_pool_size = 2\nserver_login_retry = 1\nquery_wait_timeout = 10\nserver_idle_timeout = 0.2\n", func(s *Service) {
			pgDial := s.dial
			s.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
				if down.Load() {
					return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
				}
				return pgDial(ctx, network, address)
			}
		})
		old := r.connect("u", nil) // logs the pool's first server in
		if rep := old.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("first query: %v", rep)
		}
		// The idle server closes (server_idle_timeout); Postgres goes down
		// and the next login, for old's query, fails.
		r.sleepUntil(time.Second)
		if p := r.pool("u"); p.SvIdle+p.SvActive+p.SvLogin != 0 {
			t.Fatalf("pool before the outage: %+v; want no server", p)
		}
		down.Store(true)
		oldGot := old.queryAsync("SELECT 2")
		synctest.Wait()
		if !strings.Contains(r.log.String(), "server login failed") {
			t.Fatalf("no failed login logged:\n%s", r.log.String())
		}
		// A new client logs in (r.connect fails the test on an error) and
		// waits for the server with old.
		newcomer := r.connect("u", nil)
		newGot := newcomer.queryAsync("SELECT 3")
		synctest.Wait()
		if p := r.pool("u"); p.ClWaiting != 2 {
			t.Errorf("pool while the server is down: %+v; want both clients waiting", p)
		}
		time.Sleep(500 * time.Millisecond)
		down.Store(false)
		for name, got := range map[string]<-chan reply{"connected": oldGot, "new": newGot} {
			if rep := <-got; !rep.ready || rep.err != nil {
				t.Errorf("%s client's query after the server came back: %+v", name, rep)
			}
		}
	})
}
