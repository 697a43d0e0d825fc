package admission_test

import (
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
)

// Start-up and recovery (doc.go, "Start-up and zero capacity"): while the
// pool's servers log in, or before it has ever had capacity, the top tier
// waits for them up to MaxWait; the lower tiers keep their CoDel timeouts;
// nothing is shed for zero capacity. Short 5 ms, Long 100 ms.

func TestStartupTopTierWaitsForServers(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2}, 0)
	_, oh := f.submit(admission.Class{})
	_, ol := f.submit(admission.Class{Priority: 1})
	f.advanceTo(99 * ms)
	if oh.calls+ol.calls != 0 {
		t.Fatal("shed before the long timeout")
	}
	f.advanceTo(100 * ms)
	if se := ol.shed(); se == nil || se.Reason != admission.ReasonFIFOTimeout {
		t.Fatalf("low: %+v, want its own FIFO timeout at 100ms (not zero_capacity)", ol)
	}
	f.advanceTo(time.Second)
	if oh.calls != 0 {
		t.Fatalf("high shed during start-up: %+v", oh.shed())
	}
	if s := f.g.Snapshot(); !s.Starting || s.Tiers[0].LIFO {
		t.Fatalf("starting %v, high LIFO %v; want starting, FIFO", s.Starting, s.Tiers[0].LIFO)
	}
	// New requests of every tier queue (none is shed at once).
	r, ol2 := f.submit(admission.Class{Priority: 1})
	if r == nil || ol2.calls != 0 {
		t.Fatal("a low request was shed at once before the pool ever had capacity")
	}
	f.g.SetCapacity(1)
	if !oh.granted() || ol2.calls != 0 {
		t.Fatalf("first server: high %+v low %+v", oh, ol2)
	}
	f.check()
}

func TestStartupTopTierBoundedByMaxWait(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2, MaxWait: 300 * ms}, 0)
	_, oh := f.submit(admission.Class{})
	f.advanceTo(300*ms - 1)
	if oh.calls != 0 {
		t.Fatal("shed before query_wait_timeout")
	}
	f.advanceTo(300 * ms)
	if se := oh.shed(); se == nil || se.Reason != admission.ReasonFIFOTimeout || se.Waited != 300*ms {
		t.Fatalf("high: %+v, want shed at query_wait_timeout", oh)
	}
	f.check()
}

// Logins in flight (SetPool), the pooler's case: capacity counts the
// servers logging in, so tickets are out while their servers log in, and
// the top tier's queue behind them is not overload. When the logins end,
// its waiters' timeouts start afresh.
func TestLoginsInFlightKeepTopTierWaiting(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2}, 2)
	f.g.SetPool(2, 2)
	held := f.hold(2, admission.Class{Priority: 1})
	_, oh := f.submit(admission.Class{})
	f.advanceTo(500 * ms)
	if oh.calls != 0 {
		t.Fatal("high shed while the servers log in")
	}
	f.g.SetPool(2, 1)
	f.advanceTo(600 * ms)
	if oh.calls != 0 {
		t.Fatal("high shed while a server still logs in")
	}
	f.g.SetPool(2, 0) // logged in at 600 ms
	if s := f.g.Snapshot(); s.Starting || s.LoggingIn != 0 {
		t.Fatalf("starting %v logging in %d after the logins", s.Starting, s.LoggingIn)
	}
	f.advanceTo(700*ms - 1)
	if oh.calls != 0 {
		t.Fatal("high shed less than Long after the servers came up")
	}
	f.advanceTo(700 * ms)
	if se := oh.shed(); se == nil || se.Reason != admission.ReasonFIFOTimeout || se.Waited != 700*ms {
		t.Fatalf("high: %+v, want FIFO timeout Long after the logins ended", oh)
	}
	f.check()
	_ = held
}

// Lower tiers keep their CoDel timeouts while servers log in (no zero-
// capacity shed either).
func TestLoginsInFlightLowerTiersKeepTheirTimeouts(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2}, 1)
	held := f.hold(1, admission.Class{Priority: 1})
	f.advanceTo(10 * ms)
	f.g.SetPool(0, 1) // the server died; its replacement logs in
	_, ol := f.submit(admission.Class{Priority: 1})
	f.advanceTo(50 * ms)
	if ol.calls != 0 {
		t.Fatal("low shed for zero capacity while a login is in flight")
	}
	f.advanceTo(110 * ms)
	if se := ol.shed(); se == nil || se.Reason != admission.ReasonFIFOTimeout {
		t.Fatalf("low: %+v, want its FIFO timeout", ol)
	}
	if err := f.g.CheckInvariants(1); err != nil { // a ticket above the lowered capacity
		t.Fatal(err)
	}
	_ = held
}

// Zero capacity after the pool has had capacity, with nothing logging in:
// a grace of Short', then the tiers below the top are shed (queued ones,
// and new ones at once); the top tier keeps its own timeouts.
func TestZeroCapacityShedsOnlyBelowTopTier(t *testing.T) {
	f := newFixture(t, admission.Config{Tiers: 2}, 1)
	held := f.hold(1, admission.Class{Priority: 1})
	_, oh := f.submit(admission.Class{})
	_, ol := f.submit(admission.Class{Priority: 1})
	f.advanceTo(10 * ms)
	f.g.SetCapacity(0)
	f.advanceTo(14 * ms)
	_, ol2 := f.submit(admission.Class{Priority: 1})
	if oh.calls+ol.calls+ol2.calls != 0 {
		t.Fatal("shed within the grace period")
	}
	f.advanceTo(15 * ms)
	for _, o := range []*outcome{ol, ol2} {
		if se := o.shed(); se == nil || se.Reason != admission.ReasonZeroCapacity {
			t.Fatalf("low: %+v, want a zero-capacity shed at 15 ms", o)
		}
	}
	if oh.calls != 0 {
		t.Fatal("the top tier was shed for zero capacity")
	}
	r, ol3 := f.submit(admission.Class{Priority: 1})
	if r != nil || ol3.shed() == nil || ol3.shed().Reason != admission.ReasonZeroCapacity {
		t.Fatal("a new low request is shed at once while capacity stays 0")
	}
	r, oh2 := f.submit(admission.Class{})
	if r == nil || oh2.calls != 0 {
		t.Fatal("a new top-tier request must queue at zero capacity")
	}
	f.advanceTo(100 * ms)
	if se := oh.shed(); se == nil || se.Reason != admission.ReasonFIFOTimeout {
		t.Fatalf("high: %+v, want its own FIFO timeout", oh)
	}
	f.g.SetCapacity(1)
	f.g.Release(held[0])
	if !oh2.granted() {
		t.Fatal("capacity back: the queued top-tier request")
	}
	f.g.Release(oh2.tk)
	// High waited for 100 ms: its demand still claims the one slot, until
	// the estimate fades (time constant 5 ms here).
	if _, o := f.submit(admission.Class{Priority: 1}); o.calls != 0 {
		t.Fatal("low took the slot high's recent demand claims")
	}
	f.advanceTo(200 * ms)
	if s := f.g.Snapshot(); s.InUse != 1 || s.Tiers[1].Debt != 0 {
		t.Fatalf("after high's demand faded: in use %d, low debt %v; want the low waiter admitted", s.InUse, s.Tiers[1].Debt)
	}
	f.check()
}
