//go:build linux

package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// What a logged-in client can make the pooler hold (issue 15): messages
// the pooler must look inside are held whole only up to a cap and within
// a global budget; the rest are streamed or refused from their header,
// whatever length they claim. A normal client is served throughout.

const hostileSize = 200 << 20

// gaugeValue reads one unlabelled gauge from /metrics.
func gaugeValue(t testing.TB, p *Pooler, name string) float64 {
	t.Helper()
	v, err := scrapeGauge(p, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func scrapeGauge(p *Pooler, name string) (float64, error) {
	resp, err := http.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// heapSampler records the largest value of one of the pooler's heap
// gauges while it runs.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	max  atomic.Int64
}

func sampleHeap(t testing.TB, p *Pooler) *heapSampler {
	return sampleGauge(p, "go_memstats_heap_inuse_bytes")
}

func sampleGauge(p *Pooler, name string) *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			if v, err := scrapeGauge(p, name); err == nil && int64(v) > h.max.Load() {
				h.max.Store(int64(v))
			}
			select {
			case <-h.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return h
}

func (h *heapSampler) end() int64 {
	close(h.stop)
	<-h.done
	return h.max.Load()
}

// steadyClient runs SELECT 1 in a loop until stopped and reports failures.
func steadyClient(t testing.TB, connstr string) (stop func() (ok int, errs []error)) {
	ctx, cancel := context.WithCancel(context.Background())
	c := connectPgconn(t, connstr)
	var (
		wg   sync.WaitGroup
		n    int
		errs []error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := c.Exec(qctx, "SELECT 1").ReadAll()
			qcancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "1" {
				errs = append(errs, fmt.Errorf("SELECT 1: %v %v", res, err))
				return
			}
			n++
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() (int, []error) {
		cancel()
		wg.Wait()
		return n, errs
	}
}

// header is a message header claiming a body of n bytes.
func header(typ byte, n int) []byte {
	return binary.BigEndian.AppendUint32([]byte{typ}, uint32(n+4))
}

// readUntil reads backend messages until fn says stop or the connection
// ends; it returns the errors seen.
func readErrors(t testing.TB, fe *pgproto3.Frontend, untilReady bool) []*pgproto3.ErrorResponse {
	t.Helper()
	var got []*pgproto3.ErrorResponse
	for {
		msg, err := fe.Receive()
		if err != nil {
			return got
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			e := *m
			got = append(got, &e)
			if m.Severity == "FATAL" {
				return got
			}
		case *pgproto3.ReadyForQuery:
			if untilReady {
				return got
			}
		}
	}
}

func TestHostileMessagesMemoryBounded(t *testing.T) {
	needPG(t)
	p := startPoolerWithMetrics(t, map[string]string{"default_pool_size": "4"}, "")
	// On another database: the test ends by KILLing the app database.
	stopSteady := steadyClient(t, p.ConnString(otherDB, appUser, appPassword))
	time.Sleep(200 * time.Millisecond)
	base := gaugeValue(t, p, "go_memstats_heap_inuse_bytes")
	t.Logf("heap in use at the start: %.1f MiB", base/(1<<20))
	const slack = 16 << 20 // the steady client, GC timing, metrics scrapes

	// Refused from the header, whatever they claim: nothing is read.
	refused := []struct {
		name, db, user, pass string
		typ                  byte
		code, message        string
	}{
		{"Describe", appDB, appUser, appPassword, 'D', "08P01", "invalid message length"},
		{"Close", appDB, appUser, appPassword, 'C', "08P01", "invalid message length"},
		{"console Query as admin", "pgbouncer", adminUser, adminPass, 'Q', "54000", "query too long for the admin console (pkt_buf = 4096)"},
		{"console Query as stats user", "pgbouncer", statsUser, statsPass, 'Q', "54000", "query too long for the admin console (pkt_buf = 4096)"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			h := sampleHeap(t, p)
			fe, conn := rawLogin(t, fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=disable", p.Port, c.db, c.user, c.pass))
			msg := append(header(c.typ, hostileSize), 'S')
			msg = append(msg, strings.Repeat("x", 2000)...)
			if _, err := conn.Write(msg); err != nil {
				t.Fatal(err)
			}
			errs := readErrors(t, fe, false)
			if len(errs) == 0 || errs[len(errs)-1].Severity != "FATAL" || errs[len(errs)-1].Code != c.code || errs[len(errs)-1].Message != c.message {
				t.Fatalf("got %+v, want FATAL %s %s", errs, c.code, c.message)
			}
			grew := float64(h.end()) - base
			t.Logf("%s claiming %d MiB: heap in use grew by at most %.1f MiB", c.name, hostileSize>>20, grew/(1<<20))
			if grew > slack {
				t.Errorf("heap grew by %.1f MiB", grew/(1<<20))
			}
		})
	}

	// A named Parse over max_held_message_size (64 MiB): the pooler cannot
	// map it without holding it, so it reads it through and refuses it in
	// order; the client stays connected. An unnamed one is streamed to
	// Postgres, which answers it.
	t.Run("Parse", func(t *testing.T) {
		for _, named := range []bool{true, false} {
			h := sampleHeap(t, p)
			fe, conn := rawLogin(t, p.App())
			name := ""
			if named {
				name = "huge"
			}
			prefix := "SELECT length('"
			suffix := "')"
			body := len(name) + 1 + len(prefix) + hostileSize + len(suffix) + 1 + 2
			w := &chunkWriter{conn: conn}
			w.write(header('P', body))
			w.write([]byte(name + "\x00" + prefix))
			w.repeat('x', hostileSize)
			w.write([]byte(suffix + "\x00\x00\x00"))
			tail := []pgproto3.FrontendMessage{}
			if !named {
				tail = append(tail, &pgproto3.Bind{}, &pgproto3.Execute{})
			}
			tail = append(tail, &pgproto3.Sync{})
			for _, m := range tail {
				b, _ := m.Encode(nil)
				w.write(b)
			}
			if w.err != nil {
				t.Fatal(w.err)
			}
			var gotErr *pgproto3.ErrorResponse
			var gotRow string
			for done := false; !done; {
				msg, err := fe.Receive()
				if err != nil {
					t.Fatalf("named=%v: %v", named, err)
				}
				switch m := msg.(type) {
				case *pgproto3.ErrorResponse:
					e := *m
					gotErr = &e
				case *pgproto3.DataRow:
					gotRow = string(m.Values[0])
				case *pgproto3.ReadyForQuery:
					done = true
				}
			}
			if named {
				if gotErr == nil || gotErr.Code != "54000" || !strings.Contains(gotErr.Message, "max_held_message_size") {
					t.Fatalf("named: got %+v, want ERROR 54000 max_held_message_size", gotErr)
				}
			} else if gotErr != nil || gotRow != strconv.Itoa(hostileSize) {
				t.Fatalf("unnamed: row %q, error %+v", gotRow, gotErr)
			}
			// Still usable.
			b, _ := (&pgproto3.Query{String: "SELECT 2"}).Encode(nil)
			if _, err := conn.Write(b); err != nil {
				t.Fatal(err)
			}
			if errs := readErrors(t, fe, true); len(errs) != 0 {
				t.Fatalf("after: %+v", errs)
			}
			grew := float64(h.end()) - base
			t.Logf("Parse of %d MiB, named=%v: heap in use grew by at most %.1f MiB", hostileSize>>20, named, grew/(1<<20))
			if grew > slack {
				t.Errorf("named=%v: heap grew by %.1f MiB for a %d MiB Parse", named, grew/(1<<20), hostileSize>>20)
			}
		}
	})

	// A named Parse under the cap is held once: about its own size while
	// it is registered, and nothing once its client has gone.
	t.Run("held Parse", func(t *testing.T) {
		const size = 32 << 20
		stmtBase := gaugeValue(t, p, "pgturnstile_prepared_statement_bytes")
		// The live heap (as the last collection found it) is what the
		// pooler holds; heap in use also counts garbage awaiting the next
		// collection, up to as much again as is live (GOGC=100).
		liveBase := gaugeValue(t, p, "go_gc_heap_live_bytes")
		live := sampleGauge(p, "go_gc_heap_live_bytes")
		h := sampleHeap(t, p)
		pc := connectPgconn(t, p.App())
		ctx := ctxT(t, 60*time.Second)
		sql := "SELECT length('" + strings.Repeat("y", size) + "') + $1::int"
		if _, err := pc.Prepare(ctx, "held", sql, nil); err != nil {
			t.Fatal(err)
		}
		if got := execPrepared(t, ctx, pc, "held", "0"); got != strconv.Itoa(size) {
			t.Fatalf("got %s", got)
		}
		held := gaugeValue(t, p, "pgturnstile_prepared_statement_bytes") - stmtBase
		if held < size || held > size+1024 {
			t.Errorf("prepared_statement_bytes grew by %.0f, want about %d", held, size)
		}
		pc.Close(ctx)
		grewLive := float64(live.end()) - liveBase
		grewInuse := float64(h.end()) - base
		t.Logf("held Parse of %d MiB: live heap grew by at most %.1f MiB, heap in use by %.1f MiB", size>>20, grewLive/(1<<20), grewInuse/(1<<20))
		if grewLive > 1.1*size+4<<20 {
			t.Errorf("live heap grew by %.1f MiB for a %d MiB statement", grewLive/(1<<20), size>>20)
		}
		// The servers keep the statement warm for other clients (up to
		// max_prepared_statements each): its text goes with the last of
		// them.
		if held := gaugeValue(t, p, "pgturnstile_prepared_statement_bytes") - stmtBase; held < size {
			t.Errorf("statement text gone while servers hold it: %.0f", held)
		}
		con := consoleAs(t, p, adminUser, adminPass, nil)
		for _, q := range []string{"KILL " + appDB, "RESUME " + appDB} {
			if _, err := con.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		waitFor(t, 10*time.Second, "statement text released", func() bool {
			return gaugeValue(t, p, "pgturnstile_prepared_statement_bytes") <= stmtBase
		})
		if v := gaugeValue(t, p, "pgturnstile_held_message_bytes"); v != 0 {
			t.Errorf("held_message_bytes = %v after the client left", v)
		}
	})

	n, errs := stopSteady()
	if len(errs) > 0 || n == 0 {
		t.Fatalf("steady client: %d queries, errors %v", n, errs)
	}
	t.Logf("steady client: %d queries, no error", n)
}

// TestHeldMessageBudget: clients together may hold at most
// held_message_budget in messages being received whole; the one that
// would pass it gets FATAL 53200 and goes, and the others go on.
func TestHeldMessageBudget(t *testing.T) {
	needPG(t)
	p := startPoolerWithMetrics(t, map[string]string{"held_message_budget": strconv.Itoa(24 << 20)}, "")
	// Client A starts a 20 MiB named Parse and stalls halfway: held.
	feA, connA := rawLogin(t, p.App())
	_ = feA
	const size = 20 << 20
	body := len("a\x00") + size + 1 + 2
	w := &chunkWriter{conn: connA}
	w.write(header('P', body))
	w.write([]byte("a\x00"))
	w.repeat('z', size/2)
	if w.err != nil {
		t.Fatal(w.err)
	}
	waitFor(t, 10*time.Second, "client A's Parse held", func() bool {
		return gaugeValue(t, p, "pgturnstile_held_message_bytes") >= size
	})
	// Client B's 20 MiB Parse does not fit beside it.
	feB, connB := rawLogin(t, p.App())
	w = &chunkWriter{conn: connB}
	w.write(header('P', body))
	w.write([]byte("b\x00"))
	// Exactly a read buffer's worth (4 KiB): the pooler waits for that
	// much of a message before it takes a server for it.
	w.write([]byte(strings.Repeat("z", 4096-5-2)))
	errs := readErrors(t, feB, false)
	if len(errs) != 1 || errs[0].Severity != "FATAL" || errs[0].Code != "53200" || errs[0].Message != "out of memory for client messages (held_message_budget)" {
		t.Fatalf("client B: %+v", errs)
	}
	// Others go on, and A finishes.
	selectOne(t, p.App())
	w = &chunkWriter{conn: connA}
	w.repeat('z', size-size/2)
	w.write([]byte("\x00\x00\x00"))
	b, _ := (&pgproto3.Sync{}).Encode(nil)
	w.write(b)
	if w.err != nil {
		t.Fatal(w.err)
	}
	var codes []string
	for _, e := range readErrors(t, feA, true) {
		codes = append(codes, e.Code)
	}
	if len(codes) != 1 || codes[0] != "42601" { // zzz… is a syntax error: Postgres parsed it
		t.Fatalf("client A: errors %v, want Postgres's 42601", codes)
	}
	connA.Close()
	waitFor(t, 10*time.Second, "budget empty", func() bool {
		return gaugeValue(t, p, "pgturnstile_held_message_bytes") == 0
	})
}

// chunkWriter writes a large message in pieces, remembering the first
// error.
type chunkWriter struct {
	conn net.Conn
	err  error
	buf  []byte
}

func (w *chunkWriter) write(b []byte) {
	if w.err == nil {
		_, w.err = w.conn.Write(b)
	}
}

func (w *chunkWriter) repeat(c byte, n int) {
	if w.buf == nil {
		w.buf = []byte(strings.Repeat(string(c), 1<<20))
	}
	for n > 0 && w.err == nil {
		k := min(n, len(w.buf))
		w.buf = w.buf[:k]
		for i := range w.buf {
			w.buf[i] = c
		}
		w.write(w.buf)
		n -= k
		w.buf = w.buf[:cap(w.buf)]
	}
}

func waitFor(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
