package admission

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Test hooks (compiled into the package only for its tests).

// Debts returns every tier's debt as of now.
func (g *Gate) Debts() []float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	d := make([]float64, g.ntiers)
	for i := range d {
		d[i] = float64(g.debt(i, now))
	}
	return d
}

// Demands returns every tier's demand estimate as of now.
func (g *Gate) Demands() []float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	d := make([]float64, g.ntiers)
	for i := range d {
		g.advanceDemand(&g.tiers[i], now)
		d[i] = g.tiers[i].demand
	}
	return d
}

// SetDemand sets tier p's demand estimate as of now and re-runs dispatch.
func (g *Gate) SetDemand(p int, v float64) {
	g.mu.Lock()
	now := g.now()
	g.advanceDemand(&g.tiers[p], now)
	g.tiers[p].demand = v
	g.dispatch(now)
	g.finish(now)
}

// DemandTau is tier p's demand time constant.
func (g *Gate) DemandTau(p int) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Duration(g.tau(&g.tiers[p]))
}

// debtAsOf is debt(p) as of when (≥ every tier's demandAt), without
// moving the estimates (CheckInvariants must not change what it checks).
func (g *Gate) debtAsOf(p int, when int64) int {
	if p == 0 || g.noDebt {
		return 0
	}
	claim, held := g.claimAsOf(p, when)
	return max(claim-held, 0)
}

// CheckInvariants verifies the gate's bookkeeping under its lock.
// capacityFloor: inUse may exceed capacity only up to this (after a
// capacity decrease).
func (g *Gate) CheckInvariants(capacityFloor int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inUse > max(g.capacity, capacityFloor) {
		return fmt.Errorf("inUse %d > capacity %d", g.inUse, g.capacity)
	}
	if g.inUse < 0 || int(g.nodeInUse[0]) != g.inUse {
		return fmt.Errorf("inUse %d root %d", g.inUse, g.nodeInUse[0])
	}
	for i := range g.tree.nodes {
		nd := &g.tree.nodes[i]
		if nd.leaf >= 0 {
			continue
		}
		var u, w int32
		for _, c := range nd.children {
			u += g.nodeInUse[c]
			w += g.nodeWait[c]
		}
		if u != g.nodeInUse[i] || w != g.nodeWait[i] {
			return fmt.Errorf("node %q: inUse %d waiting %d, children sum %d %d", nd.path, g.nodeInUse[i], g.nodeWait[i], u, w)
		}
		if g.fair {
			for p := 0; p < g.ntiers; p++ {
				var s int32
				for _, c := range nd.children {
					s += g.tnWaiting[p*g.nn+int(c)]
				}
				if s != g.tnWaiting[p*g.nn+i] {
					return fmt.Errorf("tier %d node %q waiting %d children %d", p, nd.path, g.tnWaiting[p*g.nn+i], s)
				}
			}
		}
	}
	now := g.now()
	total, inUse := 0, 0
	for p := range g.tiers {
		t := &g.tiers[p]
		n := 0
		var prev int64 = math.MinInt64
		for r := t.head; r != nil; r = r.ageNext {
			if r.state != stateWaiting {
				return fmt.Errorf("tier %d: queued request in state %d", p, r.state)
			}
			if r.enq < prev {
				return fmt.Errorf("tier %d: age list out of order", p)
			}
			prev = r.enq
			n++
		}
		if n != t.waiting {
			return fmt.Errorf("tier %d: list %d waiting %d", p, n, t.waiting)
		}
		ql := 0
		for q := 0; q < g.nq; q++ {
			for r := g.queues[p*g.nq+q].head; r != nil; r = r.qNext {
				ql++
			}
		}
		if ql != n {
			return fmt.Errorf("tier %d: leaf queues hold %d, age list %d", p, ql, n)
		}
		if (g.waitMask&(1<<uint(p)) != 0) != (n > 0) {
			return fmt.Errorf("tier %d: mask wrong", p)
		}
		if g.fair && int(g.tnWaiting[p*g.nn]) != n {
			return fmt.Errorf("tier %d: root waiting %d", p, g.tnWaiting[p*g.nn])
		}
		total += n
		inUse += t.inUse
		if t.inUse < 0 {
			return fmt.Errorf("tier %d: inUse %d", p, t.inUse)
		}
		if t.demand < 0 || math.IsNaN(t.demand) || math.IsInf(t.demand, 0) {
			return fmt.Errorf("tier %d: demand %v", p, t.demand)
		}
		if d := g.debtAsOf(p, now); d < 0 || d > max(g.capacity, 0) || (p == 0 && d != 0) {
			return fmt.Errorf("tier %d: debt %d outside [0, capacity %d] (or owed by the top tier)", p, d, g.capacity)
		}
	}
	if total != g.waiting || int(g.nodeWait[0]) != total {
		return fmt.Errorf("waiting %d, lists %d, root %d", g.waiting, total, g.nodeWait[0])
	}
	if inUse != g.inUse {
		return fmt.Errorf("tiers hold %d tickets, gate %d", inUse, g.inUse)
	}
	// Work conservation: the most important waiting tier does not fit (by
	// capacity or by the debt the tiers above it claim), or every waiter
	// of it is held back by a ceiling. Otherwise dispatch left a slot idle.
	// It is judged as of the last dispatch: every change with waiters
	// present is followed by one, but a timer due now may not have run yet
	// (another goroutine advanced the fake clock).
	if g.waiting > 0 {
		p := bits.TrailingZeros64(g.waitMask)
		if d := g.debtAsOf(p, g.dispAt); g.capacity-g.inUse >= 1+d {
			rr := append([]uint32(nil), g.rr...)
			q := g.choose(p)
			copy(g.rr, rr)
			if q >= 0 {
				return fmt.Errorf("tier %d fits (capacity %d, inUse %d, debt %d) but %d wait", p, g.capacity, g.inUse, d, g.tiers[p].waiting)
			}
		}
	}
	if g.waiting > 0 && (g.timer == nil || g.timerAt > g.nextDeadline()) {
		return fmt.Errorf("waiters but no timer at or before the next deadline")
	}
	return nil
}
