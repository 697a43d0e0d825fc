package pooler

import (
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// TestClientStatesFollowASession drives real sessions through the pooler
// in front of the fake server and checks that each client's state, and
// what SHOW CLIENTS shows for it, follows: idle (or parked) after login,
// active in a transaction, waiting for the pool's only server while
// another client holds it, idle after the transaction, draining when it
// hangs up in a transaction, closed at the end.
func TestClientStatesFollowASession(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, "default_pool_size = 1\n")
	defer tp.shutdown(t, fake)

	a, ca := dialStateClient(t, tp)
	defer a.Close()
	b, cb := dialStateClient(t, tp)
	defer b.Close()
	// Silent after its login, a client parks where the system can.
	settled := clientIdle
	if netpoll.CanPark {
		settled = clientParked
	}
	waitClientState(t, tp, ca, settled, "idle")

	stateQuery(t, a, "BEGIN", 'T')
	waitClientState(t, tp, ca, clientActive, "active")

	// b's statement needs the pool's one server, which a holds.
	if _, err := b.Write(encode(&pgproto3.Query{String: "SELECT 1"})); err != nil {
		t.Fatal(err)
	}
	waitClientState(t, tp, cb, clientWaiting, "waiting")

	stateQuery(t, a, "COMMIT", 'I')
	waitClientState(t, tp, ca, clientIdle, "idle")
	readUntilReady(t, b, 'I') // b got the server and its answer
	waitClientState(t, tp, cb, clientIdle, "idle")

	// a hangs up inside a transaction: its server drains, and the
	// client ends.
	stateQuery(t, a, "BEGIN", 'T')
	waitClientState(t, tp, ca, clientActive, "active")
	a.Close()
	waitClientState(t, tp, ca, clientClosed, "")
	if !ca.gone.Load() {
		t.Fatalf("client left in a transaction, closed without having drained (gone not set)")
	}

	b.Write(encode(&pgproto3.Terminate{}))
	waitClientState(t, tp, cb, clientClosed, "")
	if cb.gone.Load() {
		t.Fatalf("client that left with no server linked was marked as draining")
	}
}

// dialStateClient logs a client in and returns its connection and the
// pooler's client for it.
func dialStateClient(t *testing.T, tp *testPooler) (net.Conn, *client) {
	t.Helper()
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "cs"}, {"database", "cs"}})); err != nil {
		t.Fatal(err)
	}
	br := newBackendReader(conn)
	var key []byte
	for {
		typ, body, err := br.next()
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		switch typ {
		case 'E':
			t.Fatalf("login refused: %q", body)
		case 'K':
			key = append([]byte(nil), body[:8]...)
		}
		if typ == 'Z' {
			break
		}
	}
	c := tp.clientByKey(key)
	if c == nil {
		t.Fatalf("no client with the key the pooler sent")
	}
	return conn, c
}

// stateQuery runs a simple query and reads its answer up to a
// ReadyForQuery with status want.
func stateQuery(t *testing.T, conn net.Conn, q string, want byte) {
	t.Helper()
	if _, err := conn.Write(encode(&pgproto3.Query{String: q})); err != nil {
		t.Fatal(err)
	}
	readUntilReady(t, conn, want)
}

func readUntilReady(t *testing.T, conn net.Conn, want byte) {
	t.Helper()
	br := newBackendReader(conn)
	for {
		typ, body, err := br.next()
		if err != nil {
			t.Fatal(err)
		}
		if typ == 'E' {
			t.Fatalf("error: %q", body)
		}
		if typ == 'Z' {
			if body[0] != want {
				t.Fatalf("ReadyForQuery %q, want %q", body[0], want)
			}
			return
		}
	}
}

// waitClientState waits until c is in state want and, when show is set,
// SHOW CLIENTS lists it so. The pooler moves on its own goroutines after
// the client has its answer, so the state is polled, up to a bound far
// above any scheduling delay.
func waitClientState(t *testing.T, tp *testPooler, c *client, want clientState, show string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		got := c.state
		c.mu.Unlock()
		shown := ""
		if show != "" {
			for _, row := range tp.svc.Console().Clients() {
				if row.ID == c.id {
					shown = row.State
				}
			}
		}
		if got == want && shown == show {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %s, SHOW CLIENTS %q; want %s, %q", c, got, shown, want, show)
		}
		time.Sleep(time.Millisecond)
	}
}
