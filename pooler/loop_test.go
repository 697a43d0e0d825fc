package pooler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	tp := startLoopPooler(t, "default_pool_size = 2\n")

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
	tp := startLoopPooler(t, "default_pool_size = 2\n")

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
// no socket will give. And a client that hangs up after a request whose
// reply never ends (a Describe that fails, then a Query without a Sync:
// the server skips the Query) is closed, as serve closes it, where the
// loop, which reads the client after the reply, waited on the server for
// good (found by FuzzSession under PGTURNSTILE_EVENT_LOOP_DEFAULT=1).
func TestLoopSeesHangUps(t *testing.T) {
	// Prepared statements mapped, as in FuzzSession's Service: the third
	// case showed there, and shows within these rounds only so.
	tp := startLoopPooler(t, "default_pool_size = 4\nmax_prepared_statements = 3\n")

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
	// A reply that never ends, then the client's end. Each message is a
	// write of its own, as the fuzzer's client sent them.
	unended := [][]byte{
		encode(&pgproto3.Bind{}), encode(&pgproto3.Execute{}), encode(&pgproto3.Sync{}),
		encode(&pgproto3.Describe{ObjectType: 'P'}), encode(&pgproto3.Query{String: "SELECT 1"}),
	}
	for i := range rounds {
		conn, c := onLoop()
		for _, m := range unended {
			if _, err := conn.Write(m); err != nil {
				t.Fatal(err)
			}
		}
		conn.(*net.TCPConn).CloseWrite()
		if err := ends(conn, false); err != nil {
			t.Fatalf("round %d: a client that hung up on a reply that never ends: %v", i, err)
		}
		waitClientState(t, tp, c, clientClosed, "")
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

// TestFuzzSessionRepeats plays FuzzSession inputs whose failure needed
// the Service's state from an input before them (the statements its
// mapping holds), so that running each once, as the seed corpus does, no
// longer shows it: each, several times through one harness. 678f36…
// sends a Query, a Describe of the unnamed statement that fails, and a
// Query without a Sync between them, then more and its Sync: on the
// event loop (PGTURNSTILE_EVENT_LOOP_DEFAULT=1, as make test's second
// pass runs this package) the loop awaited that last Query's reply,
// which the server skips until the Sync, before reading the Sync, and
// the session hung from the second play on (link.serve.unsynced).
func TestFuzzSessionRepeats(t *testing.T) {
	h := newSessionHarness(t)
	defer h.close(t)
	for _, name := range []string{"678f36685a8935f2", "f59576ec6276e0be"} {
		b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzSession", name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		data, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range 10 {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) { h.run(t, []byte(data)) })
		}
	}
}

// startLoopPooler starts a Service with event_loop = 1 and the settings
// in ini, in front of a fake, with one transaction-mode database, cs;
// both end with the test. It skips where there is no event loop.
func startLoopPooler(t *testing.T, ini string) *testPooler {
	t.Helper()
	if !netpoll.CanLoop {
		t.Skip("no event loop on this system")
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, "event_loop = 1\n"+ini)
	t.Cleanup(func() { tp.shutdown(t, fake) })
	return tp
}
