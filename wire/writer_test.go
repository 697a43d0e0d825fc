package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestWriterBatches(t *testing.T) {
	rw := &recordWriter{}
	w := NewWriter(rw, 64)
	for i := range 5 {
		if err := w.Write([]byte{byte('a' + i), 1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	if len(rw.writes) != 0 {
		t.Fatalf("%d writes reached the connection before Flush", len(rw.writes))
	}
	if w.Buffered() != 15 {
		t.Fatalf("Buffered = %d, want 15", w.Buffered())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(rw.writes) != 1 || !bytes.Equal(rw.writes[0], []byte("a\x01\x02b\x01\x02c\x01\x02d\x01\x02e\x01\x02")) {
		t.Fatalf("writes = %q, want one batch", rw.writes)
	}
	if w.Buffered() != 0 {
		t.Fatalf("Buffered after Flush = %d", w.Buffered())
	}
	if err := w.Flush(); err != nil || len(rw.writes) != 1 {
		t.Fatalf("empty Flush wrote: %v %d", err, len(rw.writes))
	}
}

func TestWriterOverflow(t *testing.T) {
	rw := &recordWriter{}
	w := NewWriter(rw, 10)
	w.Write([]byte("123456"))
	w.Write([]byte("7890")) // exactly full: still buffered
	if len(rw.writes) != 0 {
		t.Fatalf("full buffer flushed early: %q", rw.writes)
	}
	w.Write([]byte("ab")) // overflow: the batch goes out, "ab" stays
	if len(rw.writes) != 1 || string(rw.writes[0]) != "1234567890" || w.Buffered() != 2 {
		t.Fatalf("after overflow: writes %q, buffered %d", rw.writes, w.Buffered())
	}
	big := bytes.Repeat([]byte("x"), 25)
	w.Write(big) // larger than the buffer: pending bytes first, then straight through
	if len(rw.writes) != 3 || string(rw.writes[1]) != "ab" || !bytes.Equal(rw.writes[2], big) || w.Buffered() != 0 {
		t.Fatalf("large write: writes %q, buffered %d", rw.writes, w.Buffered())
	}
	w.Write(bytes.Repeat([]byte("y"), 10)) // exactly the buffer size into an empty buffer
	if len(rw.writes) != 3 || w.Buffered() != 10 {
		t.Fatalf("buffer-sized write: %d writes, buffered %d", len(rw.writes), w.Buffered())
	}
	w.Flush()
	if got := string(rw.all()); got != "1234567890ab"+string(big)+"yyyyyyyyyy" {
		t.Fatalf("stream = %q", got)
	}
}

func TestWriterWriteMessage(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, 64)
	w.WriteMessage('Q', []byte("SELECT 1\x00"))
	w.WriteMessage('S', nil)
	w.Flush()
	want := append(frame('Q', []byte("SELECT 1\x00")), frame('S', nil)...)
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("got %q, want %q", out.Bytes(), want)
	}
}

type failWriter struct {
	ok    int // successful writes before failing
	calls int
	err   error
}

func (f *failWriter) Write(p []byte) (int, error) {
	f.calls++
	if f.calls > f.ok {
		return 0, f.err
	}
	return len(p), nil
}

func TestWriterStickyError(t *testing.T) {
	boom := errors.New("boom")
	fw := &failWriter{ok: 1, err: boom}
	w := NewWriter(fw, 16)
	w.Write([]byte("abc"))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("def"))
	if err := w.Flush(); err != boom {
		t.Fatalf("Flush err = %v, want boom", err)
	}
	calls := fw.calls
	if err := w.Write([]byte("x")); err != boom {
		t.Fatalf("Write after failure = %v", err)
	}
	if err := w.WriteMessage('Z', []byte("I")); err != boom {
		t.Fatalf("WriteMessage after failure = %v", err)
	}
	if err := w.Write(make([]byte, 100)); err != boom {
		t.Fatalf("large Write after failure = %v", err)
	}
	if err := w.Flush(); err != boom || w.Err() != boom {
		t.Fatalf("Flush after failure = %v, Err = %v", err, w.Err())
	}
	if fw.calls != calls {
		t.Fatalf("the failed connection was written to again (%d calls)", fw.calls-calls)
	}
	// Large pass-through writes set the sticky error too.
	fw2 := &failWriter{err: boom}
	w2 := NewWriter(fw2, 8)
	if err := w2.Write(make([]byte, 20)); err != boom || w2.Err() != boom {
		t.Fatalf("pass-through failure: %v / %v", err, w2.Err())
	}
	// Reset clears it.
	var out bytes.Buffer
	w.Reset(&out)
	if w.Err() != nil || w.Buffered() != 0 {
		t.Fatalf("after Reset: Err %v Buffered %d", w.Err(), w.Buffered())
	}
	w.Write([]byte("ok"))
	w.Flush()
	if out.String() != "ok" {
		t.Fatalf("after Reset wrote %q", out.String())
	}
}

// shortWriter violates io.Writer by reporting a short write without error.
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestWriterShortWrite(t *testing.T) {
	w := NewWriter(shortWriter{}, 16)
	w.Write([]byte("abcd"))
	if err := w.Flush(); err != io.ErrShortWrite {
		t.Fatalf("Flush = %v, want io.ErrShortWrite", err)
	}
	w = NewWriter(shortWriter{}, 4)
	if err := w.Write(make([]byte, 10)); err != io.ErrShortWrite {
		t.Fatalf("pass-through Write = %v, want io.ErrShortWrite", err)
	}
}

func TestPooledWriterLendsItsBuffer(t *testing.T) {
	var out bytes.Buffer
	w := NewPooledWriter(&out, 64)
	if w.buf != nil {
		t.Fatal("buffer taken before the first write")
	}
	if err := w.Write([]byte("hello")); err != nil || w.Buffered() != 5 || out.Len() != 0 {
		t.Fatalf("buffered %d, written %d, %v", w.Buffered(), out.Len(), err)
	}
	if err := w.Flush(); err != nil || out.String() != "hello" || w.buf != nil {
		t.Fatalf("after flush: %q, holds buffer: %v, %v", out.String(), w.buf != nil, err)
	}
	// Overflow flushes, then keeps batching small writes.
	big := bytes.Repeat([]byte("x"), 63)
	w.Write(big)
	w.Write([]byte("yz"))
	if out.Len() != 68 || w.Buffered() != 2 {
		t.Fatalf("overflow: written %d, buffered %d", out.Len(), w.Buffered())
	}
	w.Write(bytes.Repeat([]byte("L"), 100)) // larger than the buffer: straight through
	w.Flush()
	if out.Len() != 170 || !bytes.HasSuffix(out.Bytes(), bytes.Repeat([]byte("L"), 100)) {
		t.Fatalf("large write: %d bytes", out.Len())
	}
}

// A pooled writer's borrow and give-back cycle, once per transaction on a
// client connection, allocates nothing.
func TestPooledWriterCycleAllocatesNothing(t *testing.T) {
	w := NewPooledWriter(io.Discard, 256)
	msg := []byte("Z\x00\x00\x00\x05I")
	allocs := testing.AllocsPerRun(1000, func() {
		if err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMessage('S', nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Write+Flush of a pooled writer: %v allocs, want 0", allocs)
	}
	if w.buf != nil || w.lent != nil {
		t.Fatal("the flushed writer still holds its buffer")
	}
}

// A message header that does not fit behind what is buffered flushes
// first; header and body arrive whole and in order, for bodies smaller and
// larger than the buffer.
func TestWriteMessageAtTheBufferEdge(t *testing.T) {
	for _, bodyLen := range []int{0, 3, 20} {
		var out bytes.Buffer
		w := NewWriter(&out, 16)
		w.Write(bytes.Repeat([]byte("a"), 13))
		body := bytes.Repeat([]byte("b"), bodyLen)
		if err := w.WriteMessage('Q', body); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		want := append(bytes.Repeat([]byte("a"), 13), 'Q', 0, 0, 0, byte(bodyLen+4))
		want = append(want, body...)
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("body %d: wrote %q, want %q", bodyLen, out.Bytes(), want)
		}
	}
}
