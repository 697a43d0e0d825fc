package pooler

import (
	"context"
	"net"
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
// by Postgres itself fails waiters at once (failsWaiters).
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
