package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/admission/fakeclock"
)

// The gate's design scenarios (sim/doc.go), each asserting the
// table's thresholds against the real Gate. Model: C = 20, exponential
// 10 ms transactions, open-loop Poisson arrivals, short 5 ms / long 100 ms
// unless stated. The table was derived with the library's debt (max C,
// decay over 10 s, forgive 0.1); since issue 16 the gate's debt follows the
// higher tiers' demand (admission/doc.go), and the table's thresholds
// still hold. Issue 16's own scenarios, S7 and S8, are in
// overload_test.go.
//
// Durations: the research runs measured 18 s after a 2 s warm-up. Under
// -race on a small shared machine that is too slow for every scenario × 3
// seeds, so some windows differ, each for a stated reason: 8 s where the
// table's bounds have a wide margin (S3, S3b, S4, S4b, T2, T3, S6), 60 s
// where the asserted statistic is a tail or comes in rare episodes and 18 s
// samples scatter across the bound (S1b, S3c with debt), the burst itself
// for S2 and 6 s around the loss for S5. Floods that only need to exceed
// their share offer 100–150 % of C instead of 200–300 %. -short runs one
// seed.

const (
	capC = 20
	svc  = 10 * time.Millisecond
)

func seeds() []uint64 {
	if testing.Short() {
		return []uint64{1}
	}
	return []uint64{1, 2, 3}
}

// modelGate is the gate configuration of the research model, under which
// the table's thresholds were derived: fixed timeouts (HoldP50 < 0 turns
// off the hold-time floors Short' = max(Short, 2×p50), Long' = max(Long,
// 10×p50), which the model did not have) and the library's LIFO exit (leave
// as soon as the queue is empty), "unless stated": S6 states hysteresis.
// DebtDecay caps the demand time constant (kept as the model stated it; the
// model's forgiveness is the decay's now).
func modelGate(tiers int) admission.Config {
	return admission.Config{
		Tiers:        tiers,
		PoolSize:     capC,
		Short:        5 * time.Millisecond,
		Long:         100 * time.Millisecond,
		DebtDecay:    10 * time.Second,
		HoldP50:      -1,
		NoHysteresis: true,
	}
}

type run struct {
	*Sim
	gate *admission.Gate
}

// simulate builds a gate on a fresh fake clock, runs cfg against it and
// fails the test on any harness anomaly (done twice or never, a grant over
// capacity, a ticket left over). probe, if set, is given the gate and
// returns the OnStep hook.
func simulate(t *testing.T, gcfg admission.Config, cfg Config, probe func(*run) func(time.Duration)) *run {
	t.Helper()
	clk := fakeclock.New(Epoch)
	gcfg.Clock = clk
	g := admission.NewGate(gcfg, cfg.InitialCapacity())
	r := &run{gate: g}
	if probe != nil {
		cfg.OnStep = probe(r)
	}
	s := New(cfg, clk, Wrap(g))
	r.Sim = s
	s.Run()
	if len(s.Anomalies) > 0 {
		t.Fatalf("harness anomalies:\n%s", strings.Join(s.Anomalies, "\n"))
	}
	snap := g.Snapshot()
	if snap.InUse != 0 || snap.Waiting != 0 {
		t.Fatalf("after the drain the gate reports InUse %d, Waiting %d; want 0, 0", snap.InUse, snap.Waiting)
	}
	return r
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func pct(x float64) string { return fmt.Sprintf("%.3f%%", 100*x) }

// eachSeed runs f as a parallel subtest per seed.
func eachSeed(t *testing.T, f func(t *testing.T, seed uint64)) {
	for _, seed := range seeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			f(t, seed)
		})
	}
}

// S1: steady 50 % over four tiers. Nothing above the lowest tier is shed,
// almost nothing at all, and waits stay under the short timeout.
func TestS1Steady50(t *testing.T) {
	t.Parallel()
	loads := []float64{0.05, 0.25, 0.10, 0.10}
	eachSeed(t, func(t *testing.T, seed uint64) {
		var src []Source
		for p, l := range loads {
			src = append(src, SourceForLoad(fmt.Sprintf("tier%d", p), admission.Class{Priority: p}, l, capC, svc))
		}
		gc := modelGate(4)
		r := simulate(t, gc, Config{Seed: seed, Sources: src, Capacity: capC,
			Warmup: 2 * time.Second, Measure: 18 * time.Second, Tail: time.Second}, nil)
		in := r.InWindow()
		all := r.Count(in)
		p99 := Percentile(r.Waits(in), 0.99)
		t.Logf("S1 seed %d: shed total %s; p99 wait %s; max %s", seed, pct(all.ShedRatio()), ms(p99), ms(Max(r.Waits(in))))
		for p := range loads {
			c := r.Count(And(in, Tier(p)))
			t.Logf("S1 seed %d: tier %d: %d arrived, %d shed %v", seed, p, c.Arrived, c.Shed, c.ByReason)
			if p <= 2 && c.Shed != 0 {
				t.Errorf("tier %d: %d shed, want 0", p, c.Shed)
			}
		}
		if all.ShedRatio() > 0.002 {
			t.Errorf("total shed %s, want ≤ 0.2%%", pct(all.ShedRatio()))
		}
		if p99 > gc.Short {
			t.Errorf("admitted wait p99 %s, want ≤ short %s", ms(p99), ms(gc.Short))
		}
	})
}

// S1b: steady 85 %, one tier. With timeouts scaled to the transaction time
// (short 20 ms = 2 × mean, long 200 ms) shedding stays ≤ 0.2 %.
func TestS1bSteady85(t *testing.T) {
	t.Parallel()
	eachSeed(t, func(t *testing.T, seed uint64) {
		gc := modelGate(1)
		gc.Short, gc.Long = 20*time.Millisecond, 200*time.Millisecond
		src := []Source{SourceForLoad("all", admission.Class{}, 0.85, capC, svc)}
		r := simulate(t, gc, Config{Seed: seed, Sources: src, Capacity: capC,
			Warmup: 2 * time.Second, Measure: 60 * time.Second, Tail: time.Second}, nil)
		in := r.InWindow()
		c := r.Count(in)
		w := r.Waits(in)
		p99 := Percentile(w, 0.99)
		snap := r.gate.Snapshot()
		t.Logf("S1b seed %d (20/200ms): shed %s (%d of %d) %v; wait p50 %s p99 %s max %s; mode switches %d",
			seed, pct(c.ShedRatio()), c.Shed, c.Arrived, c.ByReason, ms(Percentile(w, 0.5)), ms(p99), ms(Max(w)), snap.Tiers[0].ModeSwitches)
		if c.ShedRatio() > 0.002 {
			t.Errorf("shed %s, want ≤ 0.2%%", pct(c.ShedRatio()))
		}
		if p99 > 15*time.Millisecond {
			t.Errorf("admitted wait p99 %s, want ≤ 15ms", ms(p99))
		}
	})
}

// S2: a 3× burst (300 % of capacity) for 2 s on a 50 % base, one tier.
// Throughput stays at capacity, about a third of the burst gets through,
// nobody admitted waits longer than long, the gate switches to LIFO one
// long interval into the burst and stops shedding soon after it ends.
func TestS2Burst(t *testing.T) {
	t.Parallel()
	const (
		burstFrom  = 2 * time.Second
		burstUntil = 4 * time.Second
	)
	eachSeed(t, func(t *testing.T, seed uint64) {
		gc := modelGate(1)
		base := SourceForLoad("base", admission.Class{}, 0.5, capC, svc)
		burst := SourceForLoad("burst", admission.Class{}, 2.5, capC, svc)
		burst.From, burst.Until = burstFrom, burstUntil
		// The probe records when the tier first reports LIFO, and when the
		// queue last went from empty to non-empty before that (the start of
		// the standing queue, which is what the detector times).
		lifoAt, standingFrom := time.Duration(-1), time.Duration(-1)
		probe := func(r *run) func(time.Duration) {
			return func(now time.Duration) {
				if lifoAt >= 0 || now < burstFrom || now > burstFrom+time.Second {
					return
				}
				if r.Queued() == 0 {
					standingFrom = -1
				} else if standingFrom < 0 {
					standingFrom = now
				}
				if r.gate.Snapshot().Tiers[0].LIFO {
					lifoAt = now
				}
			}
		}
		// The window is the burst itself; the tail shows the recovery.
		r := simulate(t, gc, Config{Seed: seed, Sources: []Source{base, burst}, Capacity: capC,
			Warmup: burstFrom, Measure: burstUntil - burstFrom, Tail: 2 * time.Second}, probe)
		in := r.InWindow()
		c := r.Count(in)
		all := func(*Request) bool { return true }
		maxWait := Max(r.Waits(all))
		late := r.Count(func(q *Request) bool { return q.Outcome == Shed && q.Decided >= burstUntil+200*time.Millisecond })
		lastShed := time.Duration(0)
		for i := range r.Requests {
			if q := &r.Requests[i]; q.Outcome == Shed && q.Decided > lastShed {
				lastShed = q.Decided
			}
		}
		t.Logf("S2 seed %d: utilisation %.4f; burst success %s (%d of %d) %v; max admitted wait %s; queue standing from +%s, LIFO at +%s; last shed at %v; mode switches %d",
			seed, r.Utilisation(), pct(c.Success()), c.Granted, c.Arrived, c.ByReason, ms(maxWait), ms(standingFrom-burstFrom), ms(lifoAt-burstFrom), lastShed, r.gate.Snapshot().Tiers[0].ModeSwitches)
		if u := r.Utilisation(); u < 0.97 {
			t.Errorf("utilisation during the burst %.4f, want ≥ 0.97", u)
		}
		if s := c.Success(); s < 0.30 || s > 0.37 {
			t.Errorf("success during the burst %s, want in [30%%, 37%%]", pct(s))
		}
		if maxWait > gc.Long {
			t.Errorf("max admitted wait %s, want ≤ long %s", ms(maxWait), ms(gc.Long))
		}
		if late.Arrived != 0 {
			t.Errorf("%d shed at or after burst end + 200ms (last at %v), want 0", late.Arrived, lastShed)
		}
		// The table says "≤ long + 1 ms after the burst starts"; the detector
		// (§1.2) times the standing queue, which begins only once the burst
		// has filled the slots the 50 % base left free (1–3.3 ms with these
		// seeds). So the bound is taken from the start of the standing queue.
		if lifoAt < 0 || standingFrom < 0 || lifoAt > standingFrom+gc.Long+time.Millisecond {
			t.Errorf("LIFO entered at %v, want ≤ standing queue start (%v) + long + 1ms", lifoAt, standingFrom)
		}
	})
}

// twoTiers is the high/low mix of S3: high is tier 1 and low tier 3 of four
// (PGKeeper's High and Low).
const (
	high = 1
	low  = 3
)

// S3: high 40 % + low 300 %, every transaction 10 ms. High is admitted
// almost always and at once; low still gets something; debt leaves some
// slots idle, but not more than a quarter.
func TestS3HighLow(t *testing.T) {
	t.Parallel()
	eachSeed(t, func(t *testing.T, seed uint64) {
		src := []Source{
			SourceForLoad("high", admission.Class{Priority: high}, 0.40, capC, svc),
			SourceForLoad("low", admission.Class{Priority: low}, 3.00, capC, svc),
		}
		r := simulate(t, modelGate(4), Config{Seed: seed, Sources: src, Capacity: capC,
			Warmup: 2 * time.Second, Measure: 8 * time.Second, Tail: time.Second}, nil)
		in := r.InWindow()
		h := r.Count(And(in, Tier(high)))
		hp99 := Percentile(r.Waits(And(in, Tier(high))), 0.99)
		lowSlots := r.TierSlots(low)
		t.Logf("S3 seed %d: high success %s (%d of %d), p99 %s; low %.2f slots (%s of C), success %s; utilisation %.4f",
			seed, pct(h.Success()), h.Granted, h.Arrived, ms(hp99), lowSlots, pct(lowSlots/capC), pct(r.Count(And(in, Tier(low))).Success()), r.Utilisation())
		if h.Success() < 0.999 {
			t.Errorf("high success %s, want ≥ 99.9%%", pct(h.Success()))
		}
		if hp99 > 5*time.Millisecond {
			t.Errorf("high admitted wait p99 %s, want ≤ 5ms", ms(hp99))
		}
		if u := r.Utilisation(); u < 0.75 {
			t.Errorf("utilisation %.4f, want ≥ 0.75", u)
		}
		if lowSlots <= 0 {
			t.Errorf("low throughput %.3f slots, want > 0", lowSlots)
		}
	})
}

// S3b: high 90 % + low 300 %. High keeps ≥ 98.5 %; low is starved by design.
func TestS3bHighStarvesLow(t *testing.T) {
	t.Parallel()
	eachSeed(t, func(t *testing.T, seed uint64) {
		src := []Source{
			SourceForLoad("high", admission.Class{Priority: high}, 0.90, capC, svc),
			SourceForLoad("low", admission.Class{Priority: low}, 3.00, capC, svc),
		}
		r := simulate(t, modelGate(4), Config{Seed: seed, Sources: src, Capacity: capC,
			Warmup: 2 * time.Second, Measure: 8 * time.Second, Tail: time.Second}, nil)
		in := r.InWindow()
		h := r.Count(And(in, Tier(high)))
		lowSlots := r.TierSlots(low)
		t.Logf("S3b seed %d: high success %s (%d of %d) %v; low %.3f slots (%s of C); utilisation %.4f",
			seed, pct(h.Success()), h.Granted, h.Arrived, h.ByReason, lowSlots, pct(lowSlots/capC), r.Utilisation())
		if h.Success() < 0.985 {
			t.Errorf("high success %s, want ≥ 98.5%%", pct(h.Success()))
		}
		if lowSlots > 0.02*capC {
			t.Errorf("low throughput %.3f slots, want ≤ 2%% of C = %.2f", lowSlots, 0.02*capC)
		}
	})
}

// S3c: high 40 % (10 ms) + low 200 % of 200 ms transactions. Debt keeps
// high at ≥ 99.5 %; with debt off every slot fills with 200 ms batch work and
// high drops below 97 % (the regression guard that debt is load-bearing).
// High's sheds come in short episodes (a few per 10 s), so an 18 s window
// holds too few of them for a stable ratio (seeds 1–12 gave 99.48–100 %);
// the window is 60 s.
func TestS3cLongLowTransactions(t *testing.T) {
	t.Parallel()
	lowSvc := 200 * time.Millisecond
	for _, noDebt := range []bool{false, true} {
		t.Run(fmt.Sprintf("noDebt=%v", noDebt), func(t *testing.T) {
			t.Parallel()
			eachSeed(t, func(t *testing.T, seed uint64) {
				src := []Source{
					SourceForLoad("high", admission.Class{Priority: high}, 0.40, capC, svc),
					SourceForLoad("low", admission.Class{Priority: low}, 2.00, capC, lowSvc),
				}
				gc := modelGate(4)
				gc.NoDebt = noDebt
				// The guard has a wide margin; 18 s is enough there.
				measure := 60 * time.Second
				if noDebt {
					measure = 18 * time.Second
				}
				r := simulate(t, gc, Config{Seed: seed, Sources: src, Capacity: capC,
					Warmup: 2 * time.Second, Measure: measure, Tail: time.Second}, nil)
				in := r.InWindow()
				h := r.Count(And(in, Tier(high)))
				hw := r.Waits(And(in, Tier(high)))
				t.Logf("S3c seed %d noDebt=%v: high success %s (%d of %d) %v, p99 %s; low %.2f slots; utilisation %.4f",
					seed, noDebt, pct(h.Success()), h.Granted, h.Arrived, h.ByReason, ms(Percentile(hw, 0.99)), r.TierSlots(low), r.Utilisation())
				if !noDebt && h.Success() < 0.995 {
					t.Errorf("with debt: high success %s, want ≥ 99.5%%", pct(h.Success()))
				}
				if noDebt && h.Success() >= 0.97 {
					t.Errorf("with debt off: high success %s, want < 97%% (debt should be what protects high)", pct(h.Success()))
				}
			})
		})
	}
}

// fairTree builds a one-level tree "app" with the given weights and returns
// it and the leaves in order.
func fairTree(t *testing.T, weights ...float64) (*admission.Tree, []admission.LeafID) {
	t.Helper()
	spec := admission.TreeSpec{Levels: []string{"app"}}
	for i, w := range weights {
		spec.Nodes = append(spec.Nodes, admission.NodeSpec{Path: []string{string(rune('a' + i))}, Weight: w})
	}
	tree, err := admission.NewTree(spec)
	if err != nil {
		t.Fatal(err)
	}
	var leaves []admission.LeafID
	for i := range weights {
		leaves = append(leaves, tree.Leaf([]string{string(rune('a' + i))}))
	}
	return tree, leaves
}

// expected returns the water-fill allocation of each leaf for the sources'
// mean demands (offered load in slots).
func expected(t *testing.T, tree *admission.Tree, src []Source, leaves []admission.LeafID) []float64 {
	t.Helper()
	demand := map[admission.LeafID]float64{}
	for _, s := range src {
		demand[s.Class.Leaf] += s.Load()
	}
	alloc := admission.WaterFill(tree, capC, demand)
	var out []float64
	for _, l := range leaves {
		a, ok := alloc[tree.LeafPath(l)]
		if !ok {
			t.Fatalf("WaterFill has no entry for %q: %v", tree.LeafPath(l), alloc)
		}
		out = append(out, a)
	}
	return out
}

// S4: one tier; A offers 500 %, B 30 %, equal weights. B gets its demand
// (6 slots, under its fair half) and ≥ 95 % success; nothing idles.
func TestS4FairShare(t *testing.T) {
	t.Parallel()
	eachSeed(t, func(t *testing.T, seed uint64) {
		tree, lv := fairTree(t, 1, 1)
		a, b := lv[0], lv[1]
		src := []Source{
			SourceForLoad("A", admission.Class{Leaf: a}, 5.0, capC, svc),
			SourceForLoad("B", admission.Class{Leaf: b}, 0.3, capC, svc),
		}
		gc := modelGate(1)
		gc.Tree = tree
		r := simulate(t, gc, Config{Seed: seed, Sources: src, Capacity: capC,
			Warmup: 2 * time.Second, Measure: 8 * time.Second, Tail: time.Second}, nil)
		in := r.InWindow()
		bc := r.Count(And(in, Leaf(b)))
		want := math.Min(src[1].Load(), capC/2)
		t.Logf("S4 seed %d: B success %s (%d of %d) %v; slots A %.2f B %.2f (want B %.2f); utilisation %.4f",
			seed, pct(bc.Success()), bc.Granted, bc.Arrived, bc.ByReason, r.LeafSlots(a), r.LeafSlots(b), want, r.Utilisation())
		if bc.Success() < 0.95 {
			t.Errorf("B success %s, want ≥ 95%%", pct(bc.Success()))
		}
		if d := math.Abs(r.LeafSlots(b) - want); d > 1 {
			t.Errorf("B holds %.2f slots, want %.2f ± 1", r.LeafSlots(b), want)
		}
		if u := r.Utilisation(); u < 0.99 {
			t.Errorf("utilisation %.4f, want ≥ 0.99", u)
		}
	})
}

// S4b: weights 3 : 2 : 1, every leaf backlogged (each offers 100 % of C,
// 2 to 6 times its share): the time-averaged slots
// follow the water-fill (10 / 6.67 / 3.33) within ±1 slot.
func TestS4bWeights(t *testing.T) {
	t.Parallel()
	eachSeed(t, func(t *testing.T, seed uint64) {
		tree, lv := fairTree(t, 3, 2, 1)
		var src []Source
		for i, l := range lv {
			src = append(src, SourceForLoad(fmt.Sprintf("w%d", 3-i), admission.Class{Leaf: l}, 1.0, capC, svc))
		}
		want := expected(t, tree, src, lv)
		for i, w := range []float64{10, 20.0 / 3, 10.0 / 3} {
			if math.Abs(want[i]-w) > 1e-6 {
				t.Fatalf("WaterFill gives %v, want [10 6.67 3.33]", want)
			}
		}
		gc := modelGate(1)
		gc.Tree = tree
		r := simulate(t, gc, Config{Seed: seed, Sources: src, Capacity: capC,
			Warmup: 2 * time.Second, Measure: 8 * time.Second, Tail: time.Second}, nil)
		got := make([]float64, len(lv))
		for i, l := range lv {
			got[i] = r.LeafSlots(l)
		}
		t.Logf("S4b seed %d: slots %.2f / %.2f / %.2f, water-fill %.2f / %.2f / %.2f; utilisation %.4f",
			seed, got[0], got[1], got[2], want[0], want[1], want[2], r.Utilisation())
		for i := range lv {
			if math.Abs(got[i]-want[i]) > 1 {
				t.Errorf("leaf %s holds %.2f slots, want %.2f ± 1", tree.LeafPath(lv[i]), got[i], want[i])
			}
		}
	})
}

// authTree is §1.3's two-level tree: auth (weight 3) → {comments 1,
// search 1}, unauth (weight 1, ceiling as given) → {search}.
func authTree(t *testing.T, unauthCeiling float64) (tree *admission.Tree, comments, authSearch, unauthSearch admission.LeafID) {
	t.Helper()
	tree, err := admission.NewTree(admission.TreeSpec{
		Levels: []string{"auth", "endpoint"},
		Nodes: []admission.NodeSpec{
			{Path: []string{"authenticated"}, Weight: 3},
			{Path: []string{"authenticated", "comments"}, Weight: 1},
			{Path: []string{"authenticated", "search"}, Weight: 1},
			{Path: []string{"unauthenticated"}, Weight: 1, Ceiling: unauthCeiling},
			{Path: []string{"unauthenticated", "search"}, Weight: 1},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree, tree.Leaf([]string{"authenticated", "comments"}),
		tree.Leaf([]string{"authenticated", "search"}),
		tree.Leaf([]string{"unauthenticated", "search"})
}

// T2: comments floods, auth/search needs 2 slots, unauth/search floods
// (the floods offer 150 % of C each, far above their 13 and 5 slot shares):
// 13 / 2 / 5 by the water-fill, each within ±1 slot, and the small leaf
// keeps ≥ 99 % success.
func TestT2Tree(t *testing.T) {
	t.Parallel()
	eachSeed(t, func(t *testing.T, seed uint64) {
		tree, comments, authSearch, unauthSearch := authTree(t, 0)
		lv := []admission.LeafID{comments, authSearch, unauthSearch}
		src := []Source{
			SourceForLoad("auth/comments", admission.Class{Leaf: comments}, 1.5, capC, svc),
			SourceForLoad("auth/search", admission.Class{Leaf: authSearch}, 0.10, capC, svc),
			SourceForLoad("unauth/search", admission.Class{Leaf: unauthSearch}, 1.5, capC, svc),
		}
		want := expected(t, tree, src, lv)
		for i, w := range []float64{13, 2, 5} {
			if math.Abs(want[i]-w) > 1e-6 {
				t.Fatalf("WaterFill gives %v, want [13 2 5]", want)
			}
		}
		gc := modelGate(1)
		gc.Tree = tree
		r := simulate(t, gc, Config{Seed: seed, Sources: src, Capacity: capC,
			Warmup: 2 * time.Second, Measure: 8 * time.Second, Tail: time.Second}, nil)
		in := r.InWindow()
		small := r.Count(And(in, Leaf(authSearch)))
		got := make([]float64, len(lv))
		for i, l := range lv {
			got[i] = r.LeafSlots(l)
		}
		t.Logf("T2 seed %d: slots %.2f / %.2f / %.2f (water-fill %.0f / %.0f / %.0f); auth/search success %s (%d of %d) %v",
			seed, got[0], got[1], got[2], want[0], want[1], want[2], pct(small.Success()), small.Granted, small.Arrived, small.ByReason)
		if !r.gate.Fair() {
			t.Fatalf("the gate turned fairness off for %d declared leaves and PoolSize %d", tree.DeclaredLeaves(), capC)
		}
		for i := range lv {
			if math.Abs(got[i]-want[i]) > 1 {
				t.Errorf("leaf %s holds %.2f slots, want %.2f ± 1", tree.LeafPath(lv[i]), got[i], want[i])
			}
		}
		if small.Success() < 0.99 {
			t.Errorf("auth/search success %s, want ≥ 99%%", pct(small.Success()))
		}
	})
}

// T3: unauth has a ceiling of 3 slots (0.15 of 20) and floods (150 % of
// C); auth needs
// 4 + 4. unauth never holds more than 3 tickets, even with idle capacity,
// and auth keeps ≥ 99.9 % success.
func TestT3Ceiling(t *testing.T) {
	t.Parallel()
	eachSeed(t, func(t *testing.T, seed uint64) {
		tree, comments, authSearch, unauthSearch := authTree(t, 0.15)
		src := []Source{
			SourceForLoad("auth/comments", admission.Class{Leaf: comments}, 0.20, capC, svc),
			SourceForLoad("auth/search", admission.Class{Leaf: authSearch}, 0.20, capC, svc),
			SourceForLoad("unauth/search", admission.Class{Leaf: unauthSearch}, 1.5, capC, svc),
		}
		gc := modelGate(1)
		gc.Tree = tree
		r := simulate(t, gc, Config{Seed: seed, Sources: src, Capacity: capC,
			Warmup: 2 * time.Second, Measure: 8 * time.Second, Tail: time.Second}, nil)
		in := r.InWindow()
		auth := r.Count(And(in, func(q *Request) bool { return q.Class.Leaf != unauthSearch }))
		t.Logf("T3 seed %d: unauth max %d, average %.2f slots; auth success %s (%d of %d) %v; utilisation %.4f",
			seed, r.MaxLeafInUse(unauthSearch), r.LeafSlots(unauthSearch), pct(auth.Success()), auth.Granted, auth.Arrived, auth.ByReason, r.Utilisation())
		if !r.gate.Fair() {
			t.Fatalf("the gate turned fairness off (and with it the ceiling) for %d declared leaves and PoolSize %d", tree.DeclaredLeaves(), capC)
		}
		if m := r.MaxLeafInUse(unauthSearch); m > 3 {
			t.Errorf("unauth held %d tickets after a grant, want ≤ ceiling 3", m)
		}
		if auth.Success() < 0.999 {
			t.Errorf("auth success %s, want ≥ 99.9%%", pct(auth.Success()))
		}
	})
}

// S5: every server dies at t0 and is recreated through the create bucket
// (20/s, burst 4, ≤ 4 in flight, 5 ms connects); the gate's capacity
// follows live + connecting. High offers 30 % of C, low 40 %.
func TestS5ServerLoss(t *testing.T) {
	t.Parallel()
	const (
		t0     = 5 * time.Second
		rateHz = 20.0
		burst  = 4
	)
	eachSeed(t, func(t *testing.T, seed uint64) {
		src := []Source{
			SourceForLoad("high", admission.Class{Priority: high}, 0.30, capC, svc),
			SourceForLoad("low", admission.Class{Priority: low}, 0.40, capC, svc),
		}
		pc := &PoolConfig{Size: capC, CreateRate: rateHz, CreateBurst: burst, MaxConnecting: 4,
			ConnectTime: 5 * time.Millisecond, LossAt: []time.Duration{t0}}
		r := simulate(t, modelGate(4), Config{Seed: seed, Sources: src, Capacity: capC, Pool: pc,
			Warmup: 2 * time.Second, Measure: 6 * time.Second, Tail: time.Second}, nil)
		p := r.Pool()

		// Every window between two connect starts obeys the bucket.
		starts := p.ConnectStarts
		for i := range starts {
			for j := i; j < len(starts); j++ {
				n, span := j-i+1, starts[j]-starts[i]
				if float64(n) > rateHz*span.Seconds()+burst+1e-9 {
					t.Errorf("%d connects in [%v, %v]: more than rate·Δ + burst = %.2f", n, starts[i], starts[j], rateHz*span.Seconds()+burst)
				}
			}
		}
		inFirstSecond := 0
		for _, s := range starts {
			if s >= t0 && s < t0+time.Second {
				inFirstSecond++
			}
		}
		full, ok := p.FirstLive(t0, capC)
		deadline := t0 + time.Duration(float64(capC)/rateHz*float64(time.Second)) + time.Duration(float64(time.Second)/rateHz)
		if !ok || full > deadline {
			t.Errorf("full capacity again at %v (%v), want by t0 + C/rate + 1/rate = %v", full, ok, deadline)
		}
		if p.MaxConnecting > 4 {
			t.Errorf("%d connects in flight, want ≤ 4", p.MaxConnecting)
		}
		highDemand := src[0].Load()
		enough := int(math.Ceil(1.5 * highDemand))
		from, ok := p.FirstLive(t0, enough)
		if !ok {
			t.Fatalf("never %d live servers after t0", enough)
		}
		after := ArrivedIn(from, r.End())
		h := r.Count(And(after, Tier(high)))
		lowLate := r.Count(And(ArrivedIn(t0+1500*time.Millisecond, r.End()), Tier(low)))
		aborted := r.Count(func(q *Request) bool { return q.Outcome == Aborted }).Arrived
		t.Logf("S5 seed %d: %d connects in [t0, t0+1s], all %d; max in flight %d; full at t0+%s; ≥%d live at t0+%s; high after that %s (%d of %d) %v; low after t0+1.5s %s; aborted %d",
			seed, inFirstSecond, len(starts), p.MaxConnecting, ms(full-t0), enough, ms(from-t0), pct(h.Success()), h.Granted, h.Arrived, h.ByReason, pct(lowLate.Success()), aborted)
		if h.Success() != 1 {
			t.Errorf("high success %s (%d shed %v) for arrivals once %d servers are live (t0+%s), want 100%%",
				pct(h.Success()), h.Shed, h.ByReason, enough, ms(from-t0))
		}
	})
}

// S6: sustained 150 %, one tier, with exit hysteresis: the tier enters LIFO
// once and stays there (≤ 2 switches during the episode), admitted waits
// stay ≤ short + 1 ms after the first long interval, and throughput stays
// at capacity.
//
// Three gates: "hysteresis" is the table's (model timeouts, fixed 5/100
// ms); "library" (NoHysteresis) is run for the record only: it flaps;
// "hysteresis+p50" is the production default, where the timeouts follow
// the hold-time median (§1.2), so "short" is max(5 ms, 2 × the median of
// exponential 10 ms transactions) = 13.86 ms.
func TestS6Sustained150(t *testing.T) {
	t.Parallel()
	variants := []struct {
		name    string
		noHyst  bool
		holdP50 time.Duration
	}{
		{"hysteresis", false, -1},
		{"library", true, -1},
		{"hysteresis+p50", false, 0},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			eachSeed(t, func(t *testing.T, seed uint64) {
				noHyst := v.noHyst
				gc := modelGate(1)
				gc.NoHysteresis = noHyst
				gc.HoldP50 = v.holdP50
				src := []Source{SourceForLoad("all", admission.Class{}, 1.5, capC, svc)}
				var lifoAt time.Duration = -1
				var switchesAtEnd int64 = -1
				cfg := Config{Seed: seed, Sources: src, Capacity: capC,
					Warmup: 2 * time.Second, Measure: 8 * time.Second, Tail: time.Second}
				end := cfg.Warmup + cfg.Measure
				// With the hold-time estimate on, the probe also samples the
				// short timeout in force every 2 simulated ms of the episode.
				shortLo, shortHi := gc.Short, gc.Short
				if gc.HoldP50 == 0 {
					shortLo, shortHi = time.Duration(math.MaxInt64), 0
				}
				var nextSample time.Duration
				probe := func(r *run) func(time.Duration) {
					return func(now time.Duration) {
						if lifoAt < 0 && r.gate.Snapshot().Tiers[0].LIFO {
							lifoAt = now
						}
						if switchesAtEnd < 0 && now >= end {
							switchesAtEnd = int64(r.gate.Snapshot().Tiers[0].ModeSwitches)
						}
						if gc.HoldP50 == 0 && now >= 2*gc.Long && now < end && now >= nextSample {
							nextSample = now + 2*time.Millisecond
							sh := r.gate.Snapshot().Short
							shortLo, shortHi = min(shortLo, sh), max(shortHi, sh)
						}
					}
				}
				r := simulate(t, gc, cfg, probe)
				late := r.Waits(ArrivedIn(gc.Long, end))
				w := r.Waits(r.InWindow())
				c := r.Count(r.InWindow())
				t.Logf("S6 seed %d %s: mode switches %d by the end of the episode; LIFO at %v; waits after long: p50 %s p99 %s max %s; shed %s; utilisation %.4f; short in force %s..%s",
					seed, v.name, switchesAtEnd, lifoAt, ms(Percentile(w, 0.5)), ms(Percentile(late, 0.99)), ms(Max(late)), pct(c.ShedRatio()), r.Utilisation(), ms(shortLo), ms(shortHi))
				if noHyst {
					return // recorded only; the table asserts the hysteresis detector
				}
				if switchesAtEnd > 2 {
					t.Errorf("%d mode switches during the episode, want ≤ 2", switchesAtEnd)
				}
				if u := r.Utilisation(); u < 0.99 {
					t.Errorf("throughput %.4f of C, want ≥ 0.99", u)
				}
				wantShort := gc.Short
				if gc.HoldP50 == 0 {
					// short' = max(Short, 2 × p50), and the median of
					// exponential transactions is mean × ln 2. The gate's
					// streaming estimate moves around it: bound the swing,
					// then hold the admitted wait to the short timeout that
					// was in force (what the gate promises), not the ideal.
					median := math.Ln2 * float64(svc)
					ideal := max(gc.Short, time.Duration(2*median))
					if float64(shortLo) < 0.6*float64(ideal) || float64(shortHi) > 1.5*float64(ideal) {
						t.Errorf("short timeout in force ranged %s..%s, want within 0.6–1.5 × %s (2 × the true median)", ms(shortLo), ms(shortHi), ms(ideal))
					}
					wantShort = shortHi
				}
				if m := Max(late); m > wantShort+time.Millisecond {
					t.Errorf("max admitted wait after the first long interval %s, want ≤ short + 1ms = %s", ms(m), ms(wantShort+time.Millisecond))
				}
			})
		})
	}
}
