package admission

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"time"
)

// Config tunes a Gate. Zero values select the defaults (doc.go).
type Config struct {
	Tiers    int           // priority tiers, 0 = most important; default 4, at most 64
	PoolSize int           // configured pool size: fair sharing needs PoolSize ≥ 4 × declared leaves; default: the initial capacity
	Short    time.Duration // LIFO-mode timeout floor; default 5ms
	Long     time.Duration // FIFO-mode timeout floor; default 100ms
	// MaxWait is query_wait_timeout: it caps both timeouts, and bounds the
	// top tier's wait while the pool starts (see Gate.SetPool); 0 = none.
	MaxWait time.Duration
	// DebtDecay caps the time constant of a tier's demand estimate: how
	// long a reservation may outlive the demand behind it (doc.go, "Debt");
	// default 10s.
	DebtDecay time.Duration
	// HoldP50 fixes the median transaction time that floors the timeouts
	// (Short' = max(Short, 2×p50), Long' = max(Long, 10×p50)): 0 estimates
	// it from Release hold times, > 0 uses this value, < 0 disables the
	// floors (timeouts are exactly Short and Long, as in the [sim] model).
	HoldP50 time.Duration

	// Started: the pool has served before this gate (a gate rebuilt for a
	// new policy or pool size, or a pool closed by pool_size=0), so
	// capacity 0 means it cannot serve, not that it is starting: see
	// SetPool.
	Started bool

	NoDebt       bool // no reservations for higher tiers, strict tier order only: simulations and regression guards
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

	// demandHolds: a tier's demand estimate averages its tickets plus
	// waiters over about this many of its median hold times (the time
	// constant of an exponentially weighted average), within [Short,
	// DebtDecay]. Shorter averages follow every fluctuation of the higher
	// tiers' concurrency, and the lower tiers refill the dips with long
	// transactions (S3b, S3c fail); see doc.go.
	demandHolds = 64
	// demandFloor: higher tiers whose demand estimate is above it claim at
	// least one slot, so that a light top tier (S7 with one client) is not
	// left to wait for a batch transaction to end.
	demandFloor = 0.05

	// minSharePerLeaf: below PoolSize/leaves = 4, weighted sharing is mostly
	// rounding (doc.go, "Weighted fair sharing"), so the gate turns the tree off.
	minSharePerLeaf = 4

	// p50Step is the relative step of the streaming median of hold times.
	p50Step = 1.0 / 64
	minP50  = int64(time.Microsecond)

	// eps: a demand estimate this close to its current count is the count.
	eps = 1e-9
)

// Gate admits transactions of one pool: a priority semaphore whose lower
// tiers leave room for the higher tiers' demand, per-tier CoDel with
// adaptive LIFO and weighted fair sharing over a Tree, all decided under
// one mutex. See doc.go.
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
	maxTau    float64 // DebtDecay, ns: longest demand time constant
	noDebt    bool
	noHyst    bool
	otherLeaf LeafID

	capacity  int
	inUse     int
	waiting   int
	waitMask  uint64 // bit p: tier p has waiters
	zeroSince int64  // when capacity last became 0
	hadCap    bool   // capacity has been > 0 at least once
	loggingIn int    // servers logging in (SetPool)

	// Busy accounting: ∫inUse dt and ∫capacity dt (slot·ns) since the
	// epoch, brought to accAt at every change of either.
	accAt              int64
	inUseArea, capArea float64

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
	debtWake  int64    // when demand decay lets the blocked tier fit (see dispatch)
	dispAt    int64    // when dispatch last ran (CheckInvariants)
	decHead   *Request // decided under the lock, delivered after unlock
	decTail   *Request
	immediate uint64 // zero-capacity sheds without queueing (stats)
}

type tierState struct {
	inUse    int     // tickets of this tier
	demand   float64 // estimate of inUse+waiting, as of demandAt
	demandAt int64
	holdP50  float64 // streaming median of this tier's hold times, ns; 0 = no sample
	// reserve is the tier's wait-feedback reservation r (doc.go, "Debt"):
	// +1 for each of its admissions that waited Short'/2 or more (and each
	// CoDel shed), decaying with the demand's time constant, as of
	// reserveAt. It starts at the capacity: a tier is given what its
	// demand claims until its waits show it needs less.
	reserve       float64
	reserveAt     int64
	since         int64 // waiters' timeouts count from max(enq, since) (top tier after start-up)
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
	g.maxTau = float64(decay)

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
		g.tiers[i].since = math.MinInt64 / 4
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
	g.hadCap = capacity > 0 || cfg.Started
	for i := range g.tiers {
		g.tiers[i].reserve = float64(max(capacity, 1))
	}
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

// ---- demand and debt (doc.go, "Debt") ----

// tau is tier t's demand time constant: demandHolds of its median hold
// time (the gate's median before the tier has one), within [Short,
// DebtDecay].
func (g *Gate) tau(t *tierState) float64 {
	h := t.holdP50
	if h == 0 {
		h = g.p50
	}
	return min(max(demandHolds*h, float64(g.short)), g.maxTau)
}

// advanceDemand brings tier t's demand estimate to now. It is the
// exponentially weighted time average of the tier's tickets plus waiters,
// exact for that piecewise-constant count as long as it is called before
// every change of the count. A clock that went backwards changes nothing.
func (g *Gate) advanceDemand(t *tierState, now int64) {
	dt := now - t.demandAt
	if dt <= 0 {
		return
	}
	t.demandAt = now
	h := float64(t.inUse + t.waiting)
	if t.demand == h {
		return
	}
	t.demand = h + (t.demand-h)*expNeg(float64(dt)/g.tau(t))
	if math.Abs(t.demand-h) < eps {
		t.demand = h
	}
}

// expNeg is e^−x for x ≥ 0. Between two events of a busy gate x is tiny
// (time constants are ≥ Short), where four Taylor terms are exact to 1e-9
// and several times cheaper than math.Exp, which the uncontended path
// would otherwise call twice per ticket.
func expNeg(x float64) float64 {
	if x < 1.0/64 {
		return 1 - x*(1-x/2*(1-x/3))
	}
	return math.Exp(-x)
}

// claimOf is the number of slots a demand estimate d claims: d rounded to
// the nearest slot, at least one while d > demandFloor, at most the
// capacity.
func claimOf(d float64, capacity int) int {
	if d <= demandFloor {
		return 0
	}
	return min(max(int(math.Floor(d+0.5)), 1), max(capacity, 0))
}

// demandAsOf is tier t's demand estimate as of when (not before its
// demandAt), without moving it.
func (g *Gate) demandAsOf(t *tierState, when int64) float64 {
	d := t.demand
	if dt := when - t.demandAt; dt > 0 {
		h := float64(t.inUse + t.waiting)
		d = h + (d-h)*expNeg(float64(dt)/g.tau(t))
	}
	return d
}

// feedbackSlots is what tier t's wait feedback reserves as of when: r
// rounded to the nearest slot, at least one while its demand is above
// demandFloor, 0 once it has faded.
func (g *Gate) feedbackSlots(t *tierState, when int64) int {
	if g.demandAsOf(t, when) <= demandFloor {
		return 0
	}
	if !g.fast(t) {
		return max(g.capacity, 1)
	}
	return max(int(math.Floor(g.reserveValue(t, when, g.tau(t))+0.5)), 1)
}

// reserveAsOf is tier t's reserved slots as of when, without moving the
// estimates: its feedback slots, at most what its demand claims.
func (g *Gate) reserveAsOf(t *tierState, when int64) int {
	return min(g.feedbackSlots(t, when), claimOf(g.demandAsOf(t, when), g.capacity))
}

// claimAsOf is what the tiers above p claim as of when: the smaller of
// their summed demand, rounded (claimOf), and their summed feedback
// slots; and what they hold.
func (g *Gate) claimAsOf(p int, when int64) (claim, held int) {
	var d float64
	fb := 0
	for q := 0; q < p; q++ {
		t := &g.tiers[q]
		d += g.demandAsOf(t, when)
		fb += g.feedbackSlots(t, when)
		held += t.inUse
	}
	return min(claimOf(d, g.capacity), fb), held
}

// reserveValue is r as of when.
func (g *Gate) reserveValue(t *tierState, when int64, tau float64) float64 {
	if dt := when - t.reserveAt; dt > 0 {
		return t.reserve * expNeg(float64(dt)/tau)
	}
	return t.reserve
}

// waitTarget is the wait above which an admission counts against its
// tier's reservation, and after which a waiter no longer gives way to
// lower tiers: Short'/2.
func (g *Gate) waitTarget() int64 { return g.shortEff / 2 }

// fast: tier t's median hold time is at most a quarter of waitTarget, so
// that a waiter it has beyond its reservation gets one of its own slots
// back well within the target. Only such a tier's reservation follows its
// waits (feedbackSlots) and only such a tier gives way (yields); a slower
// tier reserves what its demand claims.
func (g *Gate) fast(t *tierState) bool {
	return t.holdP50 > 0 && 4*t.holdP50 <= float64(g.waitTarget())
}

// lateFast: r, the oldest waiter of a queue of fast tier t, has waited
// waitTarget or longer. Dispatch grants it even in LIFO mode: a fast
// tier's queue stands while it gives way (yields), which turns it LIFO
// after Long', and serving the newest would leave the oldest to be shed.
func (g *Gate) lateFast(t *tierState, r *Request, now int64) bool {
	return !g.noDebt && g.fast(t) && now-r.enq >= g.waitTarget()
}

// feedWait raises tier t's reservation by one slot when one of its
// requests waited waitTarget or longer (or was shed by CoDel).
func (g *Gate) feedWait(t *tierState, waited, now int64) {
	if waited < g.waitTarget() {
		return
	}
	r := g.reserveValue(t, now, g.tau(t))
	t.reserve = min(max(r+1, 2, float64(t.inUse+t.waiting)), float64(max(g.capacity, 1)))
	t.reserveAt = now
}

// above is what the tiers above p claim and what they hold now (their
// estimates brought to now): see claimAsOf.
func (g *Gate) above(p int, now int64) (claim, held int) {
	for q := 0; q < p; q++ {
		g.advanceDemand(&g.tiers[q], now)
	}
	return g.claimAsOf(p, now)
}

// yields: tier p, which has waiters, lets a lower tier's waiter take a
// free slot first. It does while it holds at least its reservation and
// its oldest waiter has waited less than waitTarget, and a lower tier
// waits; never with NoDebt (strict order) or while the pool starts.
func (g *Gate) yields(p int, now int64) bool {
	if g.noDebt || g.filling() || p >= g.ntiers-1 || g.waitMask>>uint(p+1) == 0 {
		return false
	}
	t := &g.tiers[p]
	if now-t.head.enq >= g.waitTarget() {
		return false
	}
	g.advanceDemand(t, now)
	fb := g.feedbackSlots(t, now)
	return fb < claimOf(t.demand, g.capacity) && t.inUse >= fb
}

// debt is tier p's debt: the free slots it must leave for the tiers above
// it, max(0, their claim − their tickets). Tier 0 owes nothing.
func (g *Gate) debt(p int, now int64) int {
	if p == 0 || g.noDebt {
		return 0
	}
	c, h := g.above(p, now)
	return max(c-h, 0)
}

// fits is the admission predicate C − inUse ≥ 1 + debt[p]; equivalently,
// the tickets of tier p and the tiers below it stay within
// C − max(claim above p, held above p) (TierSnapshot.Allowed).
func (g *Gate) fits(p int, now int64) bool {
	return g.capacity-g.inUse >= 1+g.debt(p, now)
}

// demandWake is when tier p, held back by debt with free ≥ 1 slots
// free, may fit through decay alone; MaxInt64 when decay alone cannot get
// there (an event will change the counts). The claim is the smaller of
// two terms, the higher tiers' summed demand rounded and their summed
// feedback slots, so it is the earlier of the moments either term has
// decayed enough. For the demand: with several higher tiers a lower bound
// (each term is taken to decay at the fastest rate among them), exact
// with one. For the feedback: the earliest moment one tier's r crosses a
// rounding boundary, a lower bound. Dispatch re-evaluates then and arms
// the next, which converges on the crossing.
func (g *Gate) demandWake(p, free int, now int64) int64 {
	_, held := g.above(p, now)
	x := free - 1 + held // the claim must fall to x
	target := demandFloor
	if x >= 1 {
		target = float64(x) + 0.5
	}
	wake := int64(math.MaxInt64)
	var base, pos, neg float64
	tmin := math.Inf(1)
	for q := 0; q < p; q++ {
		t := &g.tiers[q]
		h := float64(t.inUse + t.waiting)
		base += h
		tau := g.tau(t)
		if e := t.demand - h; e > 0 {
			pos += e
			tmin = min(tmin, tau)
		} else {
			neg -= e
		}
		if t.demand > demandFloor {
			if r := g.reserveValue(t, now, tau); r >= 1.5 {
				k := math.Floor(r + 0.5)
				wake = min(wake, now+max(int64(math.Ceil(tau*math.Log(r/(k-0.5)))), 1))
			}
		}
	}
	if base >= target || pos == 0 {
		return wake
	}
	// Σ demand(t) ≥ base + pos·e^(−t/tmin) − neg: the crossing is no
	// earlier than where that bound reaches the target.
	room := target - base + neg
	if pos <= room {
		return now + 1
	}
	return min(wake, now+max(int64(math.Ceil(tmin*math.Log(pos/room))), 1))
}

// ---- hold-time estimate and timeouts (doc.go, "Details") ----

// observeHold feeds the streaming medians of hold times, the gate's (for
// the timeouts) and the tier's (for its demand estimate).
func (g *Gate) observeHold(t *tierState, h int64) {
	x := float64(max(h, minP50))
	t.holdP50 = stepMedian(t.holdP50, x)
	if g.p50Fixed {
		return
	}
	g.p50 = stepMedian(g.p50, x)
	g.updateTimeouts()
}

// stepMedian moves a streaming median estimate m by a factor 1±1/64
// towards the sample x, never past it. The estimate converges to the
// median (the fixed point where as many samples lie above as below),
// ignores rare long transactions and needs no memory.
func stepMedian(m, x float64) float64 {
	switch {
	case m == 0:
		return x
	case x > m:
		return math.Min(m*(1+p50Step), x)
	case x < m:
		return math.Max(m/(1+p50Step), x)
	}
	return m
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
	g.advanceDemand(t, now)
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
	g.advanceDemand(t, now)
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

func (g *Gate) take(c Class, now int64) {
	t := &g.tiers[c.Priority]
	g.advanceDemand(t, now)
	g.accrue(now)
	t.inUse++
	t.granted++
	g.inUse++
	g.nodeInUse[0]++
	for _, n := range g.tree.leafPath[c.Leaf] {
		g.nodeInUse[n]++
	}
}

// accrue adds the slots in use and the capacity since the last change to
// the busy accounting; call it before changing either.
func (g *Gate) accrue(now int64) {
	dt := now - g.accAt
	if dt <= 0 {
		return
	}
	g.accAt = now
	g.inUseArea += float64(g.inUse) * float64(dt)
	g.capArea += float64(g.capacity) * float64(dt)
}

func (g *Gate) grant(r *Request, now int64) {
	if g.inUse >= g.capacity {
		panic("BUG: admission: grant beyond capacity")
	}
	g.unlink(r, now)
	g.take(r.c, now)
	g.feedWait(&g.tiers[r.c.Priority], now-r.enq, now)
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
	if reason != ReasonZeroCapacity {
		g.feedWait(t, g.waitTarget(), now)
	}
	t.shed++
	r.state = stateShed
	r.err = &ShedError{Reason: reason, Class: r.c, Waited: time.Duration(now - r.enq), RetryAfter: time.Duration(g.longEff)}
	g.decide(r)
}

// ---- dispatch ----

// reap switches tiers into LIFO when their queue has been non-empty for
// more than Long', then sheds from the old end every waiter older than the
// tier's timeout, and every waiter below the top tier once capacity has
// been 0 for Short' (see zeroShedding). While the pool starts (filling),
// the top tier neither turns LIFO nor is shed by CoDel: its waiters wait
// for the servers up to MaxWait.
func (g *Gate) reap(now int64) {
	filling := g.filling()
	for m := g.waitMask; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		t := &g.tiers[p]
		if p == 0 && filling {
			for g.maxWait > 0 && t.head != nil && now-t.head.enq >= g.maxWait {
				g.shed(t.head, ReasonFIFOTimeout, now)
			}
			continue
		}
		if !t.lifo {
			// Events in time order even when the timer runs late: FIFO
			// deadlines that fall before the LIFO switch (waiters enqueued
			// when the queue became non-empty) come first.
			sw := t.nonEmptySince + g.longEff + 1
			for t.head != nil && max(t.head.enq, t.since)+g.longEff <= now && max(t.head.enq, t.since)+g.longEff < sw {
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
		for t.head != nil && now-max(t.head.enq, t.since) >= to {
			g.shed(t.head, reason, now)
		}
	}
	if g.zeroShedding(now) {
		for m := g.waitMask &^ 1; m != 0; m &= m - 1 {
			t := &g.tiers[bits.TrailingZeros64(m)]
			for t.head != nil {
				g.shed(t.head, ReasonZeroCapacity, now)
			}
		}
	}
}

// filling: the pool has servers logging in, or has never had capacity
// (start-up, recovery after RECONNECT or churn). See doc.go.
func (g *Gate) filling() bool { return g.loggingIn > 0 || !g.hadCap }

// zeroShedding: capacity has been 0 for at least Short', the pool has had
// capacity before and no server is logging in: nothing is coming, so the
// tiers below the top are shed (queued ones by reap, new ones at once).
// The top tier waits out its own timeouts.
func (g *Gate) zeroShedding(now int64) bool {
	return g.capacity == 0 && !g.filling() && now-g.zeroSince >= g.shortEff
}

// dispatch reaps, then grants in tier order while the predicate holds.
// A tier whose waiters do not fit stops dispatch: lower tiers wait behind
// it, whether or not they would fit. A tier whose remaining waiters are
// all held back by ceilings does not block lower tiers (their waiters
// could not use the slot anyway). A tier that yields (it holds its
// reservation and its waiters are not yet late) is passed over in the
// first pass, so that a lower tier's waiter takes the slot; whatever the
// lower tiers leave free goes to it in the second.
func (g *Gate) dispatch(now int64) {
	g.debtWake = math.MaxInt64
	g.dispAt = now
	if g.waiting == 0 {
		return
	}
	g.reap(now)
	if g.grantPass(now, true) {
		g.grantPass(now, false)
	}
}

// grantPass is one pass of dispatch over the waiting tiers, most
// important first. With yield, tiers that yield are skipped; it reports
// whether one was and a slot is still free.
func (g *Gate) grantPass(now int64, yield bool) (yielded bool) {
	for m := g.waitMask; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		t := &g.tiers[p]
		for t.waiting > 0 {
			if !g.fits(p, now) {
				// If only debt is in the way, wake when the higher tiers'
				// reservations have decayed enough (nothing else would
				// re-run dispatch).
				if free := g.capacity - g.inUse; free >= 1 {
					g.debtWake = g.demandWake(p, free, now)
				}
				return yielded && g.inUse < g.capacity
			}
			if yield && g.yields(p, now) {
				yielded = true
				break
			}
			q := g.choose(p)
			if q < 0 {
				break
			}
			lq := &g.queues[p*g.nq+q]
			r := lq.head
			if t.lifo && !g.lateFast(t, lq.head, now) {
				r = lq.tail
			}
			g.grant(r, now)
		}
	}
	return yielded && g.inUse < g.capacity
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
// timeout, a FIFO tier's switch to LIFO, the zero-capacity grace end (when
// tiers below the top wait), or demand decayed enough for the first
// blocked tier.
func (g *Gate) nextDeadline() int64 {
	d := int64(math.MaxInt64)
	filling := g.filling()
	for m := g.waitMask; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		t := &g.tiers[p]
		switch from := max(t.head.enq, t.since); {
		case p == 0 && filling:
			if g.maxWait > 0 {
				d = min(d, t.head.enq+g.maxWait)
			}
		case t.lifo:
			d = min(d, from+g.shortEff)
		default:
			d = min(d, from+g.longEff, t.nonEmptySince+g.longEff+1)
		}
	}
	if g.capacity == 0 && !filling && g.waitMask&^1 != 0 {
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
	if !g.fits(p, now) || !g.underCeilings(c.Leaf) {
		return Ticket{}, false
	}
	g.take(c, now)
	return Ticket{g: g, c: c, at: now}, true
}

// afterFast unlocks after a fast-path grant. The higher tiers' demand may
// have decayed since the last dispatch, so dispatch runs when lower tiers
// have waiters.
func (g *Gate) afterFast(now int64) {
	if g.waiting == 0 {
		g.mu.Unlock()
		return
	}
	g.dispatch(now)
	g.finish(now)
}

// zeroExpired: requests of tier p are shed at once rather than queued
// (zeroShedding, below the top tier).
func (g *Gate) zeroExpired(p int, now int64) bool {
	return p > 0 && g.zeroShedding(now)
}

func (g *Gate) shedNow(c Class) error {
	g.tiers[c.Priority].shed++
	g.immediate++
	return &ShedError{Reason: ReasonZeroCapacity, Class: c, RetryAfter: time.Duration(g.longEff)}
}

// park queues r and dispatches.
func (g *Gate) park(r *Request, now int64) {
	g.enqueue(r, now)
	g.dispatch(now)
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
	if g.zeroExpired(c.Priority, now) {
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
	if g.zeroExpired(c.Priority, now) {
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
	ts := &g.tiers[t.c.Priority]
	g.advanceDemand(ts, now)
	g.accrue(now)
	ts.inUse--
	g.inUse--
	g.nodeInUse[0]--
	for _, n := range g.tree.leafPath[t.c.Leaf] {
		g.nodeInUse[n]--
	}
	if observe {
		g.observeHold(ts, now-t.at)
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
// it. Capacity 0 after the pool has had capacity, with no server logging
// in, is a grace period: waiters keep waiting for Short'; if it is still 0
// then, the waiters below the top tier are shed with ReasonZeroCapacity and
// new requests below the top tier are shed at once until capacity returns.
// The top tier keeps its own timeouts.
func (g *Gate) SetCapacity(n int) {
	g.mu.Lock()
	g.setPool(n, g.loggingIn)
}

// SetPool is SetCapacity together with the number of the pool's servers
// that are logging in (whether or not the caller counts them in the
// capacity). While any is, or before the pool has ever had capacity, the
// pool is starting (warm-up, RECONNECT, churn): the top tier's waiters are
// not shed by CoDel but wait up to MaxWait (query_wait_timeout; no limit
// when 0), and nothing is shed for zero capacity. Lower tiers keep their
// CoDel timeouts. When the start ends, the top tier's waiters get their
// timeouts afresh from that moment (doc.go).
func (g *Gate) SetPool(capacity, loggingIn int) {
	g.mu.Lock()
	g.setPool(capacity, loggingIn)
}

// setPool does SetPool's work under the lock and unlocks.
func (g *Gate) setPool(n, loggingIn int) {
	n, loggingIn = max(n, 0), max(loggingIn, 0)
	now := g.now()
	wasFilling := g.filling()
	g.accrue(now)
	if n == 0 && g.capacity != 0 {
		g.zeroSince = now
	}
	g.capacity = n
	g.loggingIn = loggingIn
	if n > 0 {
		g.hadCap = true
	}
	if wasFilling && !g.filling() {
		// The servers are there: the top tier's queue starts being judged
		// now, not from when it formed behind the logins.
		t := &g.tiers[0]
		t.since = now
		if t.waiting > 0 {
			t.nonEmptySince = now
		}
	}
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
	LoggingIn                int           // servers logging in, as last told by SetPool
	Starting                 bool          // the pool is starting (logins in flight, or never had capacity): see SetPool
	HoldP50, Short, Long     time.Duration // hold-time estimate and the effective timeouts
	Fair                     bool          // the tree is in force (see Gate.Fair)
	ShedAtOnce               uint64        // requests shed without queueing (capacity 0)
	// InUseSeconds and CapacitySeconds are ∫inUse dt and ∫capacity dt
	// since the gate was created, in slot-seconds: the busy fraction over
	// any interval is the ratio of their increases between two snapshots.
	InUseSeconds, CapacitySeconds float64
	// Busy is InUseSeconds ÷ CapacitySeconds: the busy fraction over the
	// gate's life (0 before it has had capacity).
	Busy  float64
	Tiers []TierSnapshot
	Nodes []NodeSnapshot // preorder; Nodes[0] is the root (Path "")
}

// TierSnapshot is one priority tier.
type TierSnapshot struct {
	Priority int
	InUse    int // tickets held by this tier
	Waiting  int
	// Demand is the tier's demand estimate: its tickets plus waiters,
	// averaged over about 64 of its median hold times (doc.go, "Debt").
	Demand float64
	// HoldP50 is the median hold time of the tier's tickets (0 before the
	// first release).
	HoldP50 time.Duration
	// Debt is the number of free slots the tier must leave for the tiers
	// above it: their claim (their demand rounded, at least 1 while above
	// 0.05, at most their summed feedback slots: doc.go, "Debt"), less the
	// tickets they hold; 0 for the top tier.
	Debt float64
	// Reserved is the slots the tier keeps for itself against the tiers
	// below: its wait-feedback reservation, at least one, at most what its
	// demand claims (0 once its demand has faded).
	Reserved int
	// Allowed is how many tickets this tier and the tiers below it may hold
	// together now: capacity − max(what the tiers above claim, what they
	// hold). The tier's waiters are admitted while the tickets of this tier
	// and below are fewer (and no tier above waits).
	Allowed      int
	LIFO         bool
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
	g.accrue(now)
	for i := range g.tiers {
		g.maybeLeaveLIFO(&g.tiers[i], now)
	}
	s := Snapshot{
		Capacity:        g.capacity,
		InUse:           g.inUse,
		Waiting:         g.waiting,
		LoggingIn:       g.loggingIn,
		Starting:        g.filling(),
		InUseSeconds:    g.inUseArea / float64(time.Second),
		CapacitySeconds: g.capArea / float64(time.Second),
		HoldP50:         time.Duration(g.p50),
		Short:           time.Duration(g.shortEff),
		Long:            time.Duration(g.longEff),
		Fair:            g.fair,
		ShedAtOnce:      g.immediate,
		Tiers:           make([]TierSnapshot, g.ntiers),
		Nodes:           make([]NodeSnapshot, g.nn),
	}
	if g.capArea > 0 {
		s.Busy = g.inUseArea / g.capArea
	}
	for p := range g.tiers {
		t := &g.tiers[p]
		claim, held := g.above(p, now)
		if g.noDebt {
			claim = 0
		}
		g.advanceDemand(t, now)
		s.Tiers[p] = TierSnapshot{Priority: p, InUse: t.inUse, Waiting: t.waiting, Demand: t.demand, Reserved: g.reserveAsOf(t, now),
			HoldP50: time.Duration(t.holdP50), Debt: float64(max(claim-held, 0)), Allowed: g.capacity - max(claim, held),
			LIFO: t.lifo, ModeSwitches: t.modeSwitches, Granted: t.granted, Shed: t.shed}
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
