package pooler

import (
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// TestParkedClientResumesWhenServeReturns parks a client, ends Serve, and
// checks that the parker's goroutine ended with it, that the client was
// resumed rather than left in a closed epoll set, and that it is then
// served as a client that never parked (a query, then its Terminate)
// until it leaves, with no pooler goroutine left after that.
func TestParkedClientResumesWhenServeReturns(t *testing.T) {
	if !netpoll.CanPark {
		t.Skip("clients never park on this system")
	}
	fake := startFakePostgres(t)
	defer fake.Close()
	tp := startTestPooler(t, fake, map[string]string{"pk": "user=pk pool_mode=transaction"}, "")
	defer tp.stop()

	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := newBackendReader(conn)
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "pk"}, {"database", "pk"}})); err != nil {
		t.Fatal(err)
	}
	readyAfterPark(t, br)

	// Silent after its login, the client parks parkAfterLogin later.
	waitParkTest(t, "the client to park", func() bool { return tp.svc.ParkedClients() == 1 })

	tp.stop()
	select {
	case err := <-tp.served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if n := tp.svc.ParkedClients(); n != 0 {
		t.Errorf("%d clients still parked after Serve returned; want 0 (resumed)", n)
	}
	waitParkTest(t, "the parker's goroutine to end", func() bool {
		return !parkingRunLives()
	})

	// A client left parked would never be answered.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(parkTestQuery("SELECT 1")); err != nil {
		t.Fatal(err)
	}
	readyAfterPark(t, br)
	if _, err := conn.Write([]byte{'X', 0, 0, 0, 4}); err != nil {
		t.Fatal(err)
	}
	if typ, _, err := br.next(); !isClosed(err) {
		t.Fatalf("after Terminate: message %q, error %v; want the connection closed", typ, err)
	}
	fake.Close()
	waitParkTest(t, "the pooler's goroutines to end", func() bool {
		return len(poolerGoroutines(func(string) bool { return true })) == 0
	})
}

// readyAfterPark reads the pooler's replies up to ReadyForQuery and fails
// on an ErrorResponse.
func readyAfterPark(t *testing.T, br *backendReader) {
	t.Helper()
	for {
		typ, body, err := br.next()
		if err != nil {
			t.Fatalf("reading up to ReadyForQuery: %v", err)
		}
		switch typ {
		case 'E':
			t.Fatalf("ErrorResponse %q", body)
		case 'Z':
			return
		}
	}
}

// parkTestQuery is a simple Query.
func parkTestQuery(sql string) []byte {
	n := 4 + len(sql) + 1
	b := []byte{'Q', byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	b = append(b, sql...)
	return append(b, 0)
}

// waitParkTest polls cond until it holds, failing the test after 10 s (a bound
// for a stuck test, not a timing being checked).
func waitParkTest(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// parkingRunLives reports whether the goroutine of a parking.Lot (the
// parker's epoll set) is running.
func parkingRunLives() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			if strings.HasPrefix(line, "github.com/pgturnstile/pgturnstile/internal/parking.(*Lot[") && strings.Contains(line, "]).run(") {
				return true
			}
		}
	}
	return false
}
