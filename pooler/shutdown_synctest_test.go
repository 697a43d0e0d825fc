package pooler

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// SHUTDOWN WAIT_FOR_SERVERS (issue 18, cause 5): the session holding a
// server goes on; a client already queued for a server is closed by the
// next pass with FATAL 08P01 "server shutting down", long before
// query_wait_timeout, and so is a client that asks for a server after the
// SHUTDOWN. The shutdown completes when the last server is released.
func TestTimingShutdownWaitForServersClosesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\ndefault_pool_size = 1\nreserve_pool_size = 0\nquery_wait_timeout = 20\n")
		holder := r.connect("u", nil)
		if rep := holder.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("holder's query: %v", rep)
		}
		idle := r.connect("u", nil)
		waiter := r.connect("u", nil)
		got := waiter.queryAsync("SELECT 2")
		synctest.Wait()
		if p := r.pool("u"); p.ClWaiting != 1 {
			t.Fatalf("pool before SHUTDOWN: %+v; want 1 waiting client", p)
		}
		r.sleepUntil(350 * time.Millisecond) // off the pass's beat
		asked := time.Now()
		r.svc.Shutdown(context.Background(), admin.ShutdownWaitForServers)
		rep := <-got
		checkError(t, rep, pgerror.ServerShuttingDown, "FATAL", "08P01", "server shutting down")
		if waited := rep.at.Sub(asked); waited > shutdownSweepEvery {
			t.Errorf("the queued client was closed %v after SHUTDOWN; want by the next pass (%v), not query_wait_timeout", waited, shutdownSweepEvery)
		}
		if rep2 := waiter.readReply(); rep2.ioErr == nil {
			t.Errorf("the waiter's connection stayed open after FATAL: %v", rep2)
		}
		checkError(t, idle.query("SELECT 3"), pgerror.ServerShuttingDown, "FATAL", "08P01", "server shutting down")
		if rep := holder.query("SELECT 4"); !rep.ready || rep.err != nil {
			t.Errorf("the session holding a server, after SHUTDOWN: %v", rep)
		}
		if n := strings.Count(r.log.String(), "closing because: server shutting down"); n != 2 {
			t.Errorf("%d closes logged as %q; want 2", n, "server shutting down")
		}
		select {
		case <-r.svc.stopped.Done():
			t.Fatal("the shutdown completed while a server was in use")
		default:
		}
		holder.conn.Close()
		synctest.Wait()
		select {
		case <-r.svc.stopped.Done():
		default:
			t.Fatal("the shutdown did not complete when the last server was released")
		}
	})
}
