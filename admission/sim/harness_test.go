package sim

import (
	"math"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/admission/fakeclock"
)

// These tests check the harness itself against queueing theory, with a
// reference gate that is a plain FIFO semaphore (no timeouts, no debt):
// if the arrivals, service times, event order or statistics were wrong, the
// gate scenarios would measure the harness rather than the gate.

// fifoGate is an M/M/c queue discipline: grant in arrival order, never shed.
type fifoGate struct {
	capacity, inUse int
	queue           []func(any, error)
	maxQueue        int
}

func (g *fifoGate) Submit(_ admission.Class, done func(any, error)) {
	if g.inUse < g.capacity && len(g.queue) == 0 {
		g.inUse++
		done(struct{}{}, nil)
		return
	}
	g.queue = append(g.queue, done)
	g.maxQueue = max(g.maxQueue, len(g.queue))
}

func (g *fifoGate) Release(any) {
	g.inUse--
	g.dispatch()
}

func (g *fifoGate) SetCapacity(n int) {
	g.capacity = n
	g.dispatch()
}

func (g *fifoGate) dispatch() {
	for g.inUse < g.capacity && len(g.queue) > 0 {
		done := g.queue[0]
		g.queue = g.queue[1:]
		g.inUse++
		done(struct{}{}, nil)
	}
}

// erlangC returns the probability that an arrival waits in M/M/c with
// offered load a Erlangs, and the mean wait in units of the mean service
// time.
func erlangC(c int, a float64) (pWait, meanWait float64) {
	term, sum := 1.0, 0.0 // a^k/k!
	for k := 0; k < c; k++ {
		sum += term
		term *= a / float64(k+1)
	}
	tail := term * float64(c) / (float64(c) - a)
	pWait = tail / (sum + tail)
	return pWait, pWait / (float64(c) - a)
}

func TestHarnessMatchesErlangC(t *testing.T) {
	const c = 20
	svc := 10 * time.Millisecond
	pWant, wWant := erlangC(c, 17)
	for _, seed := range []uint64{1, 2} {
		g := &fifoGate{capacity: c}
		s := New(Config{
			Seed:     seed,
			Sources:  []Source{SourceForLoad("all", admission.Class{}, 0.85, c, svc)},
			Capacity: c,
			Warmup:   2 * time.Second,
			Measure:  18 * time.Second,
			Tail:     time.Second,
		}, fakeclock.New(Epoch), g)
		s.Run()
		if len(s.Anomalies) > 0 {
			t.Fatalf("seed %d: anomalies: %v", seed, s.Anomalies)
		}
		in := s.InWindow()
		cnt := s.Count(in)
		// 1700/s over 18 s: 30600 arrivals, σ ≈ 175.
		if math.Abs(float64(cnt.Arrived)-30600) > 5*175 {
			t.Errorf("seed %d: %d arrivals in the window, want 30600 ± 875", seed, cnt.Arrived)
		}
		if cnt.Granted != cnt.Arrived {
			t.Errorf("seed %d: %d of %d granted by a gate that never sheds", seed, cnt.Granted, cnt.Arrived)
		}
		if u := s.Utilisation(); math.Abs(u-0.85) > 0.02 {
			t.Errorf("seed %d: utilisation %.4f, want 0.85 ± 0.02", seed, u)
		}
		w := s.Waits(in)
		waited, sum := 0, time.Duration(0)
		for _, d := range w {
			if d > 0 {
				waited++
			}
			sum += d
		}
		pGot := float64(waited) / float64(len(w))
		wGot := float64(sum) / float64(len(w)) / float64(svc)
		t.Logf("seed %d: P(wait) %.3f (Erlang C %.3f), mean wait %.3f (%.3f) service times, max queue %d", seed, pGot, pWant, wGot, wWant, g.maxQueue)
		// Waits are strongly correlated in time, so the tolerance is wide;
		// a harness bug (wrong rate, wrong service mean, lost releases)
		// moves these by far more.
		if math.Abs(pGot-pWant) > 0.25*pWant {
			t.Errorf("seed %d: P(wait) %.3f, Erlang C says %.3f", seed, pGot, pWant)
		}
		if math.Abs(wGot-wWant) > 0.35*wWant {
			t.Errorf("seed %d: mean wait %.3f service times, Erlang C says %.3f", seed, wGot, wWant)
		}
	}
}

// The pool model: a loss at t0 refills through the bucket in exactly the
// schedule x/time/rate gives (4 at once, then one per 1/rate), never with
// more than MaxConnecting in flight, and the gate's capacity follows.
func TestHarnessPoolRefill(t *testing.T) {
	g := &fifoGate{capacity: 20}
	s := New(Config{
		Seed:     1,
		Sources:  []Source{SourceForLoad("all", admission.Class{}, 0.5, 20, 10*time.Millisecond)},
		Capacity: 20,
		Warmup:   time.Second,
		Measure:  2 * time.Second,
		Pool: &PoolConfig{
			Size: 20, CreateRate: 20, CreateBurst: 4, MaxConnecting: 4,
			ConnectTime: 5 * time.Millisecond, LossAt: []time.Duration{time.Second},
		},
	}, fakeclock.New(Epoch), g)
	s.Run()
	if len(s.Anomalies) > 0 {
		t.Fatalf("anomalies: %v", s.Anomalies)
	}
	p := s.Pool()
	if len(p.ConnectStarts) != 20 {
		t.Fatalf("%d connects, want 20: %v", len(p.ConnectStarts), p.ConnectStarts)
	}
	for i, at := range p.ConnectStarts {
		want := time.Second
		if i >= 4 {
			want += time.Duration(i-3) * 50 * time.Millisecond
		}
		if at != want {
			t.Errorf("connect %d at %v, want %v", i, at, want)
		}
	}
	if p.MaxConnecting != 4 {
		t.Errorf("max connecting %d, want 4", p.MaxConnecting)
	}
	if full, ok := p.FirstLive(time.Second, 20); !ok || full != time.Second+805*time.Millisecond {
		t.Errorf("full again at %v (%v), want 1.805s", full, ok)
	}
	if g.capacity != 20 {
		t.Errorf("gate capacity %d at the end, want 20", g.capacity)
	}
	c := s.Count(func(*Request) bool { return true })
	if c.Aborted == 0 || c.Aborted > 20 {
		t.Errorf("%d transactions aborted by the loss, want 1..20", c.Aborted)
	}
}
