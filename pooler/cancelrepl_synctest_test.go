package pooler

import (
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// A server that comes back from being_canceled (cancelDone) wakes a
// replication client waiting for room in a full pool, as a release does:
// the waiter evicts the now idle server and logs in at once (issue 33,
// item 6). cancelDone itself did not wake it; the wake-up came from the
// end of the cancel request's own connection, just after (a client's end
// wakes the service's waiters), so this passed before the fix too and
// guards the behaviour, whichever code gives it.
func TestTimingCancelDoneWakesReplicationWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var blackhole atomic.Bool
		r := startTimingRig(t, "pool_mode = transaction\ndefault_pool_size = 1\ncancel_wait_timeout = 15\nquery_wait_timeout = 120\n", blackholeDials(&blackhole))
		c := r.connect("u", nil)
		got := c.queryAsync("SLEEP") // 10 s on the fake
		r.sleepUntil(time.Second)
		blackhole.Store(true)
		r.sendCancel(c)
		if rep := <-got; !rep.ready || rep.err != nil {
			t.Fatalf("the query, not cancelled: %+v", rep)
		}
		blackhole.Store(false)
		synctest.Wait()
		// The query is over at 11 s; its cancel request is given up at
		// 16 s (cancel_wait_timeout): until then the server waits in
		// being_canceled, neither idle nor lent.
		r.sleepUntil(12 * time.Second)

		// A replication client now waits for room: the pool's one server
		// is neither idle (to evict) nor free.
		rmine, rtheirs := net.Pipe()
		r.svc.serveConn(rtheirs)
		rc := &pipeClient{conn: rmine, fe: pgproto3.NewFrontend(rmine, rmine)}
		r.clients = append(r.clients, rc)
		rc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: 196608, Parameters: map[string]string{"user": "u", "database": "db", "replication": "database"}})
		if err := rc.fe.Flush(); err != nil {
			t.Fatal(err)
		}
		loggedIn := make(chan time.Time, 1)
		go func() {
			if rep := rc.readReply(); rep.ready && rep.err == nil {
				loggedIn <- time.Now()
			}
			close(loggedIn)
		}()
		r.sleepUntil(16*time.Second - time.Millisecond)
		select {
		case at := <-loggedIn:
			t.Fatalf("the replication client logged in at %v, while the pool was full", r.elapsed(at))
		default:
		}
		r.sleepUntil(17 * time.Second)
		select {
		case at, ok := <-loggedIn:
			if !ok {
				t.Fatal("the replication login failed")
			}
			if d := r.elapsed(at); d < 16*time.Second {
				t.Errorf("logged in at %v", d)
			}
		default:
			t.Fatalf("the replication client still waits a second after cancelDone freed the server:\n%s", r.log.String())
		}
	})
}
