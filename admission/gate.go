package admission

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"time"
)

// Config tunes a Gate. Zero values select the defaults of admission.md §0.
type Config struct {
	Tiers     int           // priority tiers, 0 = most important; default 4, at most 64
	PoolSize  int           // configured pool size: max debt (= PoolSize) and decay (PoolSize per DebtDecay); default: the initial capacity
	Short     time.Duration // LIFO-mode timeout floor; default 5ms
	Long      time.Duration // FIFO-mode timeout floor; default 100ms
	MaxWait   time.Duration // caps both timeouts (query_wait_timeout); 0 = no cap
	DebtDecay time.Duration // time for a full PoolSize of debt to decay; default 10s
	Forgive   float64       // debt forgiven per uncontended higher-tier admission; default 0.1, < 0 means none
	// HoldP50 fixes the median transaction time that floors the timeouts
	// (Short' = max(Short, 2×p50), Long' = max(Long, 10×p50)): 0 estimates
	// it from Release hold times, > 0 uses this value, < 0 disables the
	// floors (timeouts are exactly Short and Long, as in the [sim] model).
	HoldP50 time.Duration

	NoDebt       bool // simulations and regression guards only
	NoHysteresis bool // simulations only: the library detector (leave LIFO as soon as the queue empties)
	NoFairness   bool // one FIFO per tier, whatever the tree

	Tree  *Tree // nil = a single leaf
	Clock Clock // nil = SystemClock
}

const (
	defaultTiers     = 4
	maxTiers         = 64
	defaultShort     = 5 * time.Millisecond
	defaultLong      = 100 * time.Millisecond
	defaultDebtDecay = 10 * time.Second
	defaultForgive   = 0.1

	// minSharePerLeaf: below PoolSize/leaves = 4, weighted sharing is mostly
	// rounding (admission.md §1.3), so the gate turns the tree off.
	minSharePerLeaf = 4

	// p50Step is the relative step of the streaming median of hold times.
	p50Step = 1.0 / 64
	minP50  = int64(time.Microsecond)

	// eps absorbs float rounding in debt arithmetic (0.1 forgiven ten times
	// from 1 must read 0, not 1e-16).
	eps = 1e-9
)

// Gate admits transactions of one pool: a priority semaphore with debt,
// per-tier CoDel with adaptive LIFO and weighted fair sharing over a Tree,
// all decided under one mutex (admission.md §0 item 1). See doc.go.
type Gate struct {
	mu sync.Mutex

	// Immutable after NewGate.
	clock     Clock
	sysClock  bool // clock is SystemClock: read the monotonic clock only
	epoch     time.Time
	tree      *Tree
	fair      bool // queues per leaf, weights and ceilings enforced
	nq        int  // queues per tier: Leaves() when fair, else 1
	nn        int  // tree nodes
	ntiers    int
	poolSize  float64
	short     int64 // floors, ns
	long      int64
	maxWait   int64
	decayRate float64 // debt units per ns
	forgive   float64
	noDebt    bool
	noHyst    bool
	otherLeaf LeafID

	capacity  int
	inUse     int
	waiting   int
	waitMask  uint64 // bit p: tier p has waiters
	zeroSince int64  // when capacity last became 0
	debtAt    int64  // debt values are as of this time

	tiers     []tierState
	queues    []leafQueue // [tier*nq + q]
	tnWaiting []int32     // [tier*nn + node], subtree waiters; only when fair
	nodeInUse []int32     // [node], by the ticket's leaf; [0] == inUse
	nodeWait  []int32     // [node], by the request's leaf, all tiers
	limit     []int32     // [node] hard cap from ceilings
	limitF    []float64
	rr        []uint32 // [node] rotating tie-break

	p50       float64 // streaming median of hold times, ns; 0 = no sample yet
	p50Fixed  bool    // Config.HoldP50 != 0: do not estimate
	shortEff  int64
	longEff   int64
	timer     Timer
	timerAt   int64
	timerGen  uint64
	debtWake  int64    // when decay lets the blocked tier fit (see dispatch)
	decHead   *Request // decided under the lock, delivered after unlock
	decTail   *Request
	immediate uint64 // zero-capacity sheds without queueing (stats)
}

type tierState struct {
	debt          float64
	lifo          bool
	waiting       int
	nonEmptySince int64
	lastShed      int64
	head, tail    *Request // every waiter of the tier, oldest first
	modeSwitches  uint64
	granted       uint64
	shed          uint64
}

type leafQueue struct{ head, tail *Request }

const (
	stateNew uint8 = iota
	stateWaiting
	stateGranted
	stateShed
	stateCancelled
)

// Request is a queued Submit (or Acquire). Keep it to Cancel the request.
type Request struct {
	g     *Gate
	c     Class
	q     int32 // queue index within the tier
	state uint8
	enq   int64

	agePrev, ageNext *Request // tier list
	qPrev, qNext     *Request // leaf queue
	dnext            *Request // decided list

	done func(Ticket, error)
	ch   chan struct{} // Acquire: receives once when decided
	tk   Ticket
	err  error
}

// Class is what the request was submitted as (after clamping, see Submit).
func (r *Request) Class() Class { return r.c }

// Ticket is a granted admission; pass it to Release exactly once.
type Ticket struct {
	g  *Gate
	c  Class
	at int64 // grant time, ns since the gate's epoch
}

// Class is the class the ticket was granted to (after clamping).
func (t Ticket) Class() Class { return t.c }

// Valid is false for the zero Ticket (what a failed Acquire returns).
func (t Ticket) Valid() bool { return t.g != nil }

// Release gives the ticket back to the gate that granted it (the same as
// that gate's Release), so a holder need not keep the gate: after a policy
// reload, tickets of the old gate go back to the old gate.
func (t Ticket) Release() { t.g.Release(t) }

// NewGate returns a gate with the given initial capacity.
func NewGate(cfg Config, capacity int) *Gate {
	g := &Gate{
		clock:   cfg.Clock,
		tree:    cfg.Tree,
		ntiers:  cfg.Tiers,
		short:   int64(cfg.Short),
		long:    int64(cfg.Long),
		maxWait: int64(cfg.MaxWait),
		forgive: cfg.Forgive,
		noDebt:  cfg.NoDebt,
		noHyst:  cfg.NoHysteresis,

		debtWake: math.MaxInt64,
	}
	if g.clock == nil {
		g.clock = SystemClock
	}
	_, g.sysClock = g.clock.(systemClock)
	if g.tree == nil {
		g.tree = singleLeaf
	}
	if g.ntiers <= 0 {
		g.ntiers = defaultTiers
	}
	if g.ntiers > maxTiers {
		g.ntiers = maxTiers
	}
	if g.short <= 0 {
		g.short = int64(defaultShort)
	}
	if g.long <= 0 {
		g.long = int64(defaultLong)
	}
	if g.maxWait < 0 {
		g.maxWait = 0
	}
	if g.forgive == 0 {
		g.forgive = defaultForgive
	} else if g.forgive < 0 {
		g.forgive = 0
	}
	if capacity < 0 {
		capacity = 0
	}
	ps := cfg.PoolSize
	if ps <= 0 {
		ps = max(capacity, 1)
	}
	g.poolSize = float64(ps)
	decay := cfg.DebtDecay
	if decay <= 0 {
		decay = defaultDebtDecay
	}
	g.decayRate = g.poolSize / float64(decay)

	leaves := g.tree.Leaves()
	g.fair = !cfg.NoFairness && (leaves == 1 || ps >= minSharePerLeaf*g.tree.DeclaredLeaves())
	g.nq = 1
	if g.fair {
		g.nq = leaves
	}
	g.nn = len(g.tree.nodes)
	g.otherLeaf = g.tree.Leaf(nil)

	g.tiers = make([]tierState, g.ntiers)
	for i := range g.tiers {
		g.tiers[i].lastShed = math.MinInt64 / 4
	}
	g.queues = make([]leafQueue, g.ntiers*g.nq)
	if g.fair {
		g.tnWaiting = make([]int32, g.ntiers*g.nn)
	}
	g.nodeInUse = make([]int32, g.nn)
	g.nodeWait = make([]int32, g.nn)
	g.limit = make([]int32, g.nn)
	g.limitF = make([]float64, g.nn)
	g.rr = make([]uint32, g.nn)

	if cfg.HoldP50 != 0 {
		g.p50Fixed = true
		g.p50 = float64(max(cfg.HoldP50, 0))
	}
	g.epoch = g.clock.Now()
	g.capacity = capacity
	g.setLimits()
	g.updateTimeouts()
	return g
}

// now reads the clock as ns since the gate's epoch (monotonic when the
// clock's times carry a monotonic reading).
// For SystemClock, time.Since reads only the monotonic clock, which is
// several times cheaper than time.Now on some virtual machines.
func (g *Gate) now() int64 {
	if g.sysClock {
		return int64(time.Since(g.epoch))
	}
	return int64(g.clock.Now().Sub(g.epoch))
}

func (g *Gate) setLimits() {
	g.tree.limits(float64(g.capacity), g.limitF)
	for i, l := range g.limitF {
		g.limit[i] = int32(l)
	}
}

// norm clamps a class into this gate: priority into [0, Tiers), an unknown
// leaf to the tree's all-"other" leaf.
func (g *Gate) norm(c Class) Class {
	if c.Priority < 0 {
		c.Priority = 0
	} else if c.Priority >= g.ntiers {
		c.Priority = g.ntiers - 1
	}
	if !g.tree.validLeaf(c.Leaf) {
		c.Leaf = g.otherLeaf
	}
	return c
}

// ---- debt (§1.1) ----

// decay brings every tier's debt to now: linear, PoolSize per DebtDecay,
// floored at 0. A clock that went backwards changes nothing.
func (g *Gate) decay(now int64) {
	el := now - g.debtAt
	if el <= 0 {
		return
	}
	g.debtAt = now
	if g.noDebt {
		return
	}
	d := float64(el) * g.decayRate
	for p := 1; p < g.ntiers; p++ {
		t := &g.tiers[p]
		if t.debt > 0 {
			t.debt -= d
			if t.debt < eps {
				t.debt = 0
			}
		}
	}
}

// addDebt: tier p had to wait for capacity, so every lower tier owes one
// more slot ("had it existed, p would not have waited"), up to PoolSize.
func (g *Gate) addDebt(p int) {
	if g.noDebt {
		return
	}
	for q := p + 1; q < g.ntiers; q++ {
		g.tiers[q].debt = math.Min(g.tiers[q].debt+1, g.poolSize)
	}
}

// forgiveDebt: tier p was admitted uncontended; lower tiers owe a little
// less, never less than the tier above them.
func (g *Gate) forgiveDebt(p int) {
	if g.noDebt || g.forgive == 0 {
		return
	}
	for q := p + 1; q < g.ntiers; q++ {
		t := &g.tiers[q]
		if t.debt == 0 {
			continue
		}
		d := math.Max(t.debt-g.forgive, g.tiers[q-1].debt)
		if d < eps {
			d = 0
		}
		t.debt = d
	}
}

// fits is the admission predicate C − inUse ≥ 1 + debt[p] (debt current).
func (g *Gate) fits(p int) bool {
	return float64(g.capacity-g.inUse) >= 1+g.tiers[p].debt-eps
}

// ---- hold-time estimate and timeouts (§1.2) ----

// observeHold feeds the streaming median of hold times: each sample moves
// the estimate by a factor 1±1/64 towards it, never past it. The estimate
// converges to the median (the fixed point where as many samples lie above
// as below), ignores rare long transactions and needs no memory.
func (g *Gate) observeHold(h int64) {
	if g.p50Fixed {
		return
	}
	x := float64(max(h, minP50))
	switch {
	case g.p50 == 0:
		g.p50 = x
	case x > g.p50:
		g.p50 = math.Min(g.p50*(1+p50Step), x)
	case x < g.p50:
		g.p50 = math.Max(g.p50/(1+p50Step), x)
	}
	g.updateTimeouts()
}

// updateTimeouts: Short' = max(Short, 2×p50), Long' = max(Long, 10×p50),
// both capped by MaxWait.
func (g *Gate) updateTimeouts() {
	s, l := g.short, g.long
	if p := int64(g.p50); p > 0 {
		s = max(s, 2*p)
		l = max(l, 10*p)
	}
	if g.maxWait > 0 {
		s = min(s, g.maxWait)
		l = min(l, g.maxWait)
	}
	g.shortEff, g.longEff = s, l
}

// ---- queues ----

func (g *Gate) enqueue(r *Request, now int64) {
	p := r.c.Priority
	t := &g.tiers[p]
	g.maybeLeaveLIFO(t, now)
	if t.waiting == 0 {
		t.nonEmptySince = now
		g.waitMask |= 1 << uint(p)
	}
	t.waiting++
	g.waiting++
	r.enq = now
	r.state = stateWaiting
	r.agePrev, r.ageNext = t.tail, nil
	if t.tail != nil {
		t.tail.ageNext = r
	} else {
		t.head = r
	}
	t.tail = r
	r.q = 0
	if g.fair {
		r.q = int32(r.c.Leaf)
	}
	lq := &g.queues[p*g.nq+int(r.q)]
	r.qPrev, r.qNext = lq.tail, nil
	if lq.tail != nil {
		lq.tail.qNext = r
	} else {
		lq.head = r
	}
	lq.tail = r
	g.countWaiting(r, 1)
}

func (g *Gate) countWaiting(r *Request, d int32) {
	path := g.tree.leafPath[r.c.Leaf]
	g.nodeWait[0] += d
	for _, n := range path {
		g.nodeWait[n] += d
	}
	if g.fair {
		tn := g.tnWaiting[r.c.Priority*g.nn:]
		tn[0] += d
		for _, n := range path {
			tn[n] += d
		}
	}
}

// unlink takes a waiting r out of its lists in O(depth).
func (g *Gate) unlink(r *Request, now int64) {
	p := r.c.Priority
	t := &g.tiers[p]
	if r.agePrev != nil {
		r.agePrev.ageNext = r.ageNext
	} else {
		t.head = r.ageNext
	}
	if r.ageNext != nil {
		r.ageNext.agePrev = r.agePrev
	} else {
		t.tail = r.agePrev
	}
	lq := &g.queues[p*g.nq+int(r.q)]
	if r.qPrev != nil {
		r.qPrev.qNext = r.qNext
	} else {
		lq.head = r.qNext
	}
	if r.qNext != nil {
		r.qNext.qPrev = r.qPrev
	} else {
		lq.tail = r.qPrev
	}
	r.agePrev, r.ageNext, r.qPrev, r.qNext = nil, nil, nil, nil
	g.countWaiting(r, -1)
	t.waiting--
	g.waiting--
	if t.waiting == 0 {
		g.waitMask &^= 1 << uint(p)
		g.maybeLeaveLIFO(t, now)
	}
}

// maybeLeaveLIFO applies the exit rule: an empty queue and, with
// hysteresis, no shed for a full long interval. It is evaluated lazily
// (when the queue empties, before a push, on Snapshot): the mode is only
// observable at those moments.
func (g *Gate) maybeLeaveLIFO(t *tierState, now int64) {
	if t.lifo && t.waiting == 0 && (g.noHyst || now-t.lastShed >= g.longEff) {
		t.lifo = false
		t.modeSwitches++
	}
}

func (g *Gate) decide(r *Request) {
	if g.decTail != nil {
		g.decTail.dnext = r
	} else {
		g.decHead = r
	}
	g.decTail = r
}

func (g *Gate) take(c Class) {
	g.inUse++
	g.nodeInUse[0]++
	for _, n := range g.tree.leafPath[c.Leaf] {
		g.nodeInUse[n]++
	}
	g.tiers[c.Priority].granted++
}

func (g *Gate) grant(r *Request, now int64) {
	if g.inUse >= g.capacity {
		panic("BUG: admission: grant beyond capacity")
	}
	g.unlink(r, now)
	g.take(r.c)
	r.state = stateGranted
	r.tk = Ticket{g: g, c: r.c, at: now}
	g.decide(r)
}

func (g *Gate) shed(r *Request, reason Reason, now int64) {
	t := &g.tiers[r.c.Priority]
	if reason != ReasonZeroCapacity {
		t.lastShed = now // before unlink, which may evaluate the LIFO exit
	}
	g.unlink(r, now)
	t.shed++
	r.state = stateShed
	r.err = &ShedError{Reason: reason, Class: r.c, Waited: time.Duration(now - r.enq), RetryAfter: time.Duration(g.longEff)}
	g.decide(r)
}

// ---- dispatch ----

// reap switches tiers into LIFO when their queue has been non-empty for
// more than Long', then sheds from the old end every waiter older than the
// tier's timeout, and everything when capacity has been 0 for Short'.
func (g *Gate) reap(now int64) {
	for m := g.waitMask; m != 0; m &= m - 1 {
		t := &g.tiers[bits.TrailingZeros64(m)]
		if !t.lifo {
			// Events in time order even when the timer runs late: FIFO
			// deadlines that fall before the LIFO switch (waiters enqueued
			// when the queue became non-empty) come first.
			sw := t.nonEmptySince + g.longEff + 1
			for t.head != nil && t.head.enq+g.longEff <= now && t.head.enq+g.longEff < sw {
				g.shed(t.head, ReasonFIFOTimeout, now)
			}
			if t.head != nil && now >= sw {
				t.lifo = true
				t.modeSwitches++
			}
		}
		to, reason := g.longEff, ReasonFIFOTimeout
		if t.lifo {
			to, reason = g.shortEff, ReasonLIFOTimeout
		}
		for t.head != nil && now-t.head.enq >= to {
			g.shed(t.head, reason, now)
		}
	}
	if g.capacity == 0 && g.waiting > 0 && now-g.zeroSince >= g.shortEff {
		for m := g.waitMask; m != 0; m &= m - 1 {
			t := &g.tiers[bits.TrailingZeros64(m)]
			for t.head != nil {
				g.shed(t.head, ReasonZeroCapacity, now)
			}
		}
	}
}

// dispatch reaps, then grants in strict tier order while the predicate
// holds. A tier whose remaining waiters are all held back by ceilings does
// not block lower tiers (their waiters could not use the slot anyway).
func (g *Gate) dispatch(now int64) {
	g.debtWake = math.MaxInt64
	if g.waiting == 0 {
		return
	}
	g.reap(now)
	g.decay(now)
	for m := g.waitMask; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		t := &g.tiers[p]
		for t.waiting > 0 {
			if !g.fits(p) {
				// Debt is non-decreasing down the tiers: no lower tier fits
				// either. If only debt is in the way, wake when it has
				// decayed enough (nothing else would re-run dispatch).
				if free := g.capacity - g.inUse; free >= 1 && g.decayRate > 0 {
					wait := (g.tiers[p].debt - float64(free-1)) / g.decayRate
					g.debtWake = now + max(int64(math.Ceil(wait)), 1)
				}
				return
			}
			q := g.choose(p)
			if q < 0 {
				break
			}
			lq := &g.queues[p*g.nq+q]
			r := lq.head
			if t.lifo {
				r = lq.tail
			}
			g.grant(r, now)
		}
	}
}

// choose picks the queue of tier p to serve next: from the root, the child
// with waiters and room under its ceiling with the smallest
// (inUse+1)/weight, ties to the next in rotation. -1 when every waiter of
// the tier is held back by a ceiling.
func (g *Gate) choose(p int) int {
	if !g.fair {
		return 0
	}
	return g.chooseFrom(p, 0)
}

func (g *Gate) chooseFrom(p int, n int32) int {
	nd := &g.tree.nodes[n]
	if nd.leaf >= 0 {
		return int(nd.leaf)
	}
	tn := g.tnWaiting[p*g.nn:]
	k := len(nd.children)
	start := int(g.rr[n] % uint32(k))
	// Try children in (ratio, rotated position) order; usually the first
	// succeeds, and only a subtree blocked by deeper ceilings sends us on.
	lastR, lastPos := math.Inf(-1), -1
	for {
		best, bestIdx, bestPos, bestR := int32(-1), 0, 0, 0.0
		for pos := 0; pos < k; pos++ {
			idx := start + pos
			if idx >= k {
				idx -= k
			}
			c := nd.children[idx]
			if tn[c] == 0 || g.nodeInUse[c] >= g.limit[c] {
				continue
			}
			r := float64(g.nodeInUse[c]+1) / g.tree.nodes[c].weight
			if r < lastR || (r == lastR && pos <= lastPos) {
				continue // tried already
			}
			if best < 0 || r < bestR {
				best, bestIdx, bestPos, bestR = c, idx, pos, r
			}
		}
		if best < 0 {
			return -1
		}
		if q := g.chooseFrom(p, best); q >= 0 {
			g.rr[n] = uint32(bestIdx + 1)
			return q
		}
		lastR, lastPos = bestR, bestPos
	}
}

// underCeilings: every node on the leaf's path has room.
func (g *Gate) underCeilings(l LeafID) bool {
	if !g.fair {
		return true
	}
	for _, n := range g.tree.leafPath[l] {
		if g.nodeInUse[n] >= g.limit[n] {
			return false
		}
	}
	return true
}

// ---- timer ----

// nextDeadline is the earliest moment dispatch has work: a head waiter's
// timeout, a FIFO tier's switch to LIFO, the zero-capacity grace end, or
// debt decayed enough for the first blocked tier.
func (g *Gate) nextDeadline() int64 {
	d := int64(math.MaxInt64)
	for m := g.waitMask; m != 0; m &= m - 1 {
		t := &g.tiers[bits.TrailingZeros64(m)]
		if t.lifo {
			d = min(d, t.head.enq+g.shortEff)
		} else {
			d = min(d, t.head.enq+g.longEff, t.nonEmptySince+g.longEff+1)
		}
	}
	if g.capacity == 0 {
		d = min(d, g.zeroSince+g.shortEff)
	}
	return min(d, g.debtWake)
}

// arm keeps exactly one timer armed at or before the next deadline. A
// timer armed earlier than needed is kept: it fires, finds little to do and
// re-arms, which costs fewer AfterFunc calls than re-arming on every pop.
func (g *Gate) arm(now int64) {
	if g.waiting == 0 {
		return // an armed timer fires once and finds nothing to do
	}
	d := g.nextDeadline()
	if g.timer != nil && g.timerAt <= d {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.timerGen++
	gen := g.timerGen
	g.timerAt = d
	g.timer = g.clock.AfterFunc(time.Duration(max(d-now, 0)), func() { g.onTimer(gen) })
}

func (g *Gate) onTimer(gen uint64) {
	g.mu.Lock()
	if gen == g.timerGen {
		g.timer = nil
	}
	now := g.now()
	g.dispatch(now)
	g.finish(now)
}

// finish re-arms the timer, unlocks and delivers the decisions made under
// the lock, in decision order, without holding it.
func (g *Gate) finish(now int64) {
	g.arm(now)
	r := g.decHead
	g.decHead, g.decTail = nil, nil
	g.mu.Unlock()
	for r != nil {
		next := r.dnext
		r.dnext = nil
		if r.done != nil {
			r.done(r.tk, r.err)
		} else {
			r.ch <- struct{}{} // buffered: never blocks; r may be recycled after this
		}
		r = next
	}
}

// ---- public surface ----

// tryFast admits c without queueing when its tier and every higher tier
// have no waiters, the predicate holds and its path is under its ceilings.
func (g *Gate) tryFast(c Class, now int64) (Ticket, bool) {
	p := c.Priority
	if g.waitMask&(2<<uint(p)-1) != 0 {
		return Ticket{}, false
	}
	g.decay(now)
	if !g.fits(p) || !g.underCeilings(c.Leaf) {
		return Ticket{}, false
	}
	g.take(c)
	g.forgiveDebt(p)
	return Ticket{g: g, c: c, at: now}, true
}

// afterFast unlocks after a fast-path grant. Forgiveness may have let a
// lower tier's waiter fit, so dispatch runs when lower tiers have waiters.
func (g *Gate) afterFast(now int64) {
	if g.waiting == 0 {
		g.mu.Unlock()
		return
	}
	g.dispatch(now)
	g.finish(now)
}

// zeroExpired: capacity has been 0 for at least Short'; requests are then
// shed at once rather than queued.
func (g *Gate) zeroExpired(now int64) bool {
	return g.capacity == 0 && now-g.zeroSince >= g.shortEff
}

func (g *Gate) shedNow(c Class) error {
	g.tiers[c.Priority].shed++
	g.immediate++
	return &ShedError{Reason: ReasonZeroCapacity, Class: c, RetryAfter: time.Duration(g.longEff)}
}

// park queues r, dispatches, and charges debt if r has to wait for
// capacity (not when its own category's ceiling holds it back).
func (g *Gate) park(r *Request, now int64) {
	g.enqueue(r, now)
	g.dispatch(now)
	if r.state == stateWaiting && g.underCeilings(r.c.Leaf) {
		g.addDebt(r.c.Priority)
	}
}

var requestPool = sync.Pool{New: func() any { return &Request{ch: make(chan struct{}, 1)} }}

// Acquire blocks until c is admitted, shed (*ShedError) or ctx is done
// (ctx.Err()). An already-cancelled ctx fails without queueing. If a grant
// races the cancellation, Acquire releases the ticket itself. The
// uncontended path does not allocate.
func (g *Gate) Acquire(ctx context.Context, c Class) (Ticket, error) {
	if err := ctx.Err(); err != nil {
		return Ticket{}, err
	}
	c = g.norm(c)
	g.mu.Lock()
	now := g.now()
	if tk, ok := g.tryFast(c, now); ok {
		g.afterFast(now)
		return tk, nil
	}
	if g.zeroExpired(now) {
		err := g.shedNow(c)
		g.mu.Unlock()
		return Ticket{}, err
	}
	r := requestPool.Get().(*Request)
	r.g, r.c = g, c
	g.park(r, now)
	g.finish(now)

	select {
	case <-r.ch:
	case <-ctx.Done():
		if g.Cancel(r) {
			recycle(r)
			return Ticket{}, ctx.Err()
		}
		<-r.ch // decided concurrently; delivery is on its way
		if r.err == nil {
			tk := r.tk
			recycle(r)
			g.release(tk, false)
		} else {
			recycle(r)
		}
		return Ticket{}, ctx.Err()
	}
	tk, err := r.tk, r.err
	recycle(r)
	return tk, err
}

func recycle(r *Request) {
	ch := r.ch
	*r = Request{ch: ch}
	requestPool.Put(r)
}

// Submit is the non-blocking Acquire (for the pooler's event loop and the
// simulations). done is called exactly once, never with the gate's lock
// held, with a Ticket or a *ShedError. When c is admitted (or shed) at
// once, done is called before Submit returns and Submit returns nil;
// otherwise it returns the queued Request, which Cancel can withdraw. A
// priority outside [0, Tiers) is clamped; an unknown leaf is the tree's
// all-"other" leaf (Ticket.Class reports what was used).
func (g *Gate) Submit(c Class, done func(Ticket, error)) *Request {
	c = g.norm(c)
	g.mu.Lock()
	now := g.now()
	if tk, ok := g.tryFast(c, now); ok {
		g.afterFast(now)
		done(tk, nil)
		return nil
	}
	if g.zeroExpired(now) {
		err := g.shedNow(c)
		g.mu.Unlock()
		done(Ticket{}, err)
		return nil
	}
	r := &Request{g: g, c: c, done: done}
	g.park(r, now)
	g.finish(now)
	return r
}

// Cancel withdraws a queued request. True: it was waiting and done will
// not be called. False: it was already decided, and done was or will be
// called (with a Ticket the caller must Release). Removing a waiter re-runs
// dispatch, since it may have held others back (golang/go#37852).
func (g *Gate) Cancel(r *Request) bool {
	if r == nil {
		return false
	}
	if r.g != g {
		panic("BUG: admission: Cancel of another gate's request")
	}
	g.mu.Lock()
	if r.state != stateWaiting {
		g.mu.Unlock()
		return false
	}
	now := g.now()
	g.unlink(r, now)
	r.state = stateCancelled
	g.dispatch(now)
	g.finish(now)
	return true
}

// Release returns t's slot; its hold time feeds the transaction-time
// estimate. Releasing the zero Ticket does nothing; releasing a ticket twice
// corrupts the counts (and panics once inUse would go negative).
func (g *Gate) Release(t Ticket) { g.release(t, true) }

func (g *Gate) release(t Ticket, observe bool) {
	if t.g == nil {
		return
	}
	if t.g != g {
		panic("BUG: admission: Release of another gate's ticket")
	}
	g.mu.Lock()
	if g.inUse <= 0 {
		g.mu.Unlock()
		panic("BUG: admission: Release without a ticket in use")
	}
	now := g.now()
	g.inUse--
	g.nodeInUse[0]--
	for _, n := range g.tree.leafPath[t.c.Leaf] {
		g.nodeInUse[n]--
	}
	if observe {
		g.observeHold(now - t.at)
	}
	if g.waiting == 0 {
		g.mu.Unlock()
		return
	}
	g.dispatch(now)
	g.finish(now)
}

// SetCapacity changes the number of servers the gate may hand out and
// grants exactly the waiters that now fit. Tickets beyond a lowered
// capacity stay valid; no grant happens until releases bring inUse below
// it. Capacity 0 is a grace period: waiters keep waiting for Short'; if it
// is still 0 then, they are shed with ReasonZeroCapacity and new requests
// are shed at once until capacity returns.
func (g *Gate) SetCapacity(n int) {
	if n < 0 {
		n = 0
	}
	g.mu.Lock()
	now := g.now()
	if n == 0 && g.capacity != 0 {
		g.zeroSince = now
	}
	g.capacity = n
	g.setLimits()
	g.dispatch(now)
	g.finish(now)
}

// Capacity is the current capacity.
func (g *Gate) Capacity() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.capacity
}

// InUse is the number of tickets granted and not released.
func (g *Gate) InUse() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inUse
}

// Waiting is the number of queued requests, all tiers (the pooler's demand
// for opening servers).
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// Fair reports whether the tree is in force (per-leaf queues, weights and
// ceilings): false with NoFairness, or when PoolSize < 4 × leaves.
func (g *Gate) Fair() bool { return g.fair }

// Tree is the gate's tree.
func (g *Gate) Tree() *Tree { return g.tree }

// Snapshot is the gate's state for SHOW ADMISSION and metrics.
type Snapshot struct {
	Capacity, InUse, Waiting int
	HoldP50, Short, Long     time.Duration // hold-time estimate and the effective timeouts
	Fair                     bool          // the tree is in force (see Gate.Fair)
	ShedAtOnce               uint64        // requests shed without queueing (capacity 0)
	Tiers                    []TierSnapshot
	Nodes                    []NodeSnapshot // preorder; Nodes[0] is the root (Path "")
}

// TierSnapshot is one priority tier.
type TierSnapshot struct {
	Priority     int
	Debt         float64
	LIFO         bool
	Waiting      int
	ModeSwitches uint64 // FIFO→LIFO and LIFO→FIFO transitions
	Granted      uint64
	Shed         uint64
}

// NodeSnapshot is one node of the tree.
type NodeSnapshot struct {
	Path            string
	Weight, Ceiling float64
	Limit           int // hard cap from ceilings at the current capacity
	InUse, Waiting  int
	Alloc           float64 // water-fill of current demand (inUse+waiting per leaf)
}

// Snapshot reads the gate's state. It first does what the timer would do
// now (reap, mode changes), so the modes it reports are current.
func (g *Gate) Snapshot() Snapshot {
	g.mu.Lock()
	now := g.now()
	g.dispatch(now)
	g.decay(now)
	for i := range g.tiers {
		g.maybeLeaveLIFO(&g.tiers[i], now)
	}
	s := Snapshot{
		Capacity:   g.capacity,
		InUse:      g.inUse,
		Waiting:    g.waiting,
		HoldP50:    time.Duration(g.p50),
		Short:      time.Duration(g.shortEff),
		Long:       time.Duration(g.longEff),
		Fair:       g.fair,
		ShedAtOnce: g.immediate,
		Tiers:      make([]TierSnapshot, g.ntiers),
		Nodes:      make([]NodeSnapshot, g.nn),
	}
	for p := range g.tiers {
		t := &g.tiers[p]
		s.Tiers[p] = TierSnapshot{Priority: p, Debt: t.debt, LIFO: t.lifo, Waiting: t.waiting,
			ModeSwitches: t.modeSwitches, Granted: t.granted, Shed: t.shed}
	}
	demand := make(map[LeafID]float64, len(g.tree.leafNode))
	for l, n := range g.tree.leafNode {
		if d := g.nodeInUse[n] + g.nodeWait[n]; d > 0 {
			demand[LeafID(l)] = float64(d)
		}
	}
	for i := range g.tree.nodes {
		nd := &g.tree.nodes[i]
		s.Nodes[i] = NodeSnapshot{Path: nd.path, Weight: nd.weight, Ceiling: nd.ceiling, Limit: int(g.limit[i]),
			InUse: int(g.nodeInUse[i]), Waiting: int(g.nodeWait[i])}
	}
	capacity := g.capacity
	g.finish(now)
	alloc := WaterFill(g.tree, float64(capacity), demand)
	for i := range s.Nodes {
		s.Nodes[i].Alloc = alloc[s.Nodes[i].Path]
	}
	return s
}
