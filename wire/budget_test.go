package wire

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBudgetReserveRelease(t *testing.T) {
	b := NewBudget(100)
	if b.Limit() != 100 || b.InUse() != 0 {
		t.Fatalf("new budget: limit %d, in use %d", b.Limit(), b.InUse())
	}
	if !b.reserve(60) || b.InUse() != 60 {
		t.Fatalf("reserve 60: in use %d", b.InUse())
	}
	if b.reserve(41) || b.InUse() != 60 {
		t.Fatalf("reserve 41 of the 40 left succeeded or took something: in use %d", b.InUse())
	}
	if !b.reserve(40) || b.InUse() != 100 {
		t.Fatalf("reserve the last 40: in use %d", b.InUse())
	}
	b.release(100)
	if b.InUse() != 0 || !b.reserve(100) {
		t.Fatalf("after release: in use %d", b.InUse())
	}
	b.release(100)

	// No limit: everything is granted and still counted.
	u := NewBudget(0)
	if !u.reserve(1<<40) || u.InUse() != 1<<40 {
		t.Fatalf("unlimited budget: in use %d", u.InUse())
	}
	u.release(1 << 40)

	defer func() {
		if recover() == nil {
			t.Fatal("releasing more than reserved did not panic")
		}
	}()
	b.release(1)
}

// big returns a message of n body bytes that does not fit a 64-byte buffer
// when n > 59.
func bigMsg(typ byte, n int, seed byte) []byte { return frame(typ, pattern(n, seed)) }

func TestReadBodyBudget(t *testing.T) {
	var in bytes.Buffer
	in.Write(bigMsg('P', 500, 1))
	in.Write(frame('S', nil))      // fits: never charged
	in.Write(bigMsg('P', 2000, 2)) // over the budget
	in.Write(bigMsg('P', 1000, 3)) // exactly the budget
	in.Write(bigMsg('P', 300, 4))  // released by DropBuffer
	b := NewBudget(1000)
	r := NewReader(&in, 64)
	r.SetBudget(b)

	next := func(wantLen int) {
		t.Helper()
		if _, n, err := r.Next(); err != nil || n != wantLen {
			t.Fatalf("Next: %d %v, want %d", n, err, wantLen)
		}
	}
	next(500)
	body, err := r.ReadBody(nil)
	if err != nil || !bytes.Equal(body, pattern(500, 1)) {
		t.Fatalf("ReadBody: %v", err)
	}
	if cap(body) != 500 {
		t.Fatalf("ReadBody allocated %d bytes for a 500-byte body", cap(body))
	}
	if b.InUse() != 500 {
		t.Fatalf("in use %d while the body is current, want 500", b.InUse())
	}
	next(0) // the previous body is done with
	if b.InUse() != 0 {
		t.Fatalf("in use %d after Next, want 0", b.InUse())
	}
	if body, err := r.ReadBody(nil); err != nil || len(body) != 0 || b.InUse() != 0 {
		t.Fatalf("small ReadBody: %q %v, in use %d", body, err, b.InUse())
	}

	next(2000)
	if _, err := r.ReadBody(nil); !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("ReadBody over the budget: %v, want ErrBudgetExceeded", err)
	}
	if b.InUse() != 0 {
		t.Fatalf("a refused body holds %d", b.InUse())
	}
	// Refused before reading: the whole message is still there.
	var out bytes.Buffer
	w := NewWriter(&out, 64)
	if err := r.Forward(w); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if !bytes.Equal(out.Bytes(), bigMsg('P', 2000, 2)) {
		t.Fatal("the refused message was not forwarded intact")
	}

	next(1000)
	if body, err := r.ReadBody(nil); err != nil || !bytes.Equal(body, pattern(1000, 3)) || b.InUse() != 1000 {
		t.Fatalf("ReadBody of the whole budget: %v, in use %d", err, b.InUse())
	}
	next(300)
	if _, err := r.ReadBody(nil); err != nil || b.InUse() != 300 {
		t.Fatalf("ReadBody: %v, in use %d", err, b.InUse())
	}
	if !r.DropBuffer() || b.InUse() != 0 {
		t.Fatalf("DropBuffer: in use %d, want 0", b.InUse())
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at the end: %v", err)
	}
}

// Two clients share a budget; what one holds is free again for the other
// once it leaves (Release).
func TestBudgetReleasedWhenClientLeaves(t *testing.T) {
	b := NewBudget(1000)
	r1 := NewReader(bytes.NewReader(bigMsg('P', 600, 1)), 64)
	r2 := NewReader(bytes.NewReader(bigMsg('P', 600, 2)), 64)
	r1.SetBudget(b)
	r2.SetBudget(b)
	r1.Next()
	r2.Next()
	if _, err := r1.ReadBody(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.ReadBody(nil); !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("second 600 of a 1000 budget: %v, want ErrBudgetExceeded", err)
	}
	r1.Release() // client 1 leaves
	r1.Release() // twice is harmless
	if b.InUse() != 0 {
		t.Fatalf("in use %d after the client left", b.InUse())
	}
	if body, err := r2.ReadBody(nil); err != nil || !bytes.Equal(body, pattern(600, 2)) {
		t.Fatalf("ReadBody after the other client left: %v", err)
	}
	r2.Release()
	if b.InUse() != 0 {
		t.Fatalf("in use %d at the end", b.InUse())
	}
}

// A ReadBody interrupted by a read deadline holds one reservation across
// its retries, and a client that leaves in the middle gives it back.
func TestBudgetInterruptedReadBody(t *testing.T) {
	msg := bigMsg('P', 3000, 5)
	stream := append(append([]byte(nil), msg...), msg...)
	b := NewBudget(3000)
	src := &timeoutReader{data: stream, rng: rand.New(rand.NewPCG(1, 2))}
	r := NewReader(src, 64)
	r.SetBudget(b)
	if err := retry(func() error { _, _, err := r.Next(); return err }); err != nil {
		t.Fatal(err)
	}
	var body []byte
	err := retry(func() (err error) {
		body, err = r.ReadBody(nil)
		if b.InUse() != 3000 {
			t.Fatalf("in use %d during an interrupted ReadBody, want 3000", b.InUse())
		}
		return err
	})
	if err != nil || !bytes.Equal(body, pattern(3000, 5)) || src.fails == 0 {
		t.Fatalf("resumed ReadBody: %v, %d timeouts", err, src.fails)
	}

	// Second copy: interrupt once, then the client leaves.
	if err := retry(func() error { _, _, err := r.Next(); return err }); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := r.ReadBody(nil)
		if errors.Is(err, os.ErrDeadlineExceeded) && r.streamed > 5 {
			break
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
			t.Fatalf("ReadBody finished before a timeout: %v", err)
		}
	}
	r.Release()
	if b.InUse() != 0 || r.partial != nil {
		t.Fatalf("Release mid-message: in use %d, partial body kept: %v", b.InUse(), r.partial != nil)
	}
	// What is left can still be skipped.
	if err := retry(r.Skip); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at the end: %v", err)
	}
}

func TestSetBudgetReturnsReservation(t *testing.T) {
	old, nu := NewBudget(0), NewBudget(0)
	r := NewReader(bytes.NewReader(bigMsg('P', 100, 1)), 64)
	r.SetBudget(old)
	r.Next()
	if _, err := r.ReadBody(nil); err != nil || old.InUse() != 100 {
		t.Fatalf("ReadBody: %v, in use %d", err, old.InUse())
	}
	r.SetBudget(nu)
	if old.InUse() != 0 || nu.InUse() != 0 {
		t.Fatalf("after SetBudget: old %d new %d", old.InUse(), nu.InUse())
	}
}

func TestReadBodyMax(t *testing.T) {
	var in bytes.Buffer
	in.Write(frame('D', []byte("S\x00")))
	in.Write(frame('D', pattern(40, 1))) // fits the buffer, over the cap
	in.Write(bigMsg('P', 5000, 2))       // over the cap and the buffer
	in.Write(bigMsg('P', 200, 3))        // exactly the cap
	b := NewBudget(0)
	r := NewReader(&in, 64)
	r.SetBudget(b)
	r.Next()
	if body, err := r.ReadBodyMax(nil, 200); err != nil || string(body) != "S\x00" {
		t.Fatalf("small message: %q %v", body, err)
	}
	for _, n := range []int{40, 5000} {
		r.Next()
		buffered := r.Buffered()
		if _, err := r.ReadBodyMax(nil, 39); !errors.Is(err, ErrMessageTooLarge) {
			t.Fatalf("%d-byte body with cap 39: %v, want ErrMessageTooLarge", n, err)
		}
		if r.Buffered() != buffered || b.InUse() != 0 || r.consumed {
			t.Fatalf("%d-byte body: a refused ReadBodyMax read or reserved something", n)
		}
		if err := r.Skip(); err != nil {
			t.Fatal(err)
		}
	}
	r.Next()
	if body, err := r.ReadBodyMax(nil, 200); err != nil || !bytes.Equal(body, pattern(200, 3)) {
		t.Fatalf("body at the cap: %v", err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at the end: %v", err)
	}
}

// ReadBody of a message bigger than the buffer allocates its body once, at
// its exact size, with or without a budget; a dst with room allocates
// nothing.
func TestReadBodyAllocatesOnce(t *testing.T) {
	const n = 100000
	msg := bigMsg('P', n, 7)
	for _, budget := range []*Budget{nil, NewBudget(1 << 20)} {
		r := NewReader(&replayReader{data: msg}, 1024)
		if budget != nil {
			r.SetBudget(budget)
		}
		var body []byte
		allocs := testing.AllocsPerRun(20, func() {
			if _, _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
			var err error
			if body, err = r.ReadBody(nil); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 1 || cap(body) != n || !bytes.Equal(body, pattern(n, 7)) {
			t.Fatalf("budget %v: %.1f allocations, cap %d, want 1 of %d", budget != nil, allocs, cap(body), n)
		}
		scratch := make([]byte, 0, n)
		allocs = testing.AllocsPerRun(20, func() {
			r.Next()
			if body, _ = r.ReadBody(scratch); &body[0] != &scratch[:1][0] {
				t.Fatal("ReadBody did not use a dst with room")
			}
		})
		if allocs != 0 {
			t.Fatalf("budget %v: %.1f allocations with a dst that has room", budget != nil, allocs)
		}
	}
}

// Without a budget, a header claiming more than preallocUnbudgeted is not
// taken at its word: a client that sends less than it announced has made the
// reader allocate about what it sent, not what it claimed.
func TestReadBodyUnbudgetedGrowsWithData(t *testing.T) {
	claim := 1 << 30
	hdr := []byte{'P', 0, 0, 0, 0}
	hdr[1], hdr[2], hdr[3], hdr[4] = byte((claim+4)>>24), byte((claim+4)>>16), byte((claim+4)>>8), byte(claim+4)
	r := NewReader(io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(pattern(3<<20, 1))), 4096)
	r.Next()
	if _, err := r.ReadBody(nil); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated body: %v", err)
	}
	if c := cap(r.partial); c > 8<<20 {
		t.Fatalf("%d bytes allocated for 3 MiB received", c)
	}
	// A real body past the threshold still arrives whole, at its size.
	n := preallocUnbudgeted + 12345
	r = NewReader(bytes.NewReader(bigMsg('P', n, 2)), 4096)
	r.Next()
	body, err := r.ReadBody(nil)
	if err != nil || !bytes.Equal(body, pattern(n, 2)) || cap(body) != n {
		t.Fatalf("unbudgeted large body: %v, cap %d want %d", err, cap(body), n)
	}
}

// Readers on many goroutines share one budget: it is never overdrawn, every
// body that was granted arrives intact, and all is returned at the end.
func TestBudgetConcurrentReaders(t *testing.T) {
	const limit = 256 << 10
	b := NewBudget(limit)
	var peak atomic.Int64
	var wg sync.WaitGroup
	var refused atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 99))
			var msgs []testMsg
			var in bytes.Buffer
			for i := range 40 {
				m := testMsg{'P', pattern(1000+rng.IntN(100<<10), byte(g*40+i))}
				msgs = append(msgs, m)
				in.Write(frame(m.typ, m.body))
			}
			r := NewReader(newChunkReader(in.Bytes(), uint64(g), 5000), 1024)
			r.SetBudget(b)
			defer r.Release()
			var scratch []byte
			for i, m := range msgs {
				if _, _, err := r.Next(); err != nil {
					t.Error(err)
					return
				}
				body, err := r.ReadBody(scratch)
				if use := b.InUse(); use > peak.Load() {
					peak.Store(use) // racy max; good enough for a bound check
				}
				if errors.Is(err, ErrBudgetExceeded) {
					refused.Add(1)
					if err := r.Skip(); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				if err != nil || !bytes.Equal(body, m.body) {
					t.Errorf("goroutine %d, message %d: %v", g, i, err)
					return
				}
				if cap(body) > cap(scratch) {
					scratch = body[:0]
				}
			}
		}()
	}
	wg.Wait()
	if b.InUse() != 0 {
		t.Fatalf("in use %d after every reader left", b.InUse())
	}
	if peak.Load() > limit {
		t.Fatalf("budget overdrawn: %d in use, limit %d", peak.Load(), limit)
	}
	t.Logf("%d bodies refused", refused.Load())
}
