package admission_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/admission/fakeclock"
)

var t0 = time.Unix(1_000_000, 0)

const ms = time.Millisecond

// outcome records what a Submit's done callback received.
type outcome struct {
	calls int
	tk    admission.Ticket
	err   error
	at    time.Duration // fake time of the call, since t0
}

func (o *outcome) granted() bool { return o.calls == 1 && o.err == nil }

func (o *outcome) shed() *admission.ShedError {
	var se *admission.ShedError
	if o.calls == 1 && errors.As(o.err, &se) {
		return se
	}
	return nil
}

type fixture struct {
	t   *testing.T
	clk *fakeclock.Clock
	g   *admission.Gate
}

// newFixture builds a gate on a fake clock. Unless cfg says otherwise the
// timeouts are exactly Short and Long (no hold-time floors), so that the
// expectations below do not depend on how long tests hold tickets.
func newFixture(t *testing.T, cfg admission.Config, capacity int) *fixture {
	t.Helper()
	clk := fakeclock.New(t0)
	cfg.Clock = clk
	if cfg.HoldP50 == 0 {
		cfg.HoldP50 = -1
	}
	return &fixture{t: t, clk: clk, g: admission.NewGate(cfg, capacity)}
}

func (f *fixture) submit(c admission.Class) (*admission.Request, *outcome) {
	o := &outcome{}
	r := f.g.Submit(c, func(tk admission.Ticket, err error) {
		o.calls++
		o.tk, o.err = tk, err
		o.at = f.clk.Now().Sub(t0)
	})
	return r, o
}

// hold takes n tickets at priority p on the fast path.
func (f *fixture) hold(n int, c admission.Class) []admission.Ticket {
	f.t.Helper()
	var tks []admission.Ticket
	for i := 0; i < n; i++ {
		tk, err := f.g.Acquire(context.Background(), c)
		if err != nil {
			f.t.Fatalf("hold %d: %v", i, err)
		}
		tks = append(tks, tk)
	}
	return tks
}

func (f *fixture) advanceTo(d time.Duration) { f.clk.Set(t0.Add(d)) }

func (f *fixture) check() {
	f.t.Helper()
	if err := f.g.CheckInvariants(0); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) tier(p int) admission.TierSnapshot { return f.g.Snapshot().Tiers[p] }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// ---- tier order (debt: demand_test.go) ----

func TestStrictTierOrder(t *testing.T) {
	f := newFixture(t, admission.Config{NoDebt: true}, 1)
	held := f.hold(1, admission.Class{Priority: 0})
	_, o3 := f.submit(admission.Class{Priority: 3})
	f.advanceTo(10 * ms)
	_, o2 := f.submit(admission.Class{Priority: 2})
	f.g.SetCapacity(2) // one slot: the tier-2 waiter, though tier 3 waited longer
	if !o2.granted() || o3.calls != 0 {
		t.Fatalf("tier 2 %+v tier 3 %+v", o2, o3)
	}
	// A newcomer at tier 3 cannot pass the queued tier-3 waiter, and a
	// tier-3 arrival waits behind a tier-2 waiter even if free.
	_, o2b := f.submit(admission.Class{Priority: 2})
	f.g.Release(held[0])
	if !o2b.granted() || o3.calls != 0 {
		t.Fatal("tier 2 before tier 3 on release")
	}
	f.g.Release(o2.tk)
	if !o3.granted() {
		t.Fatal("tier 3 last")
	}
	f.check()
}

// ---- CoDel ----

func TestFIFOShedAtLong(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 1}, 1)
	f.hold(1, admission.Class{})
	_, o := f.submit(admission.Class{})
	f.advanceTo(100*ms - 1)
	if o.calls != 0 {
		t.Fatal("shed early")
	}
	f.advanceTo(100 * ms)
	se := o.shed()
	if se == nil || se.Reason != admission.ReasonFIFOTimeout || se.Waited != 100*ms || o.at != 100*ms {
		t.Fatalf("want FIFO shed at exactly 100ms, got %+v %v", o, o.err)
	}
	if se.RetryAfter != 100*ms {
		t.Fatalf("RetryAfter %v, want the long timeout", se.RetryAfter)
	}
	if s := f.tier(0); s.LIFO || s.Shed != 1 {
		t.Fatalf("tier %+v", s)
	}
	f.check()
}

// The standing-queue scenario of §4.1: arrivals every 10 ms from t = 0
// keep the queue non-empty; at 100 ms the first waiter meets the FIFO
// timeout; at 100 ms + ε the tier turns LIFO, every waiter older than 5 ms
// is shed, the single timer is re-armed earlier, and newer waiters are
// served first. Then hysteresis holds LIFO for 100 ms after the last shed.
func TestCoDelAdaptiveLIFOAndTimer(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 1}, 1)
	held := f.hold(1, admission.Class{})
	var os []*outcome
	for at := time.Duration(0); at <= 90*ms; at += 10 * ms {
		f.advanceTo(at)
		_, o := f.submit(admission.Class{})
		os = append(os, o)
		if f.clk.Pending() != 1 {
			t.Fatalf("%d timers pending", f.clk.Pending())
		}
	}
	f.advanceTo(100 * ms)
	if se := os[0].shed(); se == nil || se.Reason != admission.ReasonFIFOTimeout {
		t.Fatalf("t=0 waiter at 100 ms: %+v", os[0])
	}
	_, o100 := f.submit(admission.Class{})
	os = append(os, o100)
	if f.tier(0).LIFO {
		t.Fatal("LIFO at exactly long: the rule is non-empty for more than long")
	}
	if d, _ := f.clk.NextDeadline(); d.Sub(t0) != 100*ms+1 {
		t.Fatalf("timer at %v, want the LIFO switch at 100ms+1ns", d.Sub(t0))
	}
	calls := f.clk.AfterFuncCalls()

	f.advanceTo(100*ms + 1)
	s := f.tier(0)
	if !s.LIFO || s.ModeSwitches != 1 {
		t.Fatalf("not LIFO at 100ms+ε: %+v", s)
	}
	for i := 1; i <= 9; i++ {
		if se := os[i].shed(); se == nil || se.Reason != admission.ReasonLIFOTimeout {
			t.Fatalf("waiter from %d0 ms not shed (LIFO): %+v", i, os[i])
		}
	}
	if o100.calls != 0 {
		t.Fatal("the 100 ms waiter is younger than short")
	}
	if got := f.clk.AfterFuncCalls() - calls; got != 1 || f.clk.Pending() != 1 {
		t.Fatalf("re-arm: %d AfterFunc calls, %d pending", got, f.clk.Pending())
	}
	if d, _ := f.clk.NextDeadline(); d.Sub(t0) != 105*ms {
		t.Fatalf("timer at %v, want 105 ms (earlier than the FIFO deadline 110 ms)", d.Sub(t0))
	}

	// LIFO order: 101 ms before 100.5 ms (and before the 100 ms one).
	f.advanceTo(100*ms + 500*time.Microsecond)
	_, oA := f.submit(admission.Class{})
	f.advanceTo(101 * ms)
	_, oB := f.submit(admission.Class{})
	f.g.Release(held[0])
	if !oB.granted() || oA.calls != 0 || o100.calls != 0 {
		t.Fatalf("LIFO: newest first; 101 %+v 100.5 %+v", oB, oA)
	}
	f.g.Release(oB.tk)
	if !oA.granted() || o100.calls != 0 {
		t.Fatal("LIFO: then 100.5 ms")
	}
	f.advanceTo(105 * ms)
	if se := o100.shed(); se == nil || se.Reason != admission.ReasonLIFOTimeout || se.Waited != 5*ms {
		t.Fatalf("100 ms waiter: %+v", o100)
	}
	lastShed := 105 * ms
	f.g.Release(oA.tk)
	if f.g.Waiting() != 0 || !f.tier(0).LIFO {
		t.Fatal("the queue is empty but LIFO must hold (hysteresis)")
	}
	f.advanceTo(lastShed + 100*ms - 1)
	if !f.tier(0).LIFO {
		t.Fatal("left LIFO before a full long interval without shed")
	}
	f.advanceTo(lastShed + 100*ms)
	if s := f.tier(0); s.LIFO || s.ModeSwitches != 2 {
		t.Fatalf("still LIFO after long without shed: %+v", s)
	}
	f.check()
}

// Hysteresis: a push while the queue is briefly empty does not reset
// LIFO if a shed happened within long; without hysteresis it does.
func TestHysteresisVersusLibraryDetector(t *testing.T) {
	for _, noHyst := range []bool{false, true} {
		f := newFixture(t, admission.Config{Tiers: 1, NoHysteresis: noHyst}, 1)
		held := f.hold(1, admission.Class{})
		for at := time.Duration(0); at <= 100*ms; at += 4 * ms {
			f.advanceTo(at)
			f.submit(admission.Class{})
		}
		f.advanceTo(100*ms + 1)
		if !f.tier(0).LIFO {
			t.Fatal("LIFO expected")
		}
		f.advanceTo(110 * ms) // everything shed by the short timeout
		if f.g.Waiting() != 0 {
			t.Fatalf("waiting %d", f.g.Waiting())
		}
		if got := f.tier(0).LIFO; got == noHyst {
			t.Fatalf("noHysteresis=%v: LIFO=%v after the queue emptied", noHyst, got)
		}
		f.g.Release(held[0])
	}
}

func TestEffectiveTimeoutsFollowHoldTime(t *testing.T) {
	clk := fakeclock.New(t0)
	f := &fixture{t: t, clk: clk, g: admission.NewGate(admission.Config{Tiers: 1, MaxWait: 150 * ms, Clock: clk}, 4)}
	for i := 0; i < 50; i++ {
		tk := f.hold(1, admission.Class{})[0]
		f.clk.Advance(20 * ms)
		f.g.Release(tk)
	}
	s := f.g.Snapshot()
	if s.HoldP50 != 20*ms || s.Short != 40*ms || s.Long != 150*ms {
		t.Fatalf("p50 %v short %v long %v, want 20ms 40ms 150ms (200ms capped by MaxWait)", s.HoldP50, s.Short, s.Long)
	}
	// The median ignores a few very long transactions.
	for i := 0; i < 5; i++ {
		tk := f.hold(1, admission.Class{})[0]
		f.clk.Advance(10 * time.Second)
		f.g.Release(tk)
	}
	if p := f.g.Snapshot().HoldP50; p > 30*ms {
		t.Fatalf("p50 %v after 5 outliers", p)
	}
}

// ---- timer ----

func TestOneTimerPerGate(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 4, NoDebt: true}, 1)
	f.hold(1, admission.Class{})
	for i := 0; i < 200; i++ {
		f.clk.Advance(100 * time.Microsecond)
		f.submit(admission.Class{Priority: i % 4})
		if f.clk.Pending() != 1 {
			t.Fatalf("%d timers pending after %d waiters", f.clk.Pending(), i+1)
		}
	}
	if c := f.clk.AfterFuncCalls(); c > 4 {
		t.Fatalf("%d AfterFunc calls for 200 waiters", c)
	}
	f.check()
}

// ---- cancellation ----

func TestCancelledContextDoesNotQueue(t *testing.T) {
	f := newFixture(t, admission.Config{}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.g.Acquire(ctx, admission.Class{Priority: 0}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if f.g.Waiting() != 0 || f.g.Demands()[0] != 0 {
		t.Fatal("a cancelled context queued or counted as demand")
	}
}

func TestCancelHeadLetsNextThrough(t *testing.T) {
	f := newFixture(t, admission.Config{NoDebt: true}, 1)
	held := f.hold(1, admission.Class{})
	r0, o0 := f.submit(admission.Class{Priority: 0})
	_, o1 := f.submit(admission.Class{Priority: 1})
	if !f.g.Cancel(r0) || f.g.Cancel(r0) {
		t.Fatal("Cancel must succeed once")
	}
	f.check()
	f.g.Release(held[0])
	if o0.calls != 0 || !o1.granted() {
		t.Fatalf("cancelled head %+v next %+v", o0, o1)
	}
	// Cancel after the decision reports false; the caller releases.
	r2, o2 := f.submit(admission.Class{Priority: 1})
	f.g.Release(o1.tk)
	if f.g.Cancel(r2) || !o2.granted() {
		t.Fatal("Cancel of a granted request must be false")
	}
	f.g.Release(o2.tk)
	if f.g.InUse() != 0 {
		t.Fatalf("inUse %d", f.g.InUse())
	}
	f.check()
}

// A cancelled waiter no longer makes its tier "non-empty": the LIFO clock
// starts again with the next waiter.
func TestCancelledWaiterDoesNotFeedCoDel(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 1}, 1)
	f.hold(1, admission.Class{})
	r, _ := f.submit(admission.Class{})
	f.advanceTo(50 * ms)
	f.g.Cancel(r)
	f.advanceTo(60 * ms)
	_, o := f.submit(admission.Class{})
	f.advanceTo(101 * ms)
	if f.tier(0).LIFO || o.calls != 0 {
		t.Fatal("a cancelled waiter kept the tier non-empty")
	}
	f.advanceTo(160 * ms)
	if se := o.shed(); se == nil || se.Reason != admission.ReasonFIFOTimeout {
		t.Fatalf("want FIFO shed at 160ms: %+v", o)
	}
}

// Acquire racing a grant against its own cancellation never leaks a
// ticket (golang/go#63615's question).
func TestAcquireCancelRacingGrant(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 1}, 1)
	for i := 0; i < 300; i++ {
		held := f.hold(1, admission.Class{})[0]
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		var got admission.Ticket
		go func() {
			tk, err := f.g.Acquire(ctx, admission.Class{})
			got = tk
			res <- err
		}()
		for f.g.Waiting() == 0 {
			time.Sleep(10 * time.Microsecond)
		}
		go cancel()
		f.g.Release(held)
		if err := <-res; err == nil {
			f.g.Release(got)
		} else if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if f.g.InUse() != 0 || f.g.Waiting() != 0 {
			t.Fatalf("iteration %d: inUse %d waiting %d", i, f.g.InUse(), f.g.Waiting())
		}
		f.check()
	}
}

func TestAcquireShedAndGrant(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 1}, 1)
	held := f.hold(1, admission.Class{})[0]
	errc := make(chan error, 1)
	go func() {
		_, err := f.g.Acquire(context.Background(), admission.Class{})
		errc <- err
	}()
	for f.g.Waiting() == 0 {
		time.Sleep(10 * time.Microsecond)
	}
	f.clk.Advance(100 * ms)
	var se *admission.ShedError
	if err := <-errc; !errors.As(err, &se) || se.Reason != admission.ReasonFIFOTimeout {
		t.Fatalf("err %v", err)
	}
	tkc := make(chan admission.Ticket, 1)
	go func() {
		tk, _ := f.g.Acquire(context.Background(), admission.Class{})
		tkc <- tk
	}()
	for f.g.Waiting() == 0 {
		time.Sleep(10 * time.Microsecond)
	}
	f.g.Release(held)
	if tk := <-tkc; !tk.Valid() {
		t.Fatal("not granted")
	}
}

// ---- capacity ----

func TestSetCapacityWakesExactlyWhatFits(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 1}, 0)
	var os []*outcome
	for i := 0; i < 10; i++ {
		_, o := f.submit(admission.Class{})
		os = append(os, o)
	}
	f.g.SetCapacity(3)
	n := 0
	for _, o := range os {
		n += o.calls
	}
	if n != 3 || f.g.InUse() != 3 || f.g.Waiting() != 7 {
		t.Fatalf("woke %d, inUse %d waiting %d", n, f.g.InUse(), f.g.Waiting())
	}
	for i := 0; i < 3; i++ {
		if !os[i].granted() {
			t.Fatalf("FIFO order: waiter %d", i)
		}
	}
	// Lowering capacity keeps tickets; nothing is granted until below it.
	f.g.SetCapacity(1)
	f.g.Release(os[0].tk)
	if f.g.InUse() != 2 || f.g.Waiting() != 7 {
		t.Fatal("granted above a lowered capacity")
	}
	f.g.Release(os[1].tk)
	f.g.Release(os[2].tk)
	if !os[3].granted() || f.g.InUse() != 1 {
		t.Fatal("not granted once below capacity")
	}
	f.check()
}

// ---- fairness ----

func catTree(t *testing.T, nodes ...admission.NodeSpec) *admission.Tree {
	t.Helper()
	tr, err := admission.NewTree(admission.TreeSpec{Levels: []string{"cat"}, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func leafOf(t *testing.T, tr *admission.Tree, values ...string) admission.LeafID {
	return tr.Leaf(values)
}

func TestFairWeights321(t *testing.T) {
	tr := catTree(t,
		admission.NodeSpec{Path: []string{"a"}, Weight: 3},
		admission.NodeSpec{Path: []string{"b"}, Weight: 2},
		admission.NodeSpec{Path: []string{"c"}, Weight: 1})
	f := newFixture(t, admission.Config{Tiers: 1, Tree: tr, PoolSize: 16}, 0)
	if !f.g.Fair() {
		t.Fatal("fairness should be on")
	}
	count := map[string]int{}
	for i := 0; i < 10; i++ {
		for _, v := range []string{"a", "b", "c"} {
			v := v
			f.g.Submit(admission.Class{Leaf: tr.Leaf([]string{v})}, func(tk admission.Ticket, err error) {
				if err == nil {
					count[v]++
				}
			})
		}
	}
	f.g.SetCapacity(6)
	if count["a"] != 3 || count["b"] != 2 || count["c"] != 1 {
		t.Fatalf("got %v, want a3 b2 c1", count)
	}
	f.check()
}

func TestFairTieBreakRotates(t *testing.T) {
	tr := catTree(t, admission.NodeSpec{Path: []string{"a"}}, admission.NodeSpec{Path: []string{"b"}})
	f := newFixture(t, admission.Config{Tiers: 1, Tree: tr, PoolSize: 16}, 1)
	held := f.hold(1, admission.Class{Leaf: tr.Leaf([]string{"zzz"})})[0]
	var order []string
	var last admission.Ticket
	for i := 0; i < 4; i++ {
		for _, v := range []string{"a", "b"} {
			v := v
			f.g.Submit(admission.Class{Leaf: tr.Leaf([]string{v})}, func(tk admission.Ticket, err error) {
				if err == nil {
					order = append(order, v)
					last = tk
				}
			})
		}
	}
	f.g.Release(held)
	for i := 0; i < 7; i++ {
		f.g.Release(last)
	}
	want := "abababab"
	got := ""
	for _, s := range order {
		got += s
	}
	if got != want && got != "babababa" {
		t.Fatalf("grant order %s, want alternation", got)
	}
}

func TestCeilingIsHardCap(t *testing.T) {
	tr := catTree(t, admission.NodeSpec{Path: []string{"flood"}, Ceiling: 0.3}, admission.NodeSpec{Path: []string{"b"}})
	f := newFixture(t, admission.Config{Tiers: 1, Tree: tr, PoolSize: 12}, 10)
	flood := tr.Leaf([]string{"flood"})
	var granted []admission.Ticket
	for i := 0; i < 20; i++ {
		f.g.Submit(admission.Class{Leaf: flood}, func(tk admission.Ticket, err error) {
			if err == nil {
				granted = append(granted, tk)
			}
		})
	}
	if len(granted) != 3 || f.g.InUse() != 3 || f.g.Waiting() != 17 {
		t.Fatalf("ceiling 0.3 of 10: granted %d waiting %d", len(granted), f.g.Waiting())
	}
	// Idle capacity goes to others, at once, although flood waiters are
	// queued at the same tier.
	r, o := f.submit(admission.Class{Leaf: tr.Leaf([]string{"b"})})
	if !o.granted() {
		t.Fatalf("b must pass the ceiling-blocked flood (r=%v)", r)
	}
	for _, n := range f.g.Snapshot().Nodes {
		if n.Path == "cat=flood" && (n.Limit != 3 || n.InUse != 3 || n.Waiting != 17 || n.Alloc != 3) {
			t.Fatalf("flood node %+v", n)
		}
	}
	// Releases of flood tickets go back to flood, one for one.
	f.g.Release(granted[0])
	if len(granted) != 4 || f.g.InUse() != 4 {
		t.Fatalf("granted %d inUse %d", len(granted), f.g.InUse())
	}
	f.check()
}

func TestFairnessOffForSmallPools(t *testing.T) {
	tr := catTree(t, admission.NodeSpec{Path: []string{"a"}}, admission.NodeSpec{Path: []string{"b"}})
	// Two declared leaves (a, b) plus the implicit "other": only the
	// declared ones count, so 8 slots keep fairness on and 7 switch it off.
	if on := admission.NewGate(admission.Config{Tiers: 1, Tree: tr, PoolSize: 8}, 8); !on.Fair() {
		t.Fatal("fairness must be on when PoolSize ≥ 4 × declared leaves (8 ≥ 4 × 2)")
	}
	f := newFixture(t, admission.Config{Tiers: 1, Tree: tr}, 7) // 7 < 4 × 2 declared leaves
	if f.g.Fair() {
		t.Fatal("fairness must be off when PoolSize < 4 × declared leaves")
	}
	g2 := admission.NewGate(admission.Config{Tree: tr, PoolSize: 100, NoFairness: true}, 100)
	if g2.Fair() {
		t.Fatal("NoFairness")
	}
	// Off means one FIFO per tier: arrival order across categories.
	held := f.hold(7, admission.Class{Leaf: tr.Leaf([]string{"a"})})
	_, ob := f.submit(admission.Class{Leaf: tr.Leaf([]string{"b"})})
	_, oa := f.submit(admission.Class{Leaf: tr.Leaf([]string{"a"})})
	f.g.Release(held[0])
	if !ob.granted() || oa.calls != 0 {
		t.Fatal("FIFO across categories")
	}
	f.check()
}

func TestUnknownValuesAndClassClamping(t *testing.T) {
	tr := catTree(t, admission.NodeSpec{Path: []string{"a"}})
	f := newFixture(t, admission.Config{Tree: tr, PoolSize: 100}, 10)
	other := leafOf(t, tr, "nope")
	if tr.LeafPath(other) != "cat=other" {
		t.Fatalf("unknown value → %s", tr.LeafPath(other))
	}
	tk := f.hold(1, admission.Class{Priority: 9, Leaf: 77})[0]
	if tk.Class().Priority != 3 || tk.Class().Leaf != other {
		t.Fatalf("clamped class %+v", tk.Class())
	}
	tk2 := f.hold(1, admission.Class{Priority: -1, Leaf: other})[0]
	if tk2.Class().Priority != 0 {
		t.Fatal("negative priority")
	}
	for _, n := range f.g.Snapshot().Nodes {
		if n.Path == "cat=other" && n.InUse != 2 {
			t.Fatalf("other node %+v", n)
		}
	}
	f.g.Release(tk)
	f.g.Release(tk2)
	f.g.Release(admission.Ticket{}) // no-op
	f.check()
}

// Two-level tree, all backlogged (T1): the dispatcher converges to the
// water-fill within ±1 slot, and the rotating tie-break splits 7.5/7.5 as
// 8/7 or 7/8 alternately rather than always 8/7.
func TestFairDispatchMatchesWaterFill(t *testing.T) {
	tr, err := admission.NewTree(admission.TreeSpec{Levels: []string{"auth", "endpoint"}, Nodes: []admission.NodeSpec{
		{Path: []string{"auth"}, Weight: 3},
		{Path: []string{"auth", "comments"}},
		{Path: []string{"auth", "search"}},
		{Path: []string{"unauth", "search"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, admission.Config{Tiers: 1, Tree: tr, PoolSize: 100}, 20)
	leaves := []admission.LeafID{tr.Leaf([]string{"auth", "comments"}), tr.Leaf([]string{"auth", "search"}), tr.Leaf([]string{"unauth", "search"})}
	// Occupy everything from the fast path unfairly, then keep every leaf
	// backlogged and release the oldest ticket each step.
	var live []admission.Ticket
	for i := 0; i < 20; i++ {
		live = append(live, f.hold(1, admission.Class{Leaf: leaves[0]})[0])
	}
	onDone := func(tk admission.Ticket, err error) {
		if err == nil {
			live = append(live, tk)
		}
	}
	for _, l := range leaves {
		for i := 0; i < 200; i++ {
			f.g.Submit(admission.Class{Leaf: l}, onDone)
		}
	}
	want := admission.WaterFill(tr, 20, map[admission.LeafID]float64{leaves[0]: 1000, leaves[1]: 1000, leaves[2]: 1000})
	for step := 0; step < 150; step++ {
		tk := live[0]
		live = live[1:]
		f.g.Release(tk)
		if step < 40 {
			continue
		}
		for _, n := range f.g.Snapshot().Nodes {
			if math.Abs(float64(n.InUse)-want[n.Path]) > 1 {
				t.Fatalf("step %d node %s inUse %d, water-fill %.2f", step, n.Path, n.InUse, want[n.Path])
			}
		}
	}
	f.check()
}

// ---- allocation ----

func TestUncontendedAcquireReleaseDoesNotAllocate(t *testing.T) {
	for _, clk := range []admission.Clock{nil, fakeclock.New(t0)} {
		g := admission.NewGate(admission.Config{Clock: clk}, 4)
		ctx := context.Background()
		c := admission.Class{Priority: 2}
		n := testing.AllocsPerRun(1000, func() {
			tk, err := g.Acquire(ctx, c)
			if err != nil {
				panic(err)
			}
			g.Release(tk)
		})
		if n != 0 {
			t.Fatalf("uncontended Acquire+Release allocates %v times", n)
		}
		done := func(tk admission.Ticket, err error) { g.Release(tk) }
		n = testing.AllocsPerRun(1000, func() { g.Submit(c, done) })
		if n != 0 {
			t.Fatalf("uncontended Submit allocates %v times", n)
		}
	}
}

// ---- concurrency smoke with the real clock ----

func TestRealClockConcurrent(t *testing.T) {
	g := admission.NewGate(admission.Config{Short: time.Second, Long: 5 * time.Second}, 3)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				tk, err := g.Acquire(context.Background(), admission.Class{Priority: i % 2})
				if err != nil {
					continue
				}
				g.Release(tk)
			}
		}(i)
	}
	wg.Wait()
	if g.InUse() != 0 || g.Waiting() != 0 {
		t.Fatalf("inUse %d waiting %d", g.InUse(), g.Waiting())
	}
	if err := g.CheckInvariants(0); err != nil {
		t.Fatal(err)
	}
}

// With the system clock the single timer sheds a waiter nobody serves.
func TestRealClockTimerSheds(t *testing.T) {
	g := admission.NewGate(admission.Config{Tiers: 1, Short: ms, Long: 5 * ms, HoldP50: -1}, 1)
	tk, err := g.Acquire(context.Background(), admission.Class{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Acquire(context.Background(), admission.Class{})
	var se *admission.ShedError
	if !errors.As(err, &se) || se.Reason != admission.ReasonFIFOTimeout || se.Waited < 5*ms {
		t.Fatalf("err %v", err)
	}
	g.Release(tk)
	if g.InUse() != 0 || g.Waiting() != 0 {
		t.Fatal("not balanced")
	}
}
