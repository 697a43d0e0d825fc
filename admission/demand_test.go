package admission_test

import (
	"math"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
)

// Debt follows the higher tiers' demand (doc.go, "Debt"). These tests set
// the demand estimates directly or let tickets build them, on a fake
// clock; with instant holds a tier's time constant is Short (5 ms).

func TestDemandIsTimeAverageOfTicketsAndWaiters(t *testing.T) {
	// DebtDecay = Short pins the time constant (holds would move it).
	f := newFixture(t, admission.Config{Tiers: 2, DebtDecay: 5 * ms}, 4)
	tau := f.g.DemandTau(0)
	if tau != 5*ms {
		t.Fatalf("time constant %v, want 5ms", tau)
	}
	held := f.hold(3, admission.Class{})
	f.advanceTo(tau)
	want := 3 * (1 - math.Exp(-1))
	if d := f.g.Demands()[0]; !near(d, want) {
		t.Fatalf("3 tickets for one time constant: demand %v, want %v", d, want)
	}
	// One more ticket and one waiter (capacity 4, all held): the count is 5.
	held = append(held, f.hold(1, admission.Class{})...)
	_, o := f.submit(admission.Class{})
	f.advanceTo(2 * tau)
	want = 5 + (want-5)*math.Exp(-1)
	if d := f.g.Demands()[0]; !near(d, want) {
		t.Fatalf("4 tickets + 1 waiter: demand %v, want %v", d, want)
	}
	for _, tk := range held {
		f.g.Release(tk)
	}
	f.g.Release(o.tk)
	f.advanceTo(3 * tau)
	want *= math.Exp(-1)
	if d := f.g.Demands()[0]; !near(d, want) {
		t.Fatalf("idle for one time constant: demand %v, want %v", d, want)
	}
	f.check()
}

// The time constant is 64 median hold times of the tier, within [Short,
// DebtDecay].
func TestDemandTimeConstantFollowsHoldTime(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2, DebtDecay: time.Second}, 4)
	for i := 0; i < 3; i++ {
		tk := f.hold(1, admission.Class{})
		f.clk.Advance(ms)
		f.g.Release(tk[0])
	}
	if tau := f.g.DemandTau(0); tau != 64*ms {
		t.Fatalf("tier 0 with 1 ms holds: time constant %v, want 64ms", tau)
	}
	for i := 0; i < 3; i++ {
		tk := f.hold(1, admission.Class{Priority: 1})
		f.clk.Advance(100 * ms)
		f.g.Release(tk[0])
	}
	if tau := f.g.DemandTau(1); tau != time.Second {
		t.Fatalf("tier 1 with 100 ms holds: time constant %v, want DebtDecay = 1s", tau)
	}
	if tau := f.g.DemandTau(0); tau != 64*ms {
		t.Fatalf("tier 0's time constant moved with tier 1's holds: %v", tau)
	}
}

// The claim is the demand rounded to the nearest slot, at least one above
// 0.05, at most the capacity; debt is the claim less what the tiers above
// hold; Allowed is capacity − max(claim, held).
func TestDebtIsClaimLessHeld(t *testing.T) {
	for _, c := range []struct {
		demand   float64
		held     int
		debt     float64
		allowed  int
		capacity int
	}{
		{0, 0, 0, 4, 4},
		{0.05, 0, 0, 4, 4},
		{0.06, 0, 1, 3, 4},
		{1.2, 0, 1, 3, 4},
		{1.49, 0, 1, 3, 4},
		{1.5, 0, 2, 2, 4},
		{1.5, 1, 1, 2, 4},
		{1.5, 2, 0, 2, 4},
		{1.5, 3, 0, 1, 4},
		{9, 0, 4, 0, 4}, // never more than the capacity
	} {
		f := newFixture(t, admission.Config{Tiers: 3}, c.capacity)
		f.hold(c.held, admission.Class{})
		f.g.SetDemand(0, c.demand)
		s := f.g.Snapshot()
		if s.Tiers[0].Debt != 0 || s.Tiers[0].Allowed != c.capacity {
			t.Errorf("demand %v: top tier debt %v allowed %d, want 0 and the capacity", c.demand, s.Tiers[0].Debt, s.Tiers[0].Allowed)
		}
		for p := 1; p <= 2; p++ {
			if s.Tiers[p].Debt != c.debt || s.Tiers[p].Allowed != c.allowed {
				t.Errorf("demand %v, %d held above: tier %d debt %v allowed %d, want %v and %d",
					c.demand, c.held, p, s.Tiers[p].Debt, s.Tiers[p].Allowed, c.debt, c.allowed)
			}
		}
		f.check()
	}
}

// The predicate: a lower tier is admitted while its tickets and those of
// the tiers below stay under Allowed. Work-conserving: every slot the
// higher tiers' demand does not claim is used.
func TestLowerTierUsesWhatDemandDoesNotClaim(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2, Long: time.Minute}, 4)
	f.g.SetDemand(0, 1.2) // claims 1 slot
	low := f.hold(3, admission.Class{Priority: 1})
	_, o := f.submit(admission.Class{Priority: 1})
	if o.calls != 0 {
		t.Fatal("the fourth low ticket took the slot high's demand claims")
	}
	f.check()
	// High takes its slot at once, without waiting.
	hi := f.hold(1, admission.Class{})
	// High holds its claim: a released low slot goes back to low.
	f.g.Release(low[0])
	if !o.granted() {
		t.Fatal("a slot high does not claim stayed idle while low waited")
	}
	// A second high request (a burst beyond the claim) waits, and gets the
	// next released slot before the waiting low tier.
	_, oh := f.submit(admission.Class{})
	_, ol := f.submit(admission.Class{Priority: 1})
	f.g.Release(low[1])
	if !oh.granted() || ol.calls != 0 {
		t.Fatalf("burst: high %+v low %+v; want high first", oh, ol)
	}
	f.check()
	_ = hi
}

// Debt is forgiven as the demand behind it fades: a waiter held back only
// by debt is admitted the moment the estimate crosses the rounding
// boundary, with no other event.
func TestDebtFadesWithDemandAndWakesWaiter(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2, Long: time.Minute}, 4)
	f.g.SetDemand(0, 2.4) // claims 2; tier 0 holds nothing, so the estimate decays
	f.hold(2, admission.Class{Priority: 1})
	_, o := f.submit(admission.Class{Priority: 1})
	if o.calls != 0 {
		t.Fatal("admitted into high's claim")
	}
	tau := f.g.DemandTau(0)
	cross := time.Duration(float64(tau) * math.Log(2.4/1.5)) // claim 2 → 1
	f.advanceTo(cross - time.Microsecond)
	if o.calls != 0 {
		t.Fatal("admitted before the claim fell")
	}
	f.advanceTo(cross + time.Microsecond)
	if !o.granted() || o.at < cross || o.at > cross+time.Nanosecond {
		t.Fatalf("admitted at %v, want at the crossing %v", o.at, cross)
	}
	// Down to the floor: the last claimed slot is freed once the estimate
	// is 0.05 (from 2.4 at time 0).
	_, o2 := f.submit(admission.Class{Priority: 1})
	floor := time.Duration(float64(tau) * math.Log(2.4/0.05))
	f.advanceTo(floor - time.Microsecond)
	if o2.calls != 0 {
		t.Fatal("admitted before the demand faded below the floor")
	}
	f.advanceTo(floor + time.Microsecond)
	if !o2.granted() {
		t.Fatal("not admitted once high's demand faded")
	}
	if d := f.g.Debts(); d[1] != 0 {
		t.Fatalf("debt %v after the demand faded", d)
	}
	f.check()
}

// With two tiers above, their estimates decay at different rates; the
// wake-up bound converges on the crossing.
func TestDebtWakeSeveralHigherTiers(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 3, Long: time.Minute}, 8)
	// Tier 0: 1 ms holds (time constant 64 ms); tier 1: instant (5 ms).
	for i := 0; i < 3; i++ {
		tk := f.hold(1, admission.Class{})
		f.clk.Advance(ms)
		f.g.Release(tk[0])
	}
	start := f.clk.Now().Sub(t0)
	f.g.SetDemand(0, 1.0)
	f.g.SetDemand(1, 3.0) // claim 4 of 8
	f.hold(4, admission.Class{Priority: 2})
	_, o := f.submit(admission.Class{Priority: 2})
	if o.calls != 0 {
		t.Fatal("admitted into the claim")
	}
	t0d, t1d := f.g.DemandTau(0), f.g.DemandTau(1)
	sum := func(d time.Duration) float64 {
		return 1.0*math.Exp(-float64(d)/float64(t0d)) + 3.0*math.Exp(-float64(d)/float64(t1d))
	}
	// The claim falls to 3 when the sum drops below 3.5.
	lo, hi := time.Duration(0), time.Second
	for hi-lo > time.Nanosecond {
		mid := (lo + hi) / 2
		if sum(mid) < 3.5 {
			hi = mid
		} else {
			lo = mid
		}
	}
	calls := f.clk.AfterFuncCalls()
	f.advanceTo(start + time.Second)
	if !o.granted() {
		t.Fatal("never admitted")
	}
	if d := o.at - start - hi; d < -time.Microsecond || d > time.Microsecond {
		t.Fatalf("admitted at +%v, want at the crossing +%v", o.at-start, hi)
	}
	if n := f.clk.AfterFuncCalls() - calls; n > 40 {
		t.Fatalf("%d timer arms to find the crossing", n)
	}
	f.check()
}

// Strict tier order stays: a tier that does not fit stops dispatch even
// if a lower tier would fit (its own debt may be smaller).
func TestBlockedTierBlocksLowerTiers(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 3, Long: time.Minute}, 5)
	f.g.SetDemand(0, 2)                             // tier 1 owes 2
	f.hold(3, admission.Class{Priority: 1})         // tier 2 owes max(0, claim(2+D1)−3)
	_, o1 := f.submit(admission.Class{Priority: 1}) // free 2 < 1 + 2
	_, o2 := f.submit(admission.Class{Priority: 2})
	if o1.calls != 0 || o2.calls != 0 {
		t.Fatalf("tier 1 %+v tier 2 %+v; want both waiting", o1, o2)
	}
	f.check()
}

// NoDebt: strict tier order only; nothing is reserved.
func TestNoDebtReservesNothing(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2, NoDebt: true}, 4)
	f.g.SetDemand(0, 3)
	f.hold(4, admission.Class{Priority: 1})
	if s := f.g.Snapshot(); s.Tiers[1].Debt != 0 || s.Tiers[1].Allowed != 4 {
		t.Fatalf("NoDebt: debt %v allowed %d", s.Tiers[1].Debt, s.Tiers[1].Allowed)
	}
}

// The busy accounting integrates tickets in use and capacity over time.
func TestBusyAccounting(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2}, 4)
	a := f.hold(2, admission.Class{Priority: 1})
	f.advanceTo(time.Second)
	b := f.hold(2, admission.Class{})
	f.advanceTo(2 * time.Second)
	f.g.SetCapacity(8)
	f.advanceTo(3 * time.Second)
	for _, tk := range append(a, b...) {
		f.g.Release(tk)
	}
	f.advanceTo(4 * time.Second)
	s := f.g.Snapshot()
	// in use: 2 + 4 + 4 + 0; capacity: 4 + 4 + 8 + 8.
	if !near(s.InUseSeconds, 10) || !near(s.CapacitySeconds, 24) || !near(s.Busy, 10.0/24) {
		t.Fatalf("InUseSeconds %v CapacitySeconds %v Busy %v, want 10, 24, %v", s.InUseSeconds, s.CapacitySeconds, s.Busy, 10.0/24)
	}
	if s.Tiers[0].InUse != 0 || s.Tiers[1].InUse != 0 {
		t.Fatalf("tier tickets %d %d after releasing all", s.Tiers[0].InUse, s.Tiers[1].InUse)
	}
}

// A fast tier (median hold ≤ Short'/8) reserves only the slots that keep
// its waits under Short'/2: beyond them it gives way to a waiting lower
// tier until its oldest waiter has waited Short'/2, then takes the next
// release first, and that late admission raises its reservation.
func TestFastTierGivesWayUntilLate(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2, Long: time.Minute}, 4)
	h := f.hold(1, admission.Class{})
	f.advanceTo(200 * time.Microsecond)
	f.g.Release(h[0])     // tier 0's median hold: 0.2 ms, a fast tier
	f.advanceTo(50 * ms)  // its reservation has decayed from the capacity to 1
	f.g.SetDemand(0, 2.4) // its demand claims 2
	if s := f.tier(0); s.Reserved != 1 || f.tier(1).Allowed != 3 {
		t.Fatalf("reserved %d, low allowed %d; want 1 and 3", s.Reserved, f.tier(1).Allowed)
	}
	low := f.hold(3, admission.Class{Priority: 1})
	f.hold(1, admission.Class{}) // its reserved slot, at once
	_, oh := f.submit(admission.Class{})
	_, ol := f.submit(admission.Class{Priority: 1})
	_, ol2 := f.submit(admission.Class{Priority: 1})
	f.g.Release(low[0])
	if oh.calls != 0 || !ol.granted() {
		t.Fatalf("fresh burst: high %+v low %+v; want low first", oh, ol)
	}
	f.check()
	f.advanceTo(50*ms + f.g.Snapshot().Short/2)
	f.g.Release(low[1])
	if !oh.granted() || ol2.calls != 0 {
		t.Fatalf("late burst: high %+v low %+v; want high first", oh, ol2)
	}
	f.check()
	if s := f.tier(0); s.Reserved != 2 {
		t.Fatalf("after a late admission reserved %d, want 2", s.Reserved)
	}
}
