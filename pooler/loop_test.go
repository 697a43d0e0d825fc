package pooler

import (
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// TestLoopRunsRequests: a transaction-mode client's autocommit requests
// run on the event loop (the loop relays their replies), a transaction
// block leaves it for its goroutine and pump and comes back, and the
// answers are the server's either way.
func TestLoopRunsRequests(t *testing.T) {
	if !netpoll.CanLoop {
		t.Skip("no event loop on this system")
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, "default_pool_size = 2\n")
	defer tp.shutdown(t, fake)

	conn, c := dialStateClient(t, tp)
	defer conn.Close()
	stateQuery(t, conn, "SELECT 1", 'I') // the first after the login: its goroutine's
	before := tp.svc.loopRelays.Load()
	for range 50 {
		stateQuery(t, conn, "SELECT 1", 'I')
	}
	if got := tp.svc.loopRelays.Load() - before; got < 45 {
		t.Fatalf("the loop relayed %d of 50 autocommit replies", got)
	}
	// A transaction block: its first reply says 'T', and the rest is
	// the pump's.
	stateQuery(t, conn, "BEGIN", 'T')
	stateQuery(t, conn, "SELECT 1", 'T')
	stateQuery(t, conn, "COMMIT", 'I')
	// Back on the loop once the goroutine has served its share.
	before = tp.svc.loopRelays.Load()
	for range loopOffBatches + 20 {
		stateQuery(t, conn, "SELECT 1", 'I')
	}
	if got := tp.svc.loopRelays.Load() - before; got < 10 {
		t.Fatalf("the loop relayed %d replies after a transaction block", got)
	}
	// KILL_CLIENT reaches a client resting on the loop.
	time.Sleep(10 * time.Millisecond)
	if err := (consoleView{tp.svc}).KillClient(c.id); err != nil {
		t.Fatal(err)
	}
	waitClientState(t, tp, c, clientClosed, "")
}
