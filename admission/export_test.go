package admission

import (
	"fmt"
	"math"
)

// Test hooks (compiled into the package only for its tests).

// Debts returns every tier's debt as of now.
func (g *Gate) Debts() []float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decay(g.now())
	d := make([]float64, g.ntiers)
	for i := range d {
		d[i] = g.tiers[i].debt
	}
	return d
}

// SetDebt sets tier p's debt as of now.
func (g *Gate) SetDebt(p int, v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decay(g.now())
	g.tiers[p].debt = v
}

// AddDebtForTest charges lower tiers as a wait at tier p does.
func (g *Gate) AddDebtForTest(p int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.decay(g.now())
	g.addDebt(p)
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
	total := 0
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
		if t.debt < 0 || t.debt > g.poolSize {
			return fmt.Errorf("tier %d: debt %v outside [0, %v]", p, t.debt, g.poolSize)
		}
		if p == 0 && t.debt != 0 {
			return fmt.Errorf("tier 0 has debt %v", t.debt)
		}
		if p > 0 && t.debt < g.tiers[p-1].debt-eps {
			return fmt.Errorf("debt decreases from tier %d (%v) to %d (%v)", p-1, g.tiers[p-1].debt, p, t.debt)
		}
	}
	if total != g.waiting || int(g.nodeWait[0]) != total {
		return fmt.Errorf("waiting %d, lists %d, root %d", g.waiting, total, g.nodeWait[0])
	}
	if g.waiting > 0 && (g.timer == nil || g.timerAt > g.nextDeadline()) {
		return fmt.Errorf("waiters but no timer at or before the next deadline")
	}
	return nil
}
