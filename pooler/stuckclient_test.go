package pooler

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestClientThatStopsReadingHoldsNoLock: a client that sends query after
// query and never reads the replies leaves the pooler blocked writing to
// it.
// That write must not hold the client's lock, which KILL_CLIENT, SHOW
// CLIENTS, cancel requests and the janitor's park scan (requestParks,
// shared by every pool) take; KILL_CLIENT must end it. The lock audit's
// H1: afterReady flushed the client writer under c.mu, and dropClient
// took c.mu to find the socket it would close.
//
// One test on purpose, longer than most: each step needs the state the
// previous one built (a pooler stuck writing to this client).
func TestClientThatStopsReadingHoldsNoLock(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": "user=cs pool_mode=transaction"}, "default_pool_size = 1\n")
	defer tp.shutdown(t, fake)

	conn, c := dialStateClient(t, tp)
	defer conn.Close()
	stateQuery(t, conn, "SELECT 1", 'I') // resumed if it parked after its login
	// The socket buffers stay as they are (it takes some megabytes of
	// replies to fill them: each reply carries the fake's 8 KiB row, so a
	// thousand do): shrunk with SO_SNDBUF or SO_RCVBUF, loopback TCP
	// stalled in both directions and the client parked instead.
	// dialStateClient's deadline goes: conn.Close at the end stops the
	// writer whatever happens.
	conn.SetDeadline(time.Time{})
	// The client sends queries until its socket fails (the kill) and
	// reads nothing. One at a time, so that serve mostly finds one alone
	// and relays its reply itself, and the write that blocks is the
	// flush that ends each link (afterReady), not one in the middle of a
	// pipelined reply.
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		q := encode(&pgproto3.Query{String: "SELECT 1 " + string(fakeBigRowMarker)})
		for {
			if _, err := conn.Write(q); err != nil {
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()

	// Wait until the pooler is blocked writing to the client (its
	// goroutine waiting for room inside a client writer's Flush). A
	// generous bound: the test fails if it never happens.
	stuck := false
	var last []string
	for limit := time.Now().Add(60 * time.Second); !stuck && time.Now().Before(limit); {
		last = poolerGoroutines(func(fn string) bool { return strings.HasPrefix(fn, "(*client)") || strings.HasPrefix(fn, "(*link)") })
		for _, g := range last {
			// The client is written only where a link's replies are
			// relayed (pumpRun, inline or as the pump): a ReadyForQuery
			// ends in the writer's Flush, the fake's big row is streamed
			// through it by Reader.Forward. serve's writes to the server
			// are under flushBatch.
			// Blocked in net's netpoller, or in netpoll.Conn's wait for
			// room (a client accepted without net).
			blocked := strings.Contains(g, "[IO wait") ||
				strings.Contains(g, "[chan receive") && strings.Contains(g, "netpoll.(*Conn).Write(")
			if blocked && strings.Contains(g, "wire.(*Writer).") && strings.Contains(g, "(*link).pumpRun(") {
				stuck = true
			}
			// Or the event loop relayed the reply and kept what the
			// socket could not take (write-behind): the goroutine it
			// handed the client to waits for room to write it (loop.go).
			if strings.Contains(g, "[chan receive") && strings.Contains(g, "netpoll.(*Conn).FlushBehind(") &&
				strings.Contains(g, "(*client).serveAfterLoop(") {
				stuck = true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !stuck {
		t.Fatalf("the pooler never blocked writing to the client that reads nothing:\n%s\n%s", strings.Join(last, "\n\n"), tp.log.tail())
	}

	// The writer blocked for good: the client's lock is free. Others
	// take it for moments (the janitor), so it is tried a few times;
	// held across the write, it is never free.
	free := false
	for range 100 {
		if free = c.mu.TryLock(); free {
			c.mu.Unlock()
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !free {
		t.Fatal("the client's lock is held while the pooler is blocked writing to the client")
	}

	// The janitor's park scan and KILL_CLIENT return. Both would wait for
	// the lock forever; the bound is the test's, not a timing claim.
	parked := make(chan struct{})
	go func() {
		tp.svc.requestParks(tp.svc.clock.Now())
		close(parked)
	}()
	killed := make(chan error, 1)
	go func() { killed <- consoleView{tp.svc}.KillClient(c.id) }()
	bound := time.After(20 * time.Second)
	select {
	case <-parked:
	case <-bound:
		t.Fatal("requestParks is blocked on the client that reads nothing")
	}
	select {
	case err := <-killed:
		if err != nil {
			t.Fatalf("KillClient: %v", err)
		}
	case <-bound:
		t.Fatal("KillClient is blocked on the client that reads nothing")
	}
	// The kill closed the client's socket: the pooler's blocked write
	// fails, and the client ends.
	select {
	case <-writerDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the killed client's socket still takes writes")
	}
	waitClientState(t, tp, c, clientClosed, "")
}
