package wire

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
)

// chunkReader returns data in chunks of random size (1..max), like a TCP
// socket under load.
type chunkReader struct {
	data []byte
	rng  *rand.Rand
	max  int
}

func newChunkReader(data []byte, seed uint64, max int) *chunkReader {
	return &chunkReader{data: data, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), max: max}
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1 + c.rng.IntN(c.max)
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// timeoutReader behaves like a connection whose read deadline keeps expiring:
// every few reads it fails with os.ErrDeadlineExceeded, sometimes after
// delivering part of the data in the same call.
type timeoutReader struct {
	data  []byte
	rng   *rand.Rand
	fails int // number of timeouts returned
}

func (t *timeoutReader) Read(p []byte) (int, error) {
	if len(t.data) == 0 {
		return 0, io.EOF
	}
	if t.rng.IntN(3) == 0 {
		t.fails++
		// Deliver a few bytes together with the error half of the time.
		n := 0
		if t.rng.IntN(2) == 0 {
			n = min(1+t.rng.IntN(7), len(p), len(t.data))
			copy(p, t.data[:n])
			t.data = t.data[n:]
		}
		return n, os.ErrDeadlineExceeded
	}
	n := min(1+t.rng.IntN(13), len(p), len(t.data))
	copy(p, t.data[:n])
	t.data = t.data[n:]
	return n, nil
}

// replayReader replays data forever without allocating.
type replayReader struct {
	data []byte
	off  int
}

func (r *replayReader) Read(p []byte) (int, error) {
	n := copy(p, r.data[r.off:])
	r.off += n
	if r.off == len(r.data) {
		r.off = 0
	}
	return n, nil
}

// retry repeats f while it fails with a timeout, as the pooler does after
// interrupting a blocked read with SetReadDeadline.
func retry(f func() error) error {
	for {
		err := f()
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
	}
}

// discard is an io.Writer that counts and drops bytes without allocating.
type discard struct{ n int }

func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// recordWriter records every Write call separately.
type recordWriter struct{ writes [][]byte }

func (w *recordWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (w *recordWriter) all() []byte {
	var b []byte
	for _, x := range w.writes {
		b = append(b, x...)
	}
	return b
}
