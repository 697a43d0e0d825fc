package pooler

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/admin"
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
		got := c.mu.state
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

// TestShowPoolsClientColumns checks SHOW POOLS' client columns, and the
// pool gauges that are read from them, against the states of real
// sessions: two logged-in clients, idle (parked where the system parks,
// or kept from parking by client_idle_timeout), count in cl_active, as
// PgBouncer's logged-in clients do; one in a transaction stays in
// cl_active; one queued for the pool's only server is cl_waiting and no
// longer cl_active; when it gets the server both are cl_active again; a
// client that left no longer counts.
func TestShowPoolsClientColumns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings string
		parks    bool
	}{
		{"parking", "default_pool_size = 1\n", netpoll.CanPark},
		{"no parking", "default_pool_size = 1\nclient_idle_timeout = 3600\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := startFakePostgres(t)
			tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, tc.settings)
			defer tp.shutdown(t, fake)

			a, ca := dialStateClient(t, tp)
			defer a.Close()
			b, cb := dialStateClient(t, tp)
			defer b.Close()
			settled := clientIdle
			if tc.parks {
				settled = clientParked
			}
			waitClientState(t, tp, ca, settled, "idle")
			waitClientState(t, tp, cb, settled, "idle")
			waitPoolClients(t, tp, "both idle ("+settled.String()+")", 2, 0)
			if n := ca.pool.clientsIn[settled].Load(); n != 2 {
				t.Fatalf("pool's count of %s clients %d, want 2", settled, n)
			}

			stateQuery(t, a, "BEGIN", 'T')
			waitClientState(t, tp, ca, clientActive, "active")
			waitPoolClients(t, tp, "a in a transaction", 2, 0)

			// b's statement needs the pool's one server, which a holds.
			if _, err := b.Write(encode(&pgproto3.Query{String: "SELECT 1"})); err != nil {
				t.Fatal(err)
			}
			waitClientState(t, tp, cb, clientWaiting, "waiting")
			waitPoolClients(t, tp, "b queued for a's server", 1, 1)

			stateQuery(t, a, "COMMIT", 'I')
			readUntilReady(t, b, 'I') // b got the server and its answer
			waitClientState(t, tp, cb, clientIdle, "idle")
			waitPoolClients(t, tp, "both served", 2, 0)

			a.Close()
			waitClientState(t, tp, ca, clientClosed, "")
			waitPoolClients(t, tp, "a left", 1, 0)
			b.Write(encode(&pgproto3.Terminate{}))
			waitClientState(t, tp, cb, clientClosed, "")
			waitPoolClients(t, tp, "both left", 0, 0)
			if n := cb.pool.clientsInPool(); n != 0 {
				t.Fatalf("%d clients counted in the pool after both left, want 0", n)
			}
		})
	}
}

// waitPoolClients waits until SHOW POOLS shows the cs pool with cl_active
// and cl_waiting as wanted, the cancel-request columns at zero, and the
// pool gauges with the same numbers. Polled like waitClientState: the
// pooler's goroutines move after the client has its answer.
func waitPoolClients(t *testing.T, tp *testPooler, step string, active, waiting int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var row admin.Pool
		for _, r := range tp.svc.Console().Pools() {
			if r.Database == "cs" && r.User == "cs" {
				row = r
			}
		}
		var m strings.Builder
		tp.svc.WriteMetrics(&m)
		gauges := []string{
			fmt.Sprintf("pgturnstile_pool_clients_active%s %d\n", poolLabels("cs", "cs"), active),
			fmt.Sprintf("pgturnstile_pool_clients_waiting%s %d\n", poolLabels("cs", "cs"), waiting),
		}
		ok := row.ClActive == active && row.ClWaiting == waiting &&
			row.ClActiveCancelReq == 0 && row.ClWaitingCancelReq == 0 &&
			strings.Contains(m.String(), gauges[0]) && strings.Contains(m.String(), gauges[1])
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: SHOW POOLS cs/cs cl_active %d cl_waiting %d cancel_req %d/%d; want %d %d 0/0; gauges want\n%s",
				step, row.ClActive, row.ClWaiting, row.ClActiveCancelReq, row.ClWaitingCancelReq, active, waiting, strings.Join(gauges, ""))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestShowPoolsFirstLoginWaits: the first client of a pool waits, inside
// its login, for the server login whose parameters its welcome carries;
// it is then one of the pool's clients (welcome) and queued, so SHOW POOLS
// shows it in cl_waiting and not in cl_active, as PgBouncer does a client
// in CL_WAITING_LOGIN. Here the wait is made to last by a PAUSE, which
// the pool, made by that login, inherits; RESUME ends it, and the client,
// logged in, is cl_active.
func TestShowPoolsFirstLoginWaits(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, "default_pool_size = 1\n")
	defer tp.shutdown(t, fake)
	if err := tp.svc.Console().Pause("cs"); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "cs"}, {"database", "cs"}})); err != nil {
		t.Fatal(err)
	}
	waitPoolClients(t, tp, "first login waiting for its server", 0, 1)
	var p *serverPool
	for _, q := range tp.svc.allPools() {
		if q.key.db == "cs" {
			p = q
		}
	}
	if n := p.clientsIn[clientWelcome].Load(); n != 1 {
		t.Fatalf("pool's count of clients in welcome %d, want 1", n)
	}
	if err := tp.svc.Console().Resume("cs"); err != nil {
		t.Fatal(err)
	}
	readUntilReady(t, conn, 'I') // the welcome
	waitPoolClients(t, tp, "logged in", 1, 0)
	// The client leaves welcome when its loop starts, just after the
	// welcome went out: the count gets there, and stays.
	deadline := time.Now().Add(10 * time.Second)
	for p.clientsIn[clientWelcome].Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pool's count of clients in welcome %d after the login, want 0", p.clientsIn[clientWelcome].Load())
		}
		time.Sleep(time.Millisecond)
	}
}
