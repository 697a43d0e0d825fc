package wire

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"
)

var propSeed = flag.Uint64("wire.seed", 0, "run TestReaderProperty with this seed only")

// propPool is pseudo-random data that message bodies are cut from, at
// random offsets, so that two messages (or a message and stale bytes left in
// a buffer) practically never look alike and a byte from the wrong place is
// caught.
var propPool = sync.OnceValue(func() []byte {
	rng := rand.New(rand.NewPCG(42, 4242))
	b := make([]byte, 5<<20)
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b
})

// propStream builds a random message stream for a reader with a bufSize
// buffer: sizes cluster around the buffer sizes the pooler uses and the
// reader's own (4096, 16384, bufSize, their multiples, each ±2), with small
// messages in between and now and then one of up to several MiB.
func propStream(rng *rand.Rand, bufSize int) []byte {
	pool := propPool()
	bases := []int{4096, 8192, 16384, 32768, bufSize, 2 * bufSize, 3 * bufSize}
	var s []byte
	bigLeft := 1 + rng.IntN(2)
	for range 20 + rng.IntN(60) {
		var n int // framed length
		switch k := rng.IntN(20); {
		case k < 7:
			n = 5 + rng.IntN(300)
		case k < 15:
			n = max(5, bases[rng.IntN(len(bases))]+rng.IntN(5)-2)
		case k < 19:
			n = 5 + rng.IntN(3*bufSize)
		default:
			if bigLeft == 0 {
				n = 5 + rng.IntN(bufSize)
				break
			}
			bigLeft--
			// 1 to 4 MiB with a large buffer; a small buffer streams in
			// tiny pieces, so keep its big messages smaller.
			if bufSize >= 4096 {
				n = 5 + 1<<20 + rng.IntN(3<<20)
			} else {
				n = 5 + bufSize*(16+rng.IntN(256))
			}
		}
		body := n - 5
		off := rng.IntN(len(pool) - body + 1)
		s = append(s, byte('A'+rng.IntN(26)), 0, 0, 0, 0)
		binary.BigEndian.PutUint32(s[len(s)-4:], uint32(body+4))
		s = append(s, pool[off:off+body]...)
	}
	return s
}

// shortReader returns random short reads from data, and now and then a read
// deadline error, with or without some bytes, like a socket whose deadline
// the pooler keeps moving.
type shortReader struct {
	data  []byte
	rng   *rand.Rand
	max   int // largest read
	fails bool
}

func (s *shortReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	var n int
	switch k := s.rng.IntN(16); {
	case k == 0 && s.fails:
		n = min(s.rng.IntN(8), len(p), len(s.data))
		copy(p, s.data[:n])
		s.data = s.data[n:]
		return n, os.ErrDeadlineExceeded
	case k < 4:
		n = 1 + s.rng.IntN(8)
	default:
		n = 1 + s.rng.IntN(s.max)
	}
	n = min(n, len(p), len(s.data))
	copy(p, s.data[:n])
	s.data = s.data[n:]
	return n, nil
}

// verifier is the far end of the relay: it checks every byte written
// against the input stream, without keeping a copy.
type verifier struct {
	want []byte
	off  int
	bad  int // offset of the first wrong byte, -1 while none
}

func (v *verifier) Write(p []byte) (int, error) {
	if v.bad < 0 {
		w := v.want[min(v.off, len(v.want)):]
		for i := range p {
			if i >= len(w) || p[i] != w[i] {
				v.bad = v.off + i
				break
			}
		}
	}
	v.off += len(p)
	return len(p), nil
}

// TestReaderProperty relays random streams through the Reader with every
// way the pooler consumes messages mixed at random, and checks that what
// comes out is the input, byte for byte. The ReadBody consumer keeps its
// result as scratch for the next one, as the pooler does with client.big:
// a slice handed out with spare capacity into the read buffer would let
// that scratch grow inside the buffer and corrupt later messages.
func TestReaderProperty(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	seeds = append(seeds, uint64(time.Now().UnixNano()))
	if *propSeed != 0 {
		seeds = []uint64{*propSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			if err := propRun(seed); err != nil {
				t.Fatalf("%v (rerun: go test ./wire -run TestReaderProperty -wire.seed %d)", err, seed)
			}
		})
	}
}

func propRun(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15))
	bufSizes := []int{64, 100, 4096, 4097, 8192, 16384, 16385, 64 + rng.IntN(20000)}
	bufSize := bufSizes[rng.IntN(len(bufSizes))]
	stream := propStream(rng, bufSize)
	src := &shortReader{data: stream, rng: rng, max: 1 + rng.IntN(2*bufSize), fails: rng.IntN(2) == 0}
	r := NewReader(src, bufSize)
	// No budget (bodies over 1 MiB grow as they arrive), an unlimited one,
	// or one that some bodies exceed: those are forwarded instead.
	var budget *Budget
	switch rng.IntN(3) {
	case 1:
		budget = NewBudget(0)
	case 2:
		budget = NewBudget(int64(rng.IntN(3 << 20)))
	}
	if budget != nil {
		r.SetBudget(budget)
	}
	v := &verifier{want: stream, bad: -1}
	w := NewWriter(v, 64+rng.IntN(2*DefaultBufferSize))

	var scratch []byte // kept across messages, like client.big
	var hdr [5]byte
	for i := 0; ; i++ {
		var typ byte
		var n int
		err := retry(func() (err error) { typ, n, err = r.Next(); return err })
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("buffer %d, message %d: Next: %v", bufSize, i, err)
		}
		hdr[0] = typ
		binary.BigEndian.PutUint32(hdr[1:], uint32(n+4))
		op := rng.IntN(6)
		if !r.Fits() && (op == 1 || op == 2) {
			op = 0
		}
		var opErr error
		switch op {
		case 0: // Forward
			opErr = retry(func() error { return r.Forward(w) })
		case 1: // Message
			var m []byte
			if opErr = retry(func() (err error) { m, err = r.Message(); return err }); opErr == nil {
				opErr = w.Write(m)
			}
		case 2: // Body
			var b []byte
			if opErr = retry(func() (err error) { b, err = r.Body(); return err }); opErr == nil {
				opErr = w.WriteMessage(typ, b)
			}
		case 3: // Peek a prefix, write header and part of it, forward the rest
			var p []byte
			if opErr = retry(func() (err error) { p, err = r.Peek(rng.IntN(600)); return err }); opErr != nil {
				break
			}
			skip := rng.IntN(len(p) + 1)
			if opErr = w.Write(hdr[:]); opErr == nil {
				opErr = w.Write(p[:skip])
			}
			if opErr == nil {
				opErr = retry(func() error { return r.ForwardBodyFrom(w, skip) })
			}
		case 4, 5: // ReadBody or ReadBodyMax into retained scratch
			limit := -1
			if op == 5 {
				limit = max(0, n+rng.IntN(5)-2)
			}
			var b []byte
			opErr = retry(func() (err error) {
				if limit < 0 {
					b, err = r.ReadBody(scratch)
				} else {
					b, err = r.ReadBodyMax(scratch, limit)
				}
				return err
			})
			if errors.Is(opErr, ErrBudgetExceeded) && budget != nil && int64(n) > budget.Limit()-budget.InUse() ||
				errors.Is(opErr, ErrMessageTooLarge) && n > limit && limit >= 0 {
				// Refused before reading anything: the whole message
				// is still there to forward.
				opErr = retry(func() error { return r.Forward(w) })
				break
			}
			if opErr == nil {
				if len(b) != n {
					return fmt.Errorf("buffer %d, message %d: ReadBody gave %d bytes, want %d", bufSize, i, len(b), n)
				}
				if cap(b) > cap(scratch) {
					scratch = b[:0]
				}
				opErr = w.WriteMessage(typ, b)
			}
		}
		if opErr != nil {
			return fmt.Errorf("buffer %d, message %d (%d bytes), op %d: %v", bufSize, i, n, op, opErr)
		}
		if v.bad >= 0 {
			w.Flush()
			return fmt.Errorf("buffer %d: output differs from input at byte %d (message %d, op %d)", bufSize, v.bad, i, op)
		}
		if budget != nil && (budget.InUse() > int64(n) || budget.Limit() > 0 && budget.InUse() > budget.Limit()) {
			return fmt.Errorf("budget: %d in use after message %d of %d bytes (limit %d)", budget.InUse(), i, n, budget.Limit())
		}
	}
	r.Release()
	if budget != nil && budget.InUse() != 0 {
		return fmt.Errorf("budget: %d still in use after Release", budget.InUse())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if v.bad >= 0 {
		return fmt.Errorf("buffer %d: output differs from input at byte %d", bufSize, v.bad)
	}
	if v.off != len(stream) {
		return fmt.Errorf("buffer %d: relayed %d bytes of %d", bufSize, v.off, len(stream))
	}
	return nil
}
