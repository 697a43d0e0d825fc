package pooler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

// TestLoopSeesHangUps: a peer's last bytes and its end often come in one
// edge-triggered event. A client on the loop that sends part of a message
// and shuts its side, and a server that sends FATAL and closes while the
// loop awaits its reply, are both seen to their end: the client is closed
// (its read meets EOF), and the client of the dead server gets the FATAL
// and is closed, with no request left hanging on a wait for an edge that
// no socket will give.
func TestLoopSeesHangUps(t *testing.T) {
	if !netpoll.CanLoop {
		t.Skip("no event loop on this system")
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, "default_pool_size = 4\nevent_loop = 1\n")
	defer tp.shutdown(t, fake)

	const rounds = 30
	// onLoop logs a client in and runs queries until it rests on the loop.
	onLoop := func() (net.Conn, *client) {
		conn, c := dialStateClient(t, tp)
		before := tp.svc.loopRelays.Load()
		for i := 0; tp.svc.loopRelays.Load() == before; i++ {
			if i == 100 {
				t.Fatal("no reply relayed by the loop after 100 queries")
			}
			stateQuery(t, conn, "SELECT 1", 'I')
		}
		return conn, c
	}
	// ends reads conn to its end: a clean EOF within the deadline, after
	// a FATAL when wantFatal.
	ends := func(conn net.Conn, wantFatal bool) error {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := newBackendReader(conn)
		fatal := false
		for {
			typ, body, err := br.next()
			switch {
			case errors.Is(err, io.EOF):
				if wantFatal && !fatal {
					return errors.New("closed without the server's FATAL")
				}
				return nil
			case err != nil:
				return err
			case typ == 'E' && bytes.Contains(body, []byte("FATAL")):
				fatal = true
			}
		}
	}

	// A partial message, then the client's end, in one write burst. The
	// janitor's park request (after parkAfter) would pull such a client
	// off the loop and end it too: the loop must have ended it itself.
	for i := range rounds {
		conn, c := onLoop()
		frame := encode(&pgproto3.Query{String: "SELECT 1"})
		if _, err := conn.Write(frame[:len(frame)-3]); err != nil {
			t.Fatal(err)
		}
		conn.(*net.TCPConn).CloseWrite()
		if err := ends(conn, false); err != nil {
			t.Fatalf("round %d: the pooler did not close a client that hung up mid-message: %v", i, err)
		}
		waitClientState(t, tp, c, clientClosed, "")
		if c.parkWanted.Load() {
			t.Fatalf("round %d: a client that hung up mid-message was ended by the janitor's park request, not by the loop", i)
		}
		conn.Close()
	}
	// The server's FATAL and its end, while the loop awaits the reply.
	for i := range rounds {
		conn, _ := onLoop()
		if _, err := conn.Write(encode(&pgproto3.Query{String: "SELECT 1 -- fail_fatal"})); err != nil {
			t.Fatal(err)
		}
		if err := ends(conn, true); err != nil {
			t.Fatalf("round %d: the client of a server that sent FATAL and closed: %v", i, err)
		}
		conn.Close()
	}
}
