package wire

import (
	"bytes"
	"testing"
)

// A message longer than the buffer is peeked at whole after Grow, and the
// messages around it read as before.
func TestReaderGrow(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 300)
	var in []byte
	in = AppendQuery(in, "SELECT 1")
	in = AppendQuery(in, string(long))
	in = AppendQuery(in, "SELECT 2")
	r := NewReader(bytes.NewReader(in), 64)
	typ, n, err := r.Next()
	if err != nil || typ != MsgQuery || n != 9 {
		t.Fatalf("Next = %c %d %v", typ, n, err)
	}
	r.Grow(32) // smaller than the buffer: nothing changes
	if err := r.Skip(); err != nil {
		t.Fatal(err)
	}
	if _, n, err = r.Next(); err != nil || n != 301 {
		t.Fatalf("Next = %d %v", n, err)
	}
	if r.Fits() {
		t.Fatal("a 306-byte message fits a 64-byte buffer")
	}
	r.Grow(5 + n)
	body, err := r.Peek(n)
	if err != nil || !bytes.Equal(body[:300], long) || body[300] != 0 {
		t.Fatalf("Peek after Grow = %d bytes, %v", len(body), err)
	}
	var out bytes.Buffer
	w := NewWriter(&out, 64)
	if err := r.Forward(w); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if !bytes.Equal(out.Bytes(), AppendQuery(nil, string(long))) {
		t.Fatal("Forward after Grow changed the message")
	}
	if _, n, err = r.Next(); err != nil || n != 9 {
		t.Fatalf("the message after: %d %v", n, err)
	}
}
