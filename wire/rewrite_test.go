package wire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"testing/iotest"
)

func TestPeek(t *testing.T) {
	body := pattern(300, 4)
	for _, size := range []int{64, 4096} {
		r := NewReader(iotest.OneByteReader(bytes.NewReader(frame('B', body))), size)
		if _, err := r.Peek(10); err == nil {
			t.Fatal("Peek without Next succeeded")
		}
		if _, _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		p, err := r.Peek(32)
		if err != nil || !bytes.Equal(p, body[:32]) {
			t.Fatalf("buf %d: Peek(32) = %q, %v", size, p, err)
		}
		// Capped by the buffer and by the body; peeking consumes nothing.
		p, err = r.Peek(1 << 20)
		if want := min(300, size-5); err != nil || !bytes.Equal(p, body[:want]) {
			t.Fatalf("buf %d: Peek(1M) = %d bytes, %v; want %d", size, len(p), err, want)
		}
		var out bytes.Buffer
		w := NewWriter(&out, 64)
		if err := r.Forward(w); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		if !bytes.Equal(out.Bytes(), frame('B', body)) {
			t.Fatalf("buf %d: Forward after Peek differs", size)
		}
	}
	r := NewReader(bytes.NewReader(frame('B', body[:5])), 64)
	r.Next()
	if _, err := r.Peek(10); !errors.Is(err, nil) {
		t.Fatal(err)
	}
	if p, _ := r.Peek(10); len(p) != 5 {
		t.Fatalf("Peek beyond a 5-byte body returned %d bytes", len(p))
	}
	// Truncated stream: Peek reports it.
	r = NewReader(bytes.NewReader(frame('B', body)[:20]), 4096)
	r.Next()
	if _, err := r.Peek(100); err != io.ErrUnexpectedEOF {
		t.Fatalf("Peek on truncated body: err = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestForwardBodyFrom(t *testing.T) {
	body := pattern(1000, 8)
	next := frame('S', nil)
	for _, size := range []int{64, 4096} {
		for _, skip := range []int{0, 1, 59, 60, 500, 1000} {
			for _, timeouts := range []bool{false, true} {
				stream := append(frame('B', body), next...)
				var rd io.Reader = iotest.OneByteReader(bytes.NewReader(stream))
				if timeouts {
					rd = &timeoutReader{data: stream, rng: newChunkReader(nil, uint64(skip), 1).rng}
				}
				r := NewReader(rd, size)
				if err := retry(func() error { _, _, err := r.Next(); return err }); err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				w := NewWriter(&out, 100)
				if err := retry(func() error { return r.ForwardBodyFrom(w, skip) }); err != nil {
					t.Fatalf("buf %d skip %d: %v", size, skip, err)
				}
				w.Flush()
				if !bytes.Equal(out.Bytes(), body[skip:]) {
					t.Fatalf("buf %d skip %d timeouts %v: wrote %d bytes, want body[%d:] (%d bytes)", size, skip, timeouts, out.Len(), skip, len(body)-skip)
				}
				if err := retry(func() error { typ, _, err := r.Next(); _ = typ; return err }); err != nil || r.Type() != 'S' {
					t.Fatalf("next message: %q %v", r.Type(), err)
				}
			}
		}
	}
	r := NewReader(bytes.NewReader(frame('B', body[:10])), 64)
	r.Next()
	if err := r.ForwardBodyFrom(NewWriter(io.Discard, 64), 11); err == nil {
		t.Fatal("skip beyond the body accepted")
	}
}

func TestReadBody(t *testing.T) {
	for _, n := range []int{0, 10, 59, 60, 1000, 70000} {
		for _, size := range []int{64, 4096} {
			for _, timeouts := range []bool{false, true} {
				body := pattern(n, byte(n))
				stream := append(frame('P', body), frame('S', nil)...)
				var rd io.Reader = newChunkReader(stream, uint64(n), 300)
				if timeouts {
					rd = &timeoutReader{data: stream, rng: newChunkReader(nil, uint64(n), 1).rng}
				}
				r := NewReader(rd, size)
				if err := retry(func() error { _, _, err := r.Next(); return err }); err != nil {
					t.Fatal(err)
				}
				var got []byte
				scratch := make([]byte, 0, 16)
				if err := retry(func() (err error) { got, err = r.ReadBody(scratch); return err }); err != nil {
					t.Fatalf("n %d buf %d: %v", n, size, err)
				}
				if !bytes.Equal(got, body) {
					t.Fatalf("n %d buf %d timeouts %v: ReadBody returned %d bytes, want %d", n, size, timeouts, len(got), n)
				}
				if err := retry(func() error { _, _, err := r.Next(); return err }); err != nil || r.Type() != 'S' {
					t.Fatalf("next message: %q %v", r.Type(), err)
				}
			}
		}
	}
}

func TestReadBodyResumeAfterTimeout(t *testing.T) {
	body := pattern(500, 1)
	full := frame('P', body)
	rd := &scripted{steps: []step{{data: full[:250]}, {err: os.ErrDeadlineExceeded}, {data: full[250:]}}}
	r := NewReader(rd, 64)
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadBody(nil); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want timeout", err)
	}
	got, err := r.ReadBody(nil)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("resumed ReadBody = %d bytes, %v; want the 500-byte body", len(got), err)
	}
	if _, err := r.ReadBody(nil); err == nil {
		t.Fatal("ReadBody of a consumed message succeeded")
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at end: %v", err)
	}
}
