package wire

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"unsafe"
)

// chunks hands out one queued chunk per Read: a socket where each read
// finds what one peer write sent.
type chunks struct{ q [][]byte }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.q) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.q[0])
	if n < len(c.q[0]) {
		c.q[0] = c.q[0][n:]
	} else {
		c.q = c.q[1:]
	}
	return n, nil
}

func bufAddr(r *Reader) uintptr {
	if r.buf == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(r.buf)))
}

// TestPooledReaderLends: a pooled reader takes its buffer at its first
// read, gives it back when it goes idle (DropBuffer) or ends
// (FreeBuffer), and two readers never hold one buffer at once, however
// their reads and drops interleave; every body reads back as sent.
func TestPooledReaderLends(t *testing.T) {
	const size = 96 // a size of its own: no other test shares the pool
	a, b := &chunks{}, &chunks{}
	ra, rb := NewPooledReader(a, size), NewPooledReader(b, size)
	if ra.buf != nil || rb.buf != nil {
		t.Fatal("a pooled reader holds a buffer before its first read")
	}
	read := func(r *Reader, src *chunks, want string) {
		t.Helper()
		src.q = append(src.q, AppendQuery(nil, want))
		if _, _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		body, err := r.Body()
		if err != nil || string(body) != want+"\x00" {
			t.Fatalf("body %q %v, want %q", body, err, want)
		}
	}
	for i := range 200 {
		read(ra, a, fmt.Sprintf("SELECT %d /* a */", i))
		read(rb, b, fmt.Sprintf("SELECT %d /* b */", i))
		if bufAddr(ra) == bufAddr(rb) {
			t.Fatalf("round %d: both readers hold one buffer", i)
		}
		switch i % 3 {
		case 0:
			if !ra.DropBuffer() || ra.buf != nil {
				t.Fatal("an idle pooled reader keeps its buffer")
			}
		case 1:
			rb.DropBuffer()
		case 2:
			ra.DropBuffer()
			rb.DropBuffer()
		}
	}
	// A message larger than the buffer grows it: the lent one goes back
	// and the grown one is the reader's, dropped (not pooled) when idle.
	big := bytes.Repeat([]byte{'x'}, 3*size)
	a.q = append(a.q, AppendQuery(nil, string(big)))
	if _, n, err := ra.Next(); err != nil || n != len(big)+1 {
		t.Fatal(n, err)
	}
	ra.Grow(5 + len(big) + 1)
	if ra.lent != nil {
		t.Fatal("Grow kept the lent buffer")
	}
	if body, err := ra.Body(); err != nil || !bytes.Equal(body[:len(big)], big) {
		t.Fatalf("grown body: %v", err)
	}
	if !ra.DropBuffer() {
		t.Fatal("DropBuffer after the grown message")
	}
	read(ra, a, "SELECT 'after growth'")
	if len(ra.buf) != size {
		t.Fatalf("after growth the reader's buffer is %d bytes, want its size %d", len(ra.buf), size)
	}
	// FreeBuffer ends it whatever it holds.
	a.q = append(a.q, AppendQuery(nil, "SELECT 'pending'"))
	if _, _, err := ra.Next(); err != nil {
		t.Fatal(err)
	}
	ra.FreeBuffer()
	if ra.buf != nil || ra.lent != nil || ra.Buffered() != 0 {
		t.Fatal("FreeBuffer left a buffer")
	}
}

// TestPooledReaderSteadyAllocs: a pooled reader reading and going idle
// in turn allocates nothing once the pool has its buffer.
func TestPooledReaderSteadyAllocs(t *testing.T) {
	msg := AppendQuery(nil, "SELECT 1")
	src := bytes.NewReader(nil)
	r := NewPooledReader(src, 128)
	cycle := func() {
		src.Reset(msg)
		if _, _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Body(); err != nil {
			t.Fatal(err)
		}
		r.DropBuffer()
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 && !raceEnabled {
		t.Errorf("%.1f allocations per read-and-drop", n)
	}
}
