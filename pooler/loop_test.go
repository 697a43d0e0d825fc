package pooler

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgturnstile/pgturnstile/admin"
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
	tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, "default_pool_size = 2\nevent_loop = 1\n")
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

// TestLoopWaitsForServers: with more clients than servers, requests queue
// for a server on the event loop (granted through a Post when a server is
// released), every request is answered, and when all is done every server
// is back idle in the pool, none leaked to a wait that ended.
func TestLoopWaitsForServers(t *testing.T) {
	if !netpoll.CanLoop {
		t.Skip("no event loop on this system")
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, "default_pool_size = 2\nevent_loop = 1\n")
	defer tp.shutdown(t, fake)

	const clients, queries = 8, 40
	conns := make([]net.Conn, clients)
	for i := range conns {
		conns[i], _ = dialStateClient(t, tp)
		defer conns[i].Close()
		stateQuery(t, conns[i], "SELECT 1", 'I')
	}
	before := tp.svc.loopRelays.Load()
	errs := make(chan error, clients)
	for _, conn := range conns {
		go func() {
			for range queries {
				if err := queryReady(conn, "SELECT 1"); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := tp.svc.loopRelays.Load() - before; got < clients*queries/2 {
		t.Errorf("the loop relayed %d of %d replies", got, clients*queries)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var row *admin.Pool
		pools := tp.svc.Console().Pools()
		for i := range pools {
			if pools[i].Database == "cs" {
				row = &pools[i]
			}
		}
		if row != nil && row.SvActive == 0 && row.SvIdle >= 1 && row.SvIdle <= 2 && row.ClWaiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers not all back idle: %+v", row)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// queryReady sends a simple Query and reads to its ReadyForQuery, which
// must say idle, with no error on the way.
func queryReady(conn net.Conn, q string) error {
	if _, err := conn.Write(encode(&pgproto3.Query{String: q})); err != nil {
		return err
	}
	br := newBackendReader(conn)
	for {
		typ, body, err := br.next()
		switch {
		case err != nil:
			return err
		case typ == 'E':
			return fmt.Errorf("error: %q", body)
		case typ == 'Z' && body[0] != 'I':
			return fmt.Errorf("ReadyForQuery %q", body[0])
		case typ == 'Z':
			return nil
		}
	}
}
