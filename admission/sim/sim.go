package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/pgturnstile/pgturnstile/admission"
)

// Epoch is simulated time zero. Every time in this package is an offset from
// it, so that results read as "t = 5 s" rather than as wall-clock dates.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is what the harness needs from the fake clock the gate was built
// with: the gate reads Now and arms timers through admission.Clock, the
// harness moves time and asks for the next armed deadline so that a gate
// timer is never skipped over. admission/fakeclock satisfies it.
type Clock interface {
	admission.Clock
	Advance(d time.Duration)
	NextDeadline() (time.Time, bool)
}

// Gate is the part of admission.Gate the harness drives. Tickets travel as
// any so that the harness can also drive the reference gate of its own tests.
// Submit must call done exactly once, synchronously: from Submit itself, from
// a later Release or SetCapacity, or from a timer fired by Clock.Advance. A
// done called from another goroutine would make the run depend on the
// scheduler, and the harness reports it as an anomaly when it arrives late.
type Gate interface {
	Submit(c admission.Class, done func(ticket any, err error))
	Release(ticket any)
	SetCapacity(n int)
}

// PoolGate is a Gate that is also told how many of its servers are
// logging in (admission.Gate.SetPool). The pool model uses it when the
// gate has it.
type PoolGate interface {
	Gate
	SetPool(capacity, loggingIn int)
}

// Source is one open-loop Poisson arrival stream of one class. Service
// times are exponential with mean Service. Each source draws from its own
// seeded generator, so adding a source or changing the gate does not change
// the arrivals or service times of another (common random numbers: "debt on"
// and "debt off" runs see the very same requests).
type Source struct {
	Name  string
	Class admission.Class
	// Rate is the mean number of arrivals per second.
	Rate float64
	// Service is the mean transaction (ticket hold) time.
	Service time.Duration
	// From and Until bound the interval in which the source sends; Until 0
	// means until the run stops sending.
	From, Until time.Duration
}

// Load returns the offered load of a source in slots (Erlangs): arrival
// rate × mean hold time.
func (s Source) Load() float64 { return s.Rate * s.Service.Seconds() }

// SourceForLoad returns a source that offers frac × capacity slots of load.
func SourceForLoad(name string, c admission.Class, frac float64, capacity int, service time.Duration) Source {
	return Source{Name: name, Class: c, Rate: frac * float64(capacity) / service.Seconds(), Service: service}
}

// Dist is a random duration: Fixed + an exponential variate of mean Exp +
// a uniform variate in [0, Uniform).
type Dist struct {
	Fixed, Exp, Uniform time.Duration
}

// Mean is the distribution's mean.
func (d Dist) Mean() time.Duration { return d.Fixed + d.Exp + d.Uniform/2 }

func (d Dist) draw(r *rand.Rand) time.Duration {
	x := d.Fixed
	if d.Exp > 0 {
		x += exp(r, d.Exp)
	}
	if d.Uniform > 0 {
		x += time.Duration(r.Int64N(int64(d.Uniform)))
	}
	return x
}

// Client is a group of N closed-loop clients of one class, as the
// integration tests run them: each sends a transaction, holds its ticket
// for a Service draw, waits a Think draw and sends the next; after a shed
// it waits a Backoff draw instead. All start at From (plus a first Think
// draw). Each client of the group draws from its own seeded generators
// (service, think and backoff separately), so the same client sees the
// same service times whatever the gate does.
type Client struct {
	Name    string
	Class   admission.Class
	N       int
	Service Dist
	Think   Dist
	Backoff Dist
	From    time.Duration
}

// CapacityStep sets the gate's capacity at At (a pool warming up with
// slow logins, a capacity that drops to 0). Without a PoolConfig only. A
// step at 0 is the gate's initial capacity (see Config.InitialCapacity).
type CapacityStep struct {
	At time.Duration
	N  int
}

// PoolConfig models the servers behind the gate as the pooler
// runs them: the gate's capacity follows live + connecting servers, new servers
// are created through a token bucket with a cap on connects in flight, and
// every server dies at each LossAt. The pool aims at Size servers at all
// times (min_pool_size = pool_size), so refilling after a loss does not
// depend on whether waiters happen to be queued.
type PoolConfig struct {
	Size          int
	CreateRate    float64 // creates per second
	CreateBurst   int
	MaxConnecting int
	ConnectTime   time.Duration
	LossAt        []time.Duration
	// StartEmpty starts the pool with no server: it opens them from time 0
	// (a cold start; the S8 scenarios). Otherwise it starts full.
	StartEmpty bool
}

// Config describes one run.
type Config struct {
	Seed    uint64
	Sources []Source
	Clients []Client
	// Capacity is the gate's fixed capacity, or the pool size when Pool is
	// set; utilisation is measured against it.
	Capacity int
	// Warmup and Measure give the measurement window [Warmup,
	// Warmup+Measure): requests arriving in it are counted, and slots are
	// time-averaged over it.
	Warmup, Measure time.Duration
	// Tail keeps the sources sending after the window so that the last
	// measured requests see the same load until they are decided; the run
	// then stops sending and drains.
	Tail time.Duration
	Pool *PoolConfig
	// CapacitySteps change the gate's capacity at given times (the gate
	// must have been built with the capacity in force at time 0).
	CapacitySteps []CapacityStep
	// OnStep, if set, is called after every event and every gate timer
	// step with the current time (scenario probes, e.g. the tier mode).
	OnStep func(now time.Duration)
}

// Outcome is what became of a request.
type Outcome uint8

const (
	Pending Outcome = iota // not decided yet
	Granted                // admitted; served to completion
	Shed                   // refused by the gate
	Aborted                // admitted, then its server died mid-transaction
)

// Request is the record of one arrival.
type Request struct {
	Source  int32
	Class   admission.Class
	Outcome Outcome
	Reason  admission.Reason // for Shed
	Arrive  time.Duration
	Decided time.Duration // grant or shed time
	Service time.Duration // drawn at arrival
	ticket  any
	client  *clientState // a closed-loop client's request; nil for a Source's
}

// Wait is the time the request spent in the gate.
func (r *Request) Wait() time.Duration { return r.Decided - r.Arrive }

// Sim is one run: the event loop, the servers and the records.
type Sim struct {
	cfg   Config
	clock Clock
	gate  Gate

	now    time.Duration // the loop's time; the clock is kept equal to it
	events eventQueue
	seq    uint64

	sources []*sourceState
	clients []*clientState
	stopArr time.Duration // sources stop sending here

	Requests []Request
	// Anomalies lists contract violations seen during the run (done called
	// twice or never, a grant over capacity, an unknown error type). A
	// scenario must fail when it is not empty.
	Anomalies []string

	tiers, leaves int
	inUse         int
	tierUse       []int
	leafUse       []int
	maxLeafUse    []int // highest leafUse right after any grant
	capacity      int   // the capacity last given to the gate
	lastAcct      time.Duration
	tierArea      []int64 // slot·ns within the window
	leafArea      []int64

	pool      *poolState
	undecided int
}

type sourceState struct {
	src    Source
	arrRng *rand.Rand
	svcRng *rand.Rand
}

// clientState is one closed-loop client.
type clientState struct {
	cl                        *Client
	group                     int32 // Request.Source: len(Sources) + index in Clients
	svcRng, thinkRng, backRng *rand.Rand
}

// InitialCapacity is the capacity the gate must be built with: that of a
// CapacityStep at time 0, else Capacity.
func (c Config) InitialCapacity() int {
	for _, st := range c.CapacitySteps {
		if st.At == 0 {
			return st.N
		}
	}
	return c.Capacity
}

// New builds a run. gate must have been built on clock, whose current time
// must be Epoch, with capacity cfg.InitialCapacity().
func New(cfg Config, clock Clock, gate Gate) *Sim {
	s := &Sim{cfg: cfg, clock: clock, gate: gate, capacity: cfg.InitialCapacity()}
	for i, src := range cfg.Sources {
		if src.Class.Priority+1 > s.tiers {
			s.tiers = src.Class.Priority + 1
		}
		if int(src.Class.Leaf)+1 > s.leaves {
			s.leaves = int(src.Class.Leaf) + 1
		}
		// Two streams per source, both derived from the run seed and the
		// source's index only.
		s.sources = append(s.sources, &sourceState{
			src:    src,
			arrRng: rand.New(rand.NewPCG(cfg.Seed, uint64(2*i+1))),
			svcRng: rand.New(rand.NewPCG(cfg.Seed, uint64(2*i+2))),
		})
	}
	for gi := range cfg.Clients {
		cl := &cfg.Clients[gi]
		if cl.Class.Priority+1 > s.tiers {
			s.tiers = cl.Class.Priority + 1
		}
		if int(cl.Class.Leaf)+1 > s.leaves {
			s.leaves = int(cl.Class.Leaf) + 1
		}
		for k := 0; k < cl.N; k++ {
			// Streams apart from the sources' (2i+1, 2i+2).
			base := uint64(1)<<40 + uint64(gi)<<24 + uint64(k)<<2
			s.clients = append(s.clients, &clientState{
				cl:       cl,
				group:    int32(len(cfg.Sources) + gi),
				svcRng:   rand.New(rand.NewPCG(cfg.Seed, base)),
				thinkRng: rand.New(rand.NewPCG(cfg.Seed, base+1)),
				backRng:  rand.New(rand.NewPCG(cfg.Seed, base+2)),
			})
		}
	}
	s.tierUse = make([]int, s.tiers)
	s.tierArea = make([]int64, s.tiers)
	s.leafUse = make([]int, s.leaves)
	s.maxLeafUse = make([]int, s.leaves)
	s.leafArea = make([]int64, s.leaves)
	if cfg.Pool != nil {
		s.pool = newPool(s, *cfg.Pool)
	}
	return s
}

// End is the end of the measurement window.
func (s *Sim) End() time.Duration { return s.cfg.Warmup + s.cfg.Measure }

// Run simulates until the window and its tail are over and every request is
// decided and served.
func (s *Sim) Run() {
	if got := s.clock.Now(); !got.Equal(Epoch) {
		s.anomaly("clock starts at %v, want Epoch", got)
	}
	s.stopArr = s.End() + s.cfg.Tail
	for i, st := range s.sources {
		s.scheduleArrival(i, st, st.src.From)
	}
	for _, c := range s.clients {
		s.scheduleClient(c, c.cl.From+c.cl.Think.draw(c.thinkRng))
	}
	for _, st := range s.cfg.CapacitySteps {
		if st.At > 0 {
			n := st.N
			s.at(st.At, func() { s.setCapacity(n) })
		}
	}
	if s.pool != nil {
		s.pool.start()
	}
	s.loop()
	s.account(s.now)
	for i := range s.Requests {
		if s.Requests[i].Outcome == Pending {
			s.anomaly("request %d (arrived %v) never decided", i, s.Requests[i].Arrive)
			break
		}
	}
	if s.inUse != 0 {
		s.anomaly("%d tickets still held after the drain", s.inUse)
	}
}

// loop runs events and gate timers in time order. At equal times the gate's
// timers go first: a waiter whose deadline is now is shed before a release
// at the same instant could grant it, which is the order a real clock gives
// (the timer was armed earlier).
func (s *Sim) loop() {
	for {
		te, haveEvent := time.Duration(math.MaxInt64), len(s.events) > 0
		if haveEvent {
			te = s.events[0].at
		}
		td, haveTimer := time.Duration(math.MaxInt64), false
		if d, ok := s.clock.NextDeadline(); ok {
			td, haveTimer = d.Sub(Epoch), true
			if td < s.now {
				td = s.now
			}
		}
		if !haveEvent {
			// Nothing left to feed the gate: let pending timers run out
			// (waiters reaped, debt timers) but never spin on a timer the
			// gate keeps re-arming with no waiters.
			if !haveTimer || td > s.now+time.Minute || s.undecided == 0 {
				return
			}
		}
		if haveTimer && td <= te {
			s.advanceTo(td)
		} else {
			ev := heap.Pop(&s.events).(*event)
			s.advanceTo(ev.at)
			ev.fn()
		}
		if s.cfg.OnStep != nil {
			s.cfg.OnStep(s.now)
		}
	}
}

// advanceTo moves the loop's time and the clock to t; timers due by t fire
// inside Advance and see s.now = t.
func (s *Sim) advanceTo(t time.Duration) {
	if t < s.now {
		t = s.now
	}
	d := t - s.now
	s.now = t
	s.clock.Advance(d)
}

func (s *Sim) at(t time.Duration, fn func()) {
	s.seq++
	heap.Push(&s.events, &event{at: t, seq: s.seq, fn: fn})
}

func (s *Sim) anomaly(format string, args ...any) {
	if len(s.Anomalies) < 20 {
		s.Anomalies = append(s.Anomalies, fmt.Sprintf("t=%v: ", s.now)+fmt.Sprintf(format, args...))
	}
}

// exp draws an exponential variate with the given mean.
func exp(r *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(mean))
}

func (s *Sim) scheduleArrival(i int, st *sourceState, after time.Duration) {
	if st.src.Rate <= 0 {
		return
	}
	t := after + time.Duration(st.arrRng.ExpFloat64()/st.src.Rate*float64(time.Second))
	if t >= s.stopArr || (st.src.Until > 0 && t >= st.src.Until) {
		return
	}
	s.at(t, func() { s.arrive(i, st) })
}

func (s *Sim) arrive(i int, st *sourceState) {
	idx := len(s.Requests)
	s.Requests = append(s.Requests, Request{
		Source:  int32(i),
		Class:   st.src.Class,
		Arrive:  s.now,
		Service: exp(st.svcRng, st.src.Service),
	})
	s.undecided++
	// Schedule the next arrival before submitting, so the stream does not
	// depend on what the gate does with this one.
	s.scheduleArrival(i, st, s.now)
	s.gate.Submit(st.src.Class, func(ticket any, err error) { s.decided(idx, ticket, err) })
}

// scheduleClient sends c's next transaction at t, unless the run has
// stopped sending by then.
func (s *Sim) scheduleClient(c *clientState, t time.Duration) {
	if t >= s.stopArr {
		return
	}
	s.at(t, func() { s.clientSend(c) })
}

func (s *Sim) clientSend(c *clientState) {
	idx := len(s.Requests)
	s.Requests = append(s.Requests, Request{
		Source:  c.group,
		Class:   c.cl.Class,
		Arrive:  s.now,
		Service: c.cl.Service.draw(c.svcRng),
		client:  c,
	})
	s.undecided++
	s.gate.Submit(c.cl.Class, func(ticket any, err error) { s.decided(idx, ticket, err) })
}

func (s *Sim) decided(idx int, ticket any, err error) {
	r := &s.Requests[idx]
	if r.Outcome != Pending {
		s.anomaly("request %d decided twice (%v, then err=%v)", idx, r.Outcome, err)
		return
	}
	r.Decided = s.now
	s.undecided--
	if err != nil {
		if c := r.client; c != nil {
			s.scheduleClient(c, s.now+c.cl.Backoff.draw(c.backRng))
		}
		r.Outcome = Shed
		var se *admission.ShedError
		if errors.As(err, &se) {
			r.Reason = se.Reason
			if se.Class != r.Class {
				s.anomaly("request %d shed as %+v, submitted as %+v", idx, se.Class, r.Class)
			}
		} else {
			s.anomaly("request %d: error %v is not a *ShedError", idx, err)
		}
		return
	}
	r.Outcome = Granted
	r.ticket = ticket
	s.account(s.now)
	s.inUse++
	s.tierUse[r.Class.Priority]++
	s.leafUse[r.Class.Leaf]++
	if u := s.leafUse[r.Class.Leaf]; u > s.maxLeafUse[r.Class.Leaf] {
		s.maxLeafUse[r.Class.Leaf] = u
	}
	if s.inUse > s.capacity {
		s.anomaly("grant of request %d makes %d tickets on capacity %d", idx, s.inUse, s.capacity)
	}
	if s.pool != nil {
		s.pool.serve(idx)
		return
	}
	s.startService(idx)
}

// startService runs the transaction; its server (if modelled) is busy
// until the completion, unless it dies first.
func (s *Sim) startService(idx int) {
	s.at(s.now+s.Requests[idx].Service, func() { s.complete(idx) })
}

func (s *Sim) complete(idx int) {
	r := &s.Requests[idx]
	if r.Outcome != Granted {
		return // aborted by a server loss; its ticket is already back
	}
	if s.pool != nil {
		s.pool.finished(idx)
	}
	c := r.client
	s.release(idx)
	s.thinkAfter(c)
}

// thinkAfter schedules a closed-loop client's next transaction after its
// last one ended (completed or aborted).
func (s *Sim) thinkAfter(c *clientState) {
	if c != nil {
		s.scheduleClient(c, s.now+c.cl.Think.draw(c.thinkRng))
	}
}

// release returns the ticket; the gate may grant waiters from inside.
func (s *Sim) release(idx int) {
	r := &s.Requests[idx]
	s.account(s.now)
	s.inUse--
	s.tierUse[r.Class.Priority]--
	s.leafUse[r.Class.Leaf]--
	t := r.ticket
	r.ticket = nil
	s.gate.Release(t)
}

func (s *Sim) setCapacity(n int) {
	s.capacity = n
	s.gate.SetCapacity(n)
}

// setPool gives the gate its capacity and the logins in flight (SetPool
// when the gate has it).
func (s *Sim) setPool(n, loggingIn int) {
	pg, ok := s.gate.(PoolGate)
	if !ok {
		if n != s.capacity {
			s.setCapacity(n)
		}
		return
	}
	s.capacity = n
	pg.SetPool(n, loggingIn)
}

// account adds the slots held since the last change to the time averages,
// clipped to the measurement window.
func (s *Sim) account(now time.Duration) {
	from, to := max(s.lastAcct, s.cfg.Warmup), min(now, s.End())
	s.lastAcct = now
	if to <= from {
		return
	}
	dt := int64(to - from)
	for p, u := range s.tierUse {
		s.tierArea[p] += int64(u) * dt
	}
	for l, u := range s.leafUse {
		s.leafArea[l] += int64(u) * dt
	}
}

// Queued is the number of requests submitted and not decided yet, i.e.
// waiting in the gate.
func (s *Sim) Queued() int { return s.undecided }

// Now is the simulated time.
func (s *Sim) Now() time.Duration { return s.now }

// InUse returns the tickets held now by each leaf (as counted by the
// harness: granted and not yet released).
func (s *Sim) LeafInUse(l admission.LeafID) int { return s.leafUse[l] }

// MaxLeafInUse is the highest number of tickets a leaf held right after any
// grant during the whole run.
func (s *Sim) MaxLeafInUse(l admission.LeafID) int { return s.maxLeafUse[l] }

// TierSlots is the time-averaged number of tickets tier p held in the window.
func (s *Sim) TierSlots(p int) float64 {
	if p >= len(s.tierArea) {
		return 0
	}
	return float64(s.tierArea[p]) / float64(s.cfg.Measure)
}

// LeafSlots is the time-averaged number of tickets leaf l held in the window.
func (s *Sim) LeafSlots(l admission.LeafID) float64 {
	if int(l) >= len(s.leafArea) {
		return 0
	}
	return float64(s.leafArea[l]) / float64(s.cfg.Measure)
}

// Utilisation is the time-averaged number of held tickets in the window
// divided by Config.Capacity.
func (s *Sim) Utilisation() float64 {
	var a int64
	for _, x := range s.tierArea {
		a += x
	}
	return float64(a) / float64(s.cfg.Measure) / float64(s.cfg.Capacity)
}

// Filter selects requests.
type Filter func(*Request) bool

// InWindow selects requests that arrived in the measurement window.
func (s *Sim) InWindow() Filter {
	return ArrivedIn(s.cfg.Warmup, s.End())
}

// ArrivedIn selects requests that arrived in [from, to).
func ArrivedIn(from, to time.Duration) Filter {
	return func(r *Request) bool { return r.Arrive >= from && r.Arrive < to }
}

// Tier selects requests of priority p.
func Tier(p int) Filter { return func(r *Request) bool { return r.Class.Priority == p } }

// Leaf selects requests of leaf l.
func Leaf(l admission.LeafID) Filter { return func(r *Request) bool { return r.Class.Leaf == l } }

// And combines filters.
func And(fs ...Filter) Filter {
	return func(r *Request) bool {
		for _, f := range fs {
			if !f(r) {
				return false
			}
		}
		return true
	}
}

// Counts are the outcomes of a set of requests.
type Counts struct {
	Arrived, Granted, Shed, Aborted int
	ByReason                        map[admission.Reason]int
}

// Success is the admitted fraction (aborted requests were admitted).
func (c Counts) Success() float64 {
	if c.Arrived == 0 {
		return 1
	}
	return float64(c.Granted+c.Aborted) / float64(c.Arrived)
}

// ShedRatio is the shed fraction.
func (c Counts) ShedRatio() float64 {
	if c.Arrived == 0 {
		return 0
	}
	return float64(c.Shed) / float64(c.Arrived)
}

// Count tallies the requests f selects.
func (s *Sim) Count(f Filter) Counts {
	c := Counts{ByReason: map[admission.Reason]int{}}
	for i := range s.Requests {
		r := &s.Requests[i]
		if !f(r) {
			continue
		}
		c.Arrived++
		switch r.Outcome {
		case Granted:
			c.Granted++
		case Shed:
			c.Shed++
			c.ByReason[r.Reason]++
		case Aborted:
			c.Aborted++
		}
	}
	return c
}

// Waits returns the admission waits of the admitted requests f selects,
// sorted ascending.
func (s *Sim) Waits(f Filter) []time.Duration {
	var w []time.Duration
	for i := range s.Requests {
		r := &s.Requests[i]
		if (r.Outcome == Granted || r.Outcome == Aborted) && f(r) {
			w = append(w, r.Wait())
		}
	}
	slices.Sort(w)
	return w
}

// Percentile is the nearest-rank q-quantile (0 < q ≤ 1) of sorted; 0 for
// an empty slice.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// Max is the largest of sorted; 0 for an empty slice.
func Max(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)-1]
}

// ---- servers ----

type poolState struct {
	s   *Sim
	cfg PoolConfig
	lim *rate.Limiter

	live, idle, connecting int
	waitingForServer       []int // granted requests whose server is still connecting
	busy                   map[int]struct{}
	wakeAt                 time.Duration // a maintenance wake-up is scheduled at wakeAt (0: none)

	// ConnectStarts are the times connects began, in order.
	ConnectStarts []time.Duration
	// MaxConnecting is the most connects ever in flight together.
	MaxConnecting int
	// LiveLog records (time, live) at every change of live.
	LiveLog []LivePoint
}

// LivePoint is a change in the number of live servers.
type LivePoint struct {
	At   time.Duration
	Live int
}

func newPool(s *Sim, cfg PoolConfig) *poolState {
	return &poolState{
		s:   s,
		cfg: cfg,
		// x/time/rate is used with explicit times only (AllowN, TokensAt),
		// so it follows the simulated clock, never the wall clock. It starts
		// full, as the pooler's does.
		lim:  rate.NewLimiter(rate.Limit(cfg.CreateRate), cfg.CreateBurst),
		busy: map[int]struct{}{},
	}
}

// Pool exposes the server model's records (nil without a pool).
func (s *Sim) Pool() *PoolStats {
	if s.pool == nil {
		return nil
	}
	return &PoolStats{
		ConnectStarts: s.pool.ConnectStarts,
		MaxConnecting: s.pool.MaxConnecting,
		LiveLog:       s.pool.LiveLog,
	}
}

// PoolStats are the server model's records.
type PoolStats struct {
	ConnectStarts []time.Duration
	MaxConnecting int
	LiveLog       []LivePoint
}

// LiveAt returns the number of live servers at t.
func (p *PoolStats) LiveAt(t time.Duration) int {
	live := 0
	for _, lp := range p.LiveLog {
		if lp.At > t {
			break
		}
		live = lp.Live
	}
	return live
}

// FirstLive returns the first time at or after from when at least n servers
// were live, and false if that never happened.
func (p *PoolStats) FirstLive(from time.Duration, n int) (time.Duration, bool) {
	if p.LiveAt(from) >= n {
		return from, true
	}
	for _, lp := range p.LiveLog {
		if lp.At >= from && lp.Live >= n {
			return lp.At, true
		}
	}
	return 0, false
}

// start begins with a full pool (a warm pool; the bucket is full too, as
// x/time/rate starts full), or with an empty one that starts connecting.
func (p *poolState) start() {
	if !p.cfg.StartEmpty {
		p.live, p.idle = p.cfg.Size, p.cfg.Size
	}
	p.logLive()
	for _, t := range p.cfg.LossAt {
		p.s.at(t, p.lose)
	}
	if p.cfg.StartEmpty {
		p.maintain()
	}
}

func (p *poolState) t() time.Time { return Epoch.Add(p.s.now) }

func (p *poolState) logLive() {
	p.LiveLog = append(p.LiveLog, LivePoint{At: p.s.now, Live: p.live})
}

// serve gives a granted request a server: an idle one, or the next one to
// finish connecting (the gate only grants against live + connecting).
func (p *poolState) serve(idx int) {
	if p.idle > 0 {
		p.idle--
		p.busy[idx] = struct{}{}
		p.s.startService(idx)
		return
	}
	if len(p.waitingForServer) >= p.connecting {
		p.s.anomaly("request %d granted with no idle or connecting server (live %d, connecting %d)", idx, p.live, p.connecting)
	}
	p.waitingForServer = append(p.waitingForServer, idx)
}

func (p *poolState) finished(idx int) {
	delete(p.busy, idx)
	p.handOver()
}

// handOver gives a server that just became free to a request waiting for
// one, or parks it idle.
func (p *poolState) handOver() {
	if len(p.waitingForServer) > 0 {
		idx := p.waitingForServer[0]
		p.waitingForServer = p.waitingForServer[1:]
		p.busy[idx] = struct{}{}
		p.s.startService(idx)
		return
	}
	p.idle++
}

// lose kills every live server. Transactions on them fail; their tickets
// come back only after the gate's capacity has dropped, so the releases
// cannot grant waiters onto servers that no longer exist.
func (p *poolState) lose() {
	var aborted []int
	for idx := range p.busy {
		aborted = append(aborted, idx)
	}
	slices.Sort(aborted) // map order is random; keep the run deterministic
	clear(p.busy)
	p.live, p.idle = 0, 0
	p.logLive()
	p.maintain() // start replacements first, so capacity drops to what is coming
	p.s.setPool(p.live+p.connecting, p.connecting)
	for _, idx := range aborted {
		p.s.Requests[idx].Outcome = Aborted // its completion event is now void
		c := p.s.Requests[idx].client
		p.s.release(idx)
		p.s.thinkAfter(c)
	}
}

// maintain starts connects while the pool is short, a connect slot is free
// and the bucket has a token; otherwise it wakes itself when the next token
// is due. It reports capacity changes to the gate.
func (p *poolState) maintain() {
	started := false
	for p.live+p.connecting < p.cfg.Size && p.connecting < p.cfg.MaxConnecting {
		if !p.lim.AllowN(p.t(), 1) {
			p.wakeForToken()
			break
		}
		p.connecting++
		started = true
		p.MaxConnecting = max(p.MaxConnecting, p.connecting)
		p.ConnectStarts = append(p.ConnectStarts, p.s.now)
		p.s.at(p.s.now+p.cfg.ConnectTime, p.connected)
	}
	if started {
		p.s.setPool(p.live+p.connecting, p.connecting)
	}
}

func (p *poolState) wakeForToken() {
	missing := 1 - p.lim.TokensAt(p.t())
	d := time.Duration(math.Ceil(missing / p.cfg.CreateRate * float64(time.Second)))
	d = max(d, time.Nanosecond)
	at := p.s.now + d
	if p.wakeAt != 0 && p.wakeAt <= at {
		return
	}
	p.wakeAt = at
	p.s.at(at, func() {
		if p.wakeAt == at {
			p.wakeAt = 0
		}
		p.maintain()
	})
}

func (p *poolState) connected() {
	p.connecting--
	p.live++
	p.logLive()
	p.handOver()
	// live + connecting did not change, so the gate's capacity stands, but
	// one login fewer is in flight; a freed connect slot may start the
	// next create.
	p.s.setPool(p.live+p.connecting, p.connecting)
	p.maintain()
}

// ---- event queue ----

type event struct {
	at  time.Duration
	seq uint64 // ties resolve in scheduling order, keeping runs deterministic
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return e
}

// Wrap adapts an admission.Gate to the harness.
func Wrap(g *admission.Gate) Gate { return gateAdapter{g} }

type gateAdapter struct{ g *admission.Gate }

func (a gateAdapter) Submit(c admission.Class, done func(any, error)) {
	a.g.Submit(c, func(t admission.Ticket, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(t, nil)
	})
}

func (a gateAdapter) Release(t any) { a.g.Release(t.(admission.Ticket)) }

func (a gateAdapter) SetCapacity(n int) { a.g.SetCapacity(n) }

func (a gateAdapter) SetPool(capacity, loggingIn int) { a.g.SetPool(capacity, loggingIn) }
