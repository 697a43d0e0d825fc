package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// tryChunks is a TryReader (an event loop's socket) that gives the stream
// in chunks whose sizes the fuzzer picks, with a read that finds nothing
// ("again") where a size is 0 (never twice running), and io.EOF at the
// end. Read is there for
// Next, which never needs it for a frame FrameAt said is whole.
type tryChunks struct {
	data  []byte
	sizes []byte
	i     int
	again bool // the last read found nothing: the next one finds something
}

func (t *tryChunks) TryRead(p []byte) (int, bool, error) {
	if len(t.data) == 0 {
		return 0, false, io.EOF
	}
	size := int(t.sizes[t.i%len(t.sizes)])
	t.i++
	if size == 0 && !t.again {
		t.again = true
		return 0, true, nil
	}
	t.again = false
	size = max(size, 1)
	n := copy(p, t.data[:min(size, len(t.data))])
	t.data = t.data[n:]
	return n, false, nil
}

func (t *tryChunks) Read(p []byte) (int, error) {
	n, _, err := t.TryRead(p)
	return n, err
}

// FuzzFillNow: the event loop's read path (FillNow, FrameAt, Full) over
// any bytes in any chunks. FrameAt reports exactly the frames Next then
// returns, at the stream's own offsets; a length Next refuses is bad; a
// message larger than the buffer shows as Full; nothing is invented or
// lost, and FillNow never reads inside a message.
func FuzzFillNow(f *testing.F) {
	f.Add(encodeAll(sampleMsgs()[:9]), []byte{3, 0, 7, 64}, uint16(200))
	f.Add(selectResponse(3), []byte{1}, uint16(0))
	f.Add([]byte{'D', 0, 0, 0, 2}, []byte{5}, uint16(0))
	f.Add(append(frame('d', pattern(500, 1)), 'Z', 0, 0), []byte{9, 0}, uint16(1000))
	f.Add([]byte{'Q', 0xff, 0xff, 0xff, 0xff, 'x'}, []byte{6}, uint16(100))
	f.Fuzz(func(t *testing.T, stream, sizes []byte, maxLen uint16) {
		if len(sizes) == 0 {
			sizes = []byte{1}
		}
		src := &tryChunks{data: stream, sizes: sizes}
		r := NewReader(src, 64)
		r.SetMaxMessageSize(int(maxLen))
		pos := 0 // stream offset of the next unread byte
		for round := 0; ; round++ {
			if round > 4*len(stream)+4*len(sizes)+8 {
				t.Fatalf("no progress after %d rounds at offset %d", round, pos)
			}
			_, err := r.FillNow(false)
			if err != nil && err != io.EOF {
				t.Fatalf("FillNow: %v", err)
			}
			if pos+r.Buffered() > len(stream) {
				t.Fatalf("%d bytes buffered at offset %d of a %d-byte stream", r.Buffered(), pos, len(stream))
			}
			// Every whole frame FrameAt reports, then Next must agree.
			type fr struct {
				typ byte
				n   int
			}
			var frames []fr
			off, bad := 0, false
			for {
				typ, next, ok, isBad := r.FrameAt(off)
				if isBad {
					bad = true
					break
				}
				if !ok {
					if r.Full() && off == 0 && r.Buffered() < 5+int(binary.BigEndian.Uint32(stream[pos+1:pos+5])) {
						return // larger than the buffer: Next streams it, not the loop
					}
					break
				}
				if typ != stream[pos+off] {
					t.Fatalf("FrameAt type %q at offset %d, stream has %q", typ, pos+off, stream[pos+off])
				}
				frames = append(frames, fr{typ, next - off - 5})
				off = next
			}
			for _, want := range frames {
				typ, n, err := r.Next()
				if err != nil || typ != want.typ || n != want.n {
					t.Fatalf("Next = %q %d %v, FrameAt said %q %d", typ, n, err, want.typ, want.n)
				}
				if err := r.Skip(); err != nil {
					t.Fatalf("Skip: %v", err)
				}
				pos += 5 + n
			}
			if bad {
				if _, _, err := r.Next(); err == nil || !errors.Is(err, ErrMessageTooLarge) && !errors.Is(err, ErrBadLength) {
					t.Fatalf("Next after a bad length FrameAt: %v", err)
				}
				return
			}
			if err == io.EOF {
				if pos+r.Buffered() != len(stream) {
					t.Fatalf("at the end: %d consumed + %d buffered of %d", pos, r.Buffered(), len(stream))
				}
				return
			}
		}
	})
}
