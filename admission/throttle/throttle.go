package throttle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Throttle rejects requests locally, with a probability that grows as the
// database stops accepting them (Google SRE, "Handling Overload"):
//
//	P = max(0, (requests − K·accepts) / (requests + minRate·window))
//
// capped at the maximum rejection probability. requests counts every request
// the application attempted in the window, those the Throttle rejected
// included; accepts counts those the backend accepted (see IsOverload).
//
// Priorities make it fair in the right direction: for priority p, requests also
// includes the non-accepted requests of every more important priority q < p, so
// trouble at a high priority throttles the lower ones first, and trouble at a
// low priority never throttles a higher one.
//
// A Throttle is safe for concurrent use; one mutex guards it (a client-side
// throttle sees little contention, and bucket rotation cannot be made
// consistent with per-bucket atomics).
type Throttle struct {
	k        float64
	floor    float64 // minRate × window: the +1 of the SRE formula, per window
	maxP     float64
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
	attempts int
	base     time.Duration
	maxDelay time.Duration
	budget   float64 // retries allowed per request in the window

	mu       sync.Mutex
	rnd      *rand.Rand // nil: the goroutine-safe top-level generator
	requests []windowedCounter
	accepts  []windowedCounter
	retries  windowedCounter
}

type config struct {
	k          float64
	window     time.Duration
	buckets    int
	minRate    float64
	maxP       float64
	priorities int
	now        func() time.Time
	sleep      func(ctx context.Context, d time.Duration) error
	src        rand.Source
	attempts   int
	base       time.Duration
	maxDelay   time.Duration
	budget     float64
}

// Option configures a Throttle.
type Option func(*config)

// K sets the ratio of requests to accepts the Throttle lets through before
// it starts rejecting (default 2, SRE's value). It must be ≥ 1: below 1 it
// would reject traffic that the backend accepts in full. Lower values shed
// more eagerly but recover more slowly once the backend heals: locally
// rejected requests keep counting while accepts only grow by what is sent.
func K(k float64) Option { return func(c *config) { c.k = k } }

// Window sets the length of the sliding window and how many buckets it is
// kept in (default 60 s in 10 buckets).
//
// The Throttle needs about one window to forget an incident: after the
// database heals, P decays only as the buckets that saw the overload rotate
// out. With many application instances, a 60 s window means up to a minute of
// self-imposed unavailability after an incident that the pooler may have
// resolved within seconds, so a database application will often want 10–30 s.
// Much shorter windows see too few requests to tell overload from noise, and
// the floor (minRate × window) shrinks with the window, so a shorter window also
// lets more failures pass before it throttles.
func Window(d time.Duration, buckets int) Option {
	return func(c *config) { c.window, c.buckets = d, buckets }
}

// MinRate sets the request rate per second that is never throttled even when
// nothing is accepted (default 1/s): it is minRate × window in the SRE
// formula's denominator, the probe that finds out when the backend is back.
func MinRate(perSecond float64) Option { return func(c *config) { c.minRate = perSecond } }

// MaxRejectProbability caps P (default 0.8, as Envoy's admission control does):
// at least 20 % of demand still reaches the database while it is overloaded,
// so the Throttle notices recovery within a bucket or two instead of relying
// on the 1/s floor alone. The pooler sheds at the cost of one round trip, so
// that probe traffic is cheap. Set 1 to use the pure SRE formula, where a
// client with demand far above what is accepted sends ≈ K·accepted + minRate.
func MaxRejectProbability(p float64) Option { return func(c *config) { c.maxP = p } }

// Priorities sets the number of priority tiers, 0 the most important
// (default 4: Critical, High, Medium, Low). Priorities outside 0…n−1 passed to
// the methods are clamped into that range.
func Priorities(n int) Option { return func(c *config) { c.priorities = n } }

// Now sets the clock (default time.Now); tests inject a fake.
func Now(now func() time.Time) Option { return func(c *config) { c.now = now } }

// Sleep sets how Do waits between attempts (default: a timer that returns
// ctx.Err() early if ctx ends first); tests inject a recorder.
func Sleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *config) { c.sleep = sleep }
}

// Rand sets the random source for the rejection coin and the backoff jitter
// (default: math/rand/v2's goroutine-safe generator). The Throttle only uses
// it under its mutex, so a plain rand.NewPCG(seed1, seed2) is fine; tests use
// fixed seeds.
func Rand(src rand.Source) Option { return func(c *config) { c.src = src } }

// Retry sets Do's retry schedule: at most attempts tries in all (default 3,
// SRE's value), separated by exponential backoff with full jitter, a random
// delay in [0, min(maxDelay, base·2ⁿ)) before retry n+1 (defaults 10 ms and
// 1 s). attempts 1 disables retries.
func Retry(attempts int, base, maxDelay time.Duration) Option {
	return func(c *config) { c.attempts, c.base, c.maxDelay = attempts, base, maxDelay }
}

// RetryBudget sets the fraction of requests in the window that may be retries
// (default 0.1, SRE's per-client budget). Retries count as requests too.
//
// The budget is what keeps retries from multiplying load during an outage:
// without it, every failing request becomes up to three. The price is that a
// client with fewer than 1/fraction requests in a window (fewer than 10 per
// minute by default) cannot retry at all; such a client adds no meaningful
// load, and its caller's own retry logic is the right place to handle failure.
func RetryBudget(fraction float64) Option { return func(c *config) { c.budget = fraction } }

// New returns a Throttle. It panics on option values that make no sense
// (K < 1, a non-positive window, no buckets, a negative rate or budget, a
// probability outside [0, 1], no priorities, fewer than one attempt): those are
// programming errors, not conditions to handle at run time.
func New(opts ...Option) *Throttle {
	c := config{
		k:          2,
		window:     60 * time.Second,
		buckets:    10,
		minRate:    1,
		maxP:       0.8,
		priorities: 4,
		now:        time.Now,
		sleep:      sleepCtx,
		attempts:   3,
		base:       10 * time.Millisecond,
		maxDelay:   time.Second,
		budget:     0.1,
	}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case !(c.k >= 1):
		panic(fmt.Sprintf("throttle: K must be ≥ 1, got %v", c.k))
	case c.buckets < 1 || c.window < time.Duration(c.buckets):
		panic(fmt.Sprintf("throttle: window %v in %d buckets", c.window, c.buckets))
	case !(c.minRate >= 0):
		panic(fmt.Sprintf("throttle: negative minimum rate %v", c.minRate))
	case !(c.maxP >= 0 && c.maxP <= 1):
		panic(fmt.Sprintf("throttle: maximum rejection probability %v outside [0, 1]", c.maxP))
	case c.priorities < 1:
		panic(fmt.Sprintf("throttle: %d priorities", c.priorities))
	case c.attempts < 1 || c.base < 0 || c.maxDelay < c.base:
		panic(fmt.Sprintf("throttle: retry schedule %d attempts, %v, %v", c.attempts, c.base, c.maxDelay))
	case !(c.budget >= 0):
		panic(fmt.Sprintf("throttle: negative retry budget %v", c.budget))
	case c.now == nil || c.sleep == nil:
		panic("throttle: nil clock or sleep")
	}
	t := &Throttle{
		k:        c.k,
		floor:    c.minRate * c.window.Seconds(),
		maxP:     c.maxP,
		now:      c.now,
		sleep:    c.sleep,
		attempts: c.attempts,
		base:     c.base,
		maxDelay: c.maxDelay,
		budget:   c.budget,
		requests: make([]windowedCounter, c.priorities),
		accepts:  make([]windowedCounter, c.priorities),
	}
	if c.src != nil {
		t.rnd = rand.New(c.src)
	}
	now := c.now()
	for p := range c.priorities {
		t.requests[p] = newWindowedCounter(now, c.window, c.buckets)
		t.accepts[p] = newWindowedCounter(now, c.window, c.buckets)
	}
	t.retries = newWindowedCounter(now, c.window, c.buckets)
	return t
}

func (t *Throttle) clamp(p int) int {
	return max(0, min(p, len(t.requests)-1))
}

// Allow decides whether a request at priority p should be sent. A false is
// counted as a request that was not accepted (the SRE book counts local
// rejections, which is what lets P rise above the accepted share); a true
// counts nothing yet: report the outcome with Observe.
func (t *Throttle) Allow(p int) bool {
	ok, _ := t.allow(p)
	return ok
}

// allow also returns the probability it used, for the rejection's DETAIL.
func (t *Throttle) allow(p int) (bool, float64) {
	p = t.clamp(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	prob := t.probability(p, now)
	// No coin at P = 0: a healthy throttle consumes no randomness, which also
	// keeps seeded tests of the backoff jitter independent of Allow.
	if prob == 0 || t.float64() >= prob {
		return true, prob
	}
	t.requests[p].add(now, 1)
	return false, prob
}

// Observe records the outcome of a request at priority p that Allow let
// through: accepted unless IsOverload(err). This package's own rejection
// errors are ignored, because Allow already counted them.
func (t *Throttle) Observe(p int, err error) {
	if errors.Is(err, ErrRejected) {
		return
	}
	t.record(p, !IsOverload(err))
}

func (t *Throttle) record(p int, accepted bool) {
	p = t.clamp(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.requests[p].add(now, 1)
	if accepted {
		t.accepts[p].add(now, 1)
	}
}

// RejectProbability returns the probability with which Allow(p) would reject
// now.
func (t *Throttle) RejectProbability(p int) float64 {
	p = t.clamp(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.probability(p, t.now())
}

// probability is the formula, under t.mu.
func (t *Throttle) probability(p int, now time.Time) float64 {
	requests := float64(t.requests[p].get(now))
	for q := range p {
		requests += float64(t.requests[q].get(now) - t.accepts[q].get(now))
	}
	accepts := float64(t.accepts[p].get(now))
	prob := (requests - t.k*accepts) / (requests + t.floor)
	if !(prob > 0) { // also catches 0/0 with a zero floor and no traffic
		return 0
	}
	return min(prob, t.maxP)
}

// float64 draws a uniform number in [0, 1), under t.mu.
func (t *Throttle) float64() float64 {
	if t.rnd != nil {
		return t.rnd.Float64()
	}
	return rand.Float64()
}
