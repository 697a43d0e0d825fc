package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
)

type testMsg struct {
	typ  byte
	body []byte
}

func frame(typ byte, body []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(body)+4))
	return append(b, body...)
}

func encodeAll(msgs []testMsg) []byte {
	var b []byte
	for _, m := range msgs {
		b = append(b, frame(m.typ, m.body)...)
	}
	return b
}

// pattern returns n bytes whose content depends on position and seed, so a
// lost, duplicated or reordered byte is detected.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/251) ^ seed
	}
	return b
}

// sampleMsgs is a stream mixing empty, small, buffer-sized and huge messages.
func sampleMsgs() []testMsg {
	return []testMsg{
		{'R', []byte{0, 0, 0, 0}},
		{'S', []byte("client_encoding\x00UTF8\x00")},
		{'Z', []byte("I")},
		{'1', nil},
		{'D', pattern(59, 1)},  // exactly 64 bytes framed
		{'D', pattern(60, 2)},  // one more than a 64-byte buffer
		{'T', pattern(95, 3)},  // exactly 100 bytes framed
		{'d', pattern(300, 4)}, // larger than small buffers
		{'C', []byte("SELECT 1\x00")},
		{'d', pattern(70000, 5)}, // larger than the default buffer
		{'3', nil},
		{'D', pattern(4091, 6)}, // exactly 4096 framed
		{'D', pattern(4092, 7)},
		{'Z', []byte("T")},
	}
}

type consumeMode int

const (
	useBody consumeMode = iota
	useMessage
	useForward
	useSkip
	numModes
)

// readStream reads every message of msgs from r, consuming message i with
// mode (i+shift)%numModes, retrying calls that time out, and checks each one.
// Forwarded messages must arrive at the Writer byte for byte.
func readStream(t *testing.T, r *Reader, msgs []testMsg, shift int) {
	t.Helper()
	for i, want := range msgs {
		var typ byte
		var n int
		err := retry(func() (err error) { typ, n, err = r.Next(); return err })
		if err != nil {
			t.Fatalf("msg %d: Next: %v", i, err)
		}
		if typ != want.typ || n != len(want.body) || r.Type() != want.typ {
			t.Fatalf("msg %d: Next = %q %d, want %q %d", i, typ, n, want.typ, len(want.body))
		}
		fits := 5+len(want.body) <= len(r.buf)
		if r.Fits() != fits {
			t.Fatalf("msg %d: Fits = %v, want %v", i, r.Fits(), fits)
		}
		mode := consumeMode((i + shift) % int(numModes))
		if !fits && (mode == useBody || mode == useMessage) {
			if _, err := r.Body(); !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("msg %d: Body of %d-byte message with %d-byte buffer: err = %v, want ErrMessageTooLarge", i, n, len(r.buf), err)
			}
			if _, err := r.Message(); !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("msg %d: Message of oversized message: err = %v, want ErrMessageTooLarge", i, err)
			}
			mode = useForward
		}
		switch mode {
		case useBody:
			var b []byte
			if err := retry(func() (err error) { b, err = r.Body(); return err }); err != nil {
				t.Fatalf("msg %d: Body: %v", i, err)
			}
			if !bytes.Equal(b, want.body) {
				t.Fatalf("msg %d: Body = %q, want %q", i, trunc(b), trunc(want.body))
			}
		case useMessage:
			var b []byte
			if err := retry(func() (err error) { b, err = r.Message(); return err }); err != nil {
				t.Fatalf("msg %d: Message: %v", i, err)
			}
			if !bytes.Equal(b, frame(want.typ, want.body)) {
				t.Fatalf("msg %d: Message = %q, want %q", i, trunc(b), trunc(frame(want.typ, want.body)))
			}
		case useForward:
			var out bytes.Buffer
			w := NewWriter(&out, 128)
			if err := retry(func() error { return r.Forward(w) }); err != nil {
				t.Fatalf("msg %d: Forward: %v", i, err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), frame(want.typ, want.body)) {
				t.Fatalf("msg %d: Forward wrote %d bytes %q, want %d bytes", i, out.Len(), trunc(out.Bytes()), 5+len(want.body))
			}
		case useSkip:
			if err := retry(r.Skip); err != nil {
				t.Fatalf("msg %d: Skip: %v", i, err)
			}
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at end of stream: err = %v, want io.EOF", err)
	}
	if r.Buffered() != 0 {
		t.Fatalf("Buffered at end = %d", r.Buffered())
	}
}

func trunc(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func TestReaderFraming(t *testing.T) {
	msgs := sampleMsgs()
	stream := encodeAll(msgs)
	sources := map[string]func(seed uint64) io.Reader{
		"whole":    func(uint64) io.Reader { return bytes.NewReader(stream) },
		"onebyte":  func(uint64) io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"halves":   func(uint64) io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		"dataerr":  func(uint64) io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
		"chunks7":  func(s uint64) io.Reader { return newChunkReader(stream, s, 7) },
		"chunks5k": func(s uint64) io.Reader { return newChunkReader(stream, s, 5000) },
		"timeouts": func(s uint64) io.Reader {
			return &timeoutReader{data: stream, rng: newChunkReader(nil, s, 1).rng}
		},
	}
	for name, src := range sources {
		for _, size := range []int{64, 100, 4096, DefaultBufferSize} {
			for shift := range int(numModes) {
				t.Run(fmt.Sprintf("%s/buf%d/shift%d", name, size, shift), func(t *testing.T) {
					r := NewReader(src(uint64(size*10+shift)), size)
					readStream(t, r, msgs, shift)
				})
			}
		}
	}
}

func TestReaderTimeoutsActuallyHappen(t *testing.T) {
	// Guard against the timeout test silently not exercising anything.
	stream := encodeAll(sampleMsgs())
	tr := &timeoutReader{data: stream, rng: newChunkReader(nil, 1, 1).rng}
	r := NewReader(tr, 64)
	readStream(t, r, sampleMsgs(), 2)
	if tr.fails < 100 {
		t.Fatalf("only %d timeouts injected", tr.fails)
	}
}

func TestReaderManyMessagesOneRead(t *testing.T) {
	var msgs []testMsg
	for i := range 200 {
		msgs = append(msgs, testMsg{'D', []byte(fmt.Sprintf("row %d", i))})
	}
	stream := encodeAll(msgs)
	cr := &countingReader{r: bytes.NewReader(stream)}
	r := NewReader(cr, DefaultBufferSize)
	for i, m := range msgs {
		typ, _, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.Body()
		if err != nil || typ != 'D' || !bytes.Equal(b, m.body) {
			t.Fatalf("msg %d: %q %q %v", i, typ, b, err)
		}
		if want := len(stream) - framedLen(msgs[:i+1]); r.Buffered() != want {
			t.Fatalf("msg %d: Buffered = %d, want %d", i, r.Buffered(), want)
		}
	}
	if cr.reads != 1 {
		t.Fatalf("%d reads for a stream that fits the buffer, want 1", cr.reads)
	}
}

func framedLen(msgs []testMsg) int {
	n := 0
	for _, m := range msgs {
		n += 5 + len(m.body)
	}
	return n
}

type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

func TestReaderBuffered(t *testing.T) {
	a := frame('D', []byte("abc"))
	b := frame('C', []byte("SELECT 1\x00"))
	// Two reads: the first delivers a and half of b.
	first := append(append([]byte(nil), a...), b[:4]...)
	r := NewReader(io.MultiReader(bytes.NewReader(first), bytes.NewReader(b[4:])), 64)
	if r.Buffered() != 0 {
		t.Fatalf("Buffered before reading = %d", r.Buffered())
	}
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	// The current message is not consumed yet.
	if got := r.Buffered(); got != len(first) {
		t.Fatalf("Buffered after Next = %d, want %d", got, len(first))
	}
	if err := r.Skip(); err != nil {
		t.Fatal(err)
	}
	if got := r.Buffered(); got != 4 {
		t.Fatalf("Buffered after Skip = %d, want 4 (partial next message)", got)
	}
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Body(); err != nil {
		t.Fatal(err)
	}
	if got := r.Buffered(); got != 0 {
		t.Fatalf("Buffered after last message = %d, want 0", got)
	}
}

func TestReaderMaxMessageSize(t *testing.T) {
	stream := append(frame('Q', pattern(95, 0)), frame('Q', pattern(96, 0))...) // 100 and 101 bytes
	r := NewReader(bytes.NewReader(stream), 4096)
	r.SetMaxMessageSize(100)
	if _, n, err := r.Next(); err != nil || n != 95 {
		t.Fatalf("Next of message at the limit: n=%d err=%v", n, err)
	}
	if err := r.Skip(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("Next of message over the limit: err = %v, want ErrMessageTooLarge", err)
	}
	// The limit applies to the announced length: nothing of the body has to
	// arrive for the rejection.
	r = NewReader(bytes.NewReader([]byte{'Q', 0x7f, 0xff, 0xff, 0xff}), 64)
	r.SetMaxMessageSize(1 << 20)
	if _, _, err := r.Next(); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("2 GB message: err = %v, want ErrMessageTooLarge", err)
	}
	// Zero means unlimited: a message far larger than the buffer streams.
	big := frame('d', pattern(1<<20, 9))
	r = NewReader(bytes.NewReader(big), 64)
	r.SetMaxMessageSize(0)
	if _, n, err := r.Next(); err != nil || n != 1<<20 {
		t.Fatalf("unlimited: n=%d err=%v", n, err)
	}
	var out bytes.Buffer
	w := NewWriter(&out, 64)
	if err := r.Forward(w); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if !bytes.Equal(out.Bytes(), big) {
		t.Fatal("1 MB message forwarded through a 64-byte buffer differs")
	}
}

func TestReaderBadLength(t *testing.T) {
	for _, n := range []uint32{0, 1, 3, 0x80000000 - 1 + 0x80000000} {
		h := []byte{'D', 0, 0, 0, 0}
		binary.BigEndian.PutUint32(h[1:], n)
		r := NewReader(bytes.NewReader(h), 64)
		_, _, err := r.Next()
		if n < 4 {
			if !errors.Is(err, ErrBadLength) {
				t.Errorf("length %d: err = %v, want ErrBadLength", n, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("length %d without limit: err = %v", n, err)
		}
	}
	// Length 4 is an empty body, not an error.
	r := NewReader(bytes.NewReader([]byte{'S', 0, 0, 0, 4}), 64)
	if typ, n, err := r.Next(); typ != 'S' || n != 0 || err != nil {
		t.Fatalf("Sync: %q %d %v", typ, n, err)
	}
	if b, err := r.Body(); err != nil || len(b) != 0 {
		t.Fatalf("Sync body: %q %v", b, err)
	}
}

func TestReaderEOF(t *testing.T) {
	full := frame('D', pattern(300, 1))
	cases := []struct {
		name   string
		stream []byte
		mode   consumeMode
		size   int
		atNext bool // error expected from Next rather than the body call
		want   error
	}{
		{"empty", nil, useBody, 64, true, io.EOF},
		{"boundary", full, useForward, 64, false, nil},
		{"partial header", full[:3], useBody, 64, true, io.ErrUnexpectedEOF},
		{"header only body", full[:5], useBody, 4096, false, io.ErrUnexpectedEOF},
		{"partial body", full[:100], useBody, 4096, false, io.ErrUnexpectedEOF},
		{"partial body message", full[:100], useMessage, 4096, false, io.ErrUnexpectedEOF},
		{"partial body forward", full[:100], useForward, 4096, false, io.ErrUnexpectedEOF},
		{"partial body skip", full[:100], useSkip, 4096, false, io.ErrUnexpectedEOF},
		// Streaming (message larger than the buffer): the stream ends right
		// after a chunk was forwarded, with nothing left in the buffer.
		{"streaming header only", full[:5], useForward, 64, false, io.ErrUnexpectedEOF},
		{"streaming at chunk boundary", full[:64], useForward, 64, false, io.ErrUnexpectedEOF},
		{"streaming mid chunk", full[:100], useForward, 64, false, io.ErrUnexpectedEOF},
		{"streaming skip", full[:128], useSkip, 64, false, io.ErrUnexpectedEOF},
		{"streaming one short", full[:len(full)-1], useForward, 64, false, io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		for _, src := range []string{"whole", "onebyte"} {
			t.Run(tc.name+"/"+src, func(t *testing.T) {
				var rd io.Reader = bytes.NewReader(tc.stream)
				if src == "onebyte" {
					rd = iotest.OneByteReader(rd)
				}
				r := NewReader(rd, tc.size)
				_, _, err := r.Next()
				if tc.atNext {
					if err != tc.want {
						t.Fatalf("Next: err = %v, want %v", err, tc.want)
					}
					return
				}
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				switch tc.mode {
				case useBody:
					_, err = r.Body()
				case useMessage:
					_, err = r.Message()
				case useForward:
					err = r.Forward(NewWriter(io.Discard, 64))
				case useSkip:
					err = r.Skip()
				}
				if err != tc.want {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				if tc.want == nil {
					if _, _, err := r.Next(); err != io.EOF {
						t.Fatalf("Next after last message: err = %v, want io.EOF", err)
					}
				}
			})
		}
	}
}

// TestReaderResumeAfterTimeout interrupts every single read position in turn:
// the reader fails once with a timeout at byte k (after delivering k bytes),
// and the retried call must continue without losing or duplicating bytes.
func TestReaderResumeAfterTimeout(t *testing.T) {
	msgs := sampleMsgs()[:9] // up to the 300-byte message; keeps it fast
	stream := encodeAll(msgs)
	for _, size := range []int{64, 4096} {
		for k := 0; k < len(stream); k++ {
			for shift := range int(numModes) {
				rd := &oneTimeout{data: stream, at: k}
				r := NewReader(rd, size)
				t.Run("", func(t *testing.T) {
					readStream(t, r, msgs, shift)
				})
				if !rd.fired {
					t.Fatalf("timeout at %d never fired", k)
				}
				if t.Failed() {
					t.Fatalf("failed with timeout at byte %d, buffer %d, shift %d", k, size, shift)
				}
			}
		}
	}
}

// oneTimeout delivers data in 10-byte reads, except that the read reaching
// offset at returns the bytes before it together with a timeout.
type oneTimeout struct {
	data  []byte
	off   int
	at    int
	fired bool
}

func (o *oneTimeout) Read(p []byte) (int, error) {
	if o.off == len(o.data) {
		return 0, io.EOF
	}
	n := min(10, len(p), len(o.data)-o.off)
	if !o.fired && o.off+n > o.at {
		o.fired = true
		n = o.at - o.off
		copy(p, o.data[o.off:o.off+n])
		o.off += n
		return n, os.ErrDeadlineExceeded
	}
	copy(p, o.data[o.off:o.off+n])
	o.off += n
	return n, nil
}

func TestReaderTimeoutKeepsState(t *testing.T) {
	// A timeout in the middle of a streamed message: the part already
	// forwarded is not forwarded again, and Next still refuses to skip ahead.
	big := frame('d', pattern(500, 3))
	rest := append(append([]byte(nil), big[200:]...), frame('Z', []byte("I"))...)
	rd := &scripted{steps: []step{
		{data: big[:100]}, {data: big[100:200]}, {err: os.ErrDeadlineExceeded}, {data: rest},
	}}
	r := NewReader(rd, 64)
	rw := &recordWriter{}
	w := NewWriter(rw, 64)
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := r.Forward(w); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Forward: err = %v, want timeout", err)
	}
	if _, _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "BUG") {
		t.Fatalf("Next during an unfinished message: err = %v, want BUG error", err)
	}
	if err := r.Forward(w); err != nil {
		t.Fatalf("resumed Forward: %v", err)
	}
	w.Flush()
	if !bytes.Equal(rw.all(), big) {
		t.Fatalf("forwarded %d bytes, want the %d-byte message intact", len(rw.all()), len(big))
	}
	if typ, _, err := r.Next(); typ != 'Z' || err != nil {
		t.Fatalf("Next after resumed message: %q %v", typ, err)
	}
}

func TestReaderMisuse(t *testing.T) {
	r := NewReader(bytes.NewReader(frame('Z', []byte("I"))), 64)
	if _, err := r.Body(); err == nil {
		t.Error("Body without Next succeeded")
	}
	if _, err := r.Message(); err == nil {
		t.Error("Message without Next succeeded")
	}
	if err := r.Forward(nil); err == nil {
		t.Error("Forward without Next succeeded")
	}
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(); err == nil {
		t.Error("Next twice succeeded")
	}
	if b, err := r.Body(); err != nil || string(b) != "I" {
		t.Fatalf("Body = %q, %v", b, err)
	}
	if _, err := r.Body(); err == nil {
		t.Error("Body twice succeeded")
	}
}

func TestReaderSmallBuffer(t *testing.T) {
	// Buffers below 64 bytes are rounded up so a header always fits.
	r := NewReader(bytes.NewReader(frame('D', pattern(50, 1))), 1)
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if !r.Fits() {
		t.Fatal("55-byte message does not fit the minimum buffer")
	}
	if b, err := r.Body(); err != nil || !bytes.Equal(b, pattern(50, 1)) {
		t.Fatalf("Body = %q, %v", b, err)
	}
}

// zeroReader never makes progress; the Reader must give up instead of
// spinning forever.
type zeroReader struct{ calls int }

func (z *zeroReader) Read([]byte) (int, error) { z.calls++; return 0, nil }

func TestReaderNoProgress(t *testing.T) {
	z := &zeroReader{}
	r := NewReader(z, 64)
	if _, _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

type step struct {
	data []byte
	err  error
}

// scripted returns its steps in order, splitting data that does not fit p
// across calls; after the last step it returns io.EOF.
type scripted struct{ steps []step }

func (s *scripted) Read(p []byte) (int, error) {
	if len(s.steps) == 0 {
		return 0, io.EOF
	}
	st := &s.steps[0]
	n := copy(p, st.data)
	st.data = st.data[n:]
	if len(st.data) > 0 {
		return n, nil
	}
	err := st.err
	s.steps = s.steps[1:]
	return n, err
}

func TestDropBuffer(t *testing.T) {
	var in bytes.Buffer
	in.Write(AppendQuery(nil, "SELECT 1"))
	in.Write(AppendQuery(nil, "SELECT 2"))
	r := NewReader(&in, 64)
	if !r.DropBuffer() {
		t.Fatal("a fresh reader holds nothing: DropBuffer must succeed")
	}
	typ, n, err := r.Next()
	if err != nil || typ != MsgQuery || n != len("SELECT 1")+1 {
		t.Fatalf("Next after DropBuffer: %c %d %v", typ, n, err)
	}
	if r.DropBuffer() {
		t.Fatal("DropBuffer with a message in progress must refuse")
	}
	body, err := r.Body()
	if err != nil || string(body) != "SELECT 1\x00" {
		t.Fatalf("body %q %v", body, err)
	}
	// The second query arrived with the first: bytes are pending.
	if r.DropBuffer() {
		t.Fatal("DropBuffer with received bytes pending must refuse")
	}
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if body, err := r.Body(); err != nil || string(body) != "SELECT 2\x00" {
		t.Fatalf("second body %q %v", body, err)
	}
	if !r.DropBuffer() || r.buf != nil {
		t.Fatal("an empty reader must drop its buffer")
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at the end: %v, want io.EOF", err)
	}
}

// capWriter records whether any slice written to it had capacity past its
// length.
type capWriter struct{ spare int }

func (c *capWriter) Write(p []byte) (int, error) {
	if cap(p) > len(p) {
		c.spare++
	}
	return len(p), nil
}

// Every slice the Reader hands out ends at its length, so that a caller's
// append can never write into the read buffer (see doc.go).
func TestHandedOutSlicesHaveNoSpareCapacity(t *testing.T) {
	var in bytes.Buffer
	for range 3 {
		in.Write(frame('D', pattern(100, 1)))
	}
	in.Write(frame('P', pattern(100, 2)))
	in.Write(frame('d', pattern(10000, 3)))
	in.Write(frame('d', pattern(10000, 4)))
	r := NewReader(&in, 4096)
	check := func(what string, b []byte, err error) {
		t.Helper()
		if err != nil || cap(b) != len(b) {
			t.Fatalf("%s: len %d cap %d, err %v", what, len(b), cap(b), err)
		}
	}
	r.Next()
	b, err := r.Message()
	check("Message", b, err)
	r.Next()
	b, err = r.Body()
	check("Body", b, err)
	r.Next()
	b, err = r.Peek(10)
	check("Peek", b, err)
	r.Skip()
	r.Next()
	b, err = r.ReadBody(nil)
	check("ReadBody of a message that fits", b, err)

	// Forward and ForwardBodyFrom of streamed messages: the chunks go
	// straight to the connection when they are bigger than the writer's
	// buffer.
	cw := &capWriter{}
	w := NewWriter(cw, 64)
	r.Next()
	if err := r.Forward(w); err != nil {
		t.Fatal(err)
	}
	r.Next()
	if err := r.ForwardBodyFrom(w, 10); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if cw.spare != 0 {
		t.Fatalf("%d chunks written with capacity into the read buffer", cw.spare)
	}
}

// The pooler keeps what ReadBody returned as scratch for the next one
// (client.big). A small body is a slice of the read buffer; the next large
// body must not be assembled inside the buffer that is refilled under it.
func TestReadBodyScratchFromBuffer(t *testing.T) {
	small := pattern(3000, 1)
	large := pattern(20000, 2)
	stream := append(frame('P', small), frame('P', large)...)
	r := NewReader(newChunkReader(stream, 1, 700), 4096)
	var scratch []byte
	for _, want := range [][]byte{small, large} {
		if _, _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		body, err := r.ReadBody(scratch)
		if err != nil || !bytes.Equal(body, want) {
			t.Fatalf("ReadBody of %d bytes: %v, equal %v", len(want), err, bytes.Equal(body, want))
		}
		if cap(body) > cap(scratch) {
			scratch = body[:0]
		}
	}
}
