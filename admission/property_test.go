package admission_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/admission/fakeclock"
)

// TestGateProperties is §4.2's randomized property test: goroutines submit,
// acquire, cancel, release, change capacity and move a shared fake clock,
// checking the gate's invariants after every step (inUse ≤ capacity, node
// and tier counts add up, queued requests are waiting, debt in [0,
// capacity] and 0 for the top tier, no waiter that fits left waiting, a
// timer armed when anyone waits); at the end every request was decided
// exactly once, or cancelled and never decided. Capacity changes come with
// and without logins in flight (SetPool). Run it under -race.
func TestGateProperties(t *testing.T) {
	seeds := []int64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		for _, cfg := range []admission.Config{
			{},
			{NoHysteresis: true, NoDebt: true},
			{NoFairness: true, MaxWait: 20 * ms},
		} {
			runProperties(t, seed, cfg)
		}
	}
}

type propReq struct {
	r         *admission.Request
	calls     atomic.Int32
	cancelled atomic.Bool
}

func runProperties(t *testing.T, seed int64, cfg admission.Config) {
	tr, err := admission.NewTree(admission.TreeSpec{Levels: []string{"auth", "endpoint"}, Nodes: []admission.NodeSpec{
		{Path: []string{"a"}, Weight: 3},
		{Path: []string{"a", "x"}, Ceiling: 0.5},
		{Path: []string{"a", "y"}},
		{Path: []string{"b"}, Ceiling: 0.3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	clk := fakeclock.New(t0)
	cfg.Clock, cfg.Tree, cfg.PoolSize = clk, tr, 40
	g := admission.NewGate(cfg, 6)
	var capMu sync.RWMutex
	maxCap := 6

	var (
		mu      sync.Mutex
		tickets []admission.Ticket
		reqs    []*propReq
		cancels []context.CancelFunc
		acqWG   sync.WaitGroup
		failed  atomic.Value
	)
	fail := func(format string, args ...any) {
		if failed.Load() == nil {
			failed.Store(fmt.Errorf("%s: "+format, append([]any{t.Name()}, args...)...))
		}
	}
	keep := func(tk admission.Ticket) {
		mu.Lock()
		tickets = append(tickets, tk)
		mu.Unlock()
	}
	values := [][]string{{"a", "x"}, {"a", "y"}, {"a", "z"}, {"b"}, {"c"}, nil}

	const workers, steps = 8, 300
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed*100 + int64(w)))
			for s := 0; s < steps && failed.Load() == nil; s++ {
				c := admission.Class{Priority: rng.Intn(5) - rng.Intn(2), Leaf: tr.Leaf(values[rng.Intn(len(values))])}
				switch op := rng.Intn(100); {
				case op < 40:
					pr := &propReq{}
					pr.r = g.Submit(c, func(tk admission.Ticket, err error) {
						if pr.calls.Add(1) != 1 {
							fail("done called twice")
						}
						if pr.cancelled.Load() {
							fail("done called after a successful Cancel")
						}
						if err == nil {
							if !tk.Valid() {
								fail("grant without a valid ticket")
							}
							keep(tk)
						} else if se := (*admission.ShedError)(nil); !errors.As(err, &se) {
							fail("unexpected error %v", err)
						}
					})
					mu.Lock()
					reqs = append(reqs, pr)
					mu.Unlock()
				case op < 48:
					ctx, cancel := context.WithCancel(context.Background())
					mu.Lock()
					cancels = append(cancels, cancel)
					mu.Unlock()
					acqWG.Add(1)
					go func() {
						defer acqWG.Done()
						tk, err := g.Acquire(ctx, c)
						if err == nil {
							keep(tk)
						}
					}()
				case op < 55:
					mu.Lock()
					var cf context.CancelFunc
					if len(cancels) > 0 {
						i := rng.Intn(len(cancels))
						cf = cancels[i]
					}
					mu.Unlock()
					if cf != nil {
						cf()
					}
				case op < 65:
					mu.Lock()
					var pr *propReq
					if len(reqs) > 0 {
						pr = reqs[rng.Intn(len(reqs))]
					}
					mu.Unlock()
					if pr != nil && pr.r != nil {
						if g.Cancel(pr.r) {
							pr.cancelled.Store(true)
							if pr.calls.Load() != 0 {
								fail("Cancel succeeded on a decided request")
							}
						}
					}
				case op < 88:
					mu.Lock()
					var tk admission.Ticket
					if n := len(tickets); n > 0 {
						i := rng.Intn(n)
						tk = tickets[i]
						tickets[i] = tickets[n-1]
						tickets = tickets[:n-1]
					}
					mu.Unlock()
					g.Release(tk)
				case op < 97:
					clk.Advance(time.Duration(rng.Intn(3000)) * time.Microsecond)
				case op < 99:
					n := rng.Intn(9)
					capMu.Lock()
					maxCap = max(maxCap, n)
					g.SetCapacity(n)
					capMu.Unlock()
				default:
					n := rng.Intn(9)
					capMu.Lock()
					maxCap = max(maxCap, n)
					g.SetPool(n, rng.Intn(3))
					capMu.Unlock()
				}
				// inUse may exceed capacity only after a decrease: never
				// above the largest capacity set so far.
				capMu.RLock()
				err := g.CheckInvariants(maxCap)
				capMu.RUnlock()
				if err != nil {
					fail("step %d: %v", s, err)
				}
			}
		}(w)
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(err)
	}

	// Drain: cancel every Acquire, let every timeout pass, release all.
	mu.Lock()
	for _, cf := range cancels {
		cf()
	}
	mu.Unlock()
	acqWG.Wait()
	g.SetPool(6, 0)
	for i := 0; i < 100 && g.Waiting() > 0; i++ {
		clk.Advance(time.Second)
	}
	mu.Lock()
	for len(tickets) > 0 {
		tk := tickets[len(tickets)-1]
		tickets = tickets[:len(tickets)-1]
		mu.Unlock()
		g.Release(tk)
		mu.Lock()
	}
	mu.Unlock()
	if err := failed.Load(); err != nil {
		t.Fatal(err)
	}
	if g.InUse() != 0 || g.Waiting() != 0 {
		t.Fatalf("after drain: inUse %d waiting %d", g.InUse(), g.Waiting())
	}
	if err := g.CheckInvariants(0); err != nil {
		t.Fatal(err)
	}
	var decided, cancelled int
	for _, pr := range reqs {
		n := pr.calls.Load()
		switch {
		case pr.cancelled.Load() && n != 0:
			t.Fatalf("cancelled request decided %d times", n)
		case pr.cancelled.Load():
			cancelled++
		case n != 1:
			t.Fatalf("request decided %d times", n)
		default:
			decided++
		}
	}
	s := g.Snapshot()
	var granted, shed uint64
	for _, ts := range s.Tiers {
		granted += ts.Granted
		shed += ts.Shed
	}
	t.Logf("%+v: decided %d cancelled %d granted %d shed %d", cfg.NoFairness, decided, cancelled, granted, shed)
	if decided == 0 || granted == 0 || shed == 0 {
		t.Fatalf("a weak run: decided %d cancelled %d granted %d shed %d", decided, cancelled, granted, shed)
	}
}
