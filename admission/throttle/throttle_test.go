package throttle

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// fakeClock is a manual clock for the Now option.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock               { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

var errShed = &pgconn.PgError{Severity: "ERROR", Code: "53000", Message: MessagePrefix + " (overloaded)"}

// observe records accepted outcomes and failures at priority p.
func observe(th *Throttle, p, accepted, failed int) {
	for range accepted {
		th.Observe(p, nil)
	}
	for range failed {
		th.Observe(p, errShed)
	}
}

// §4.1: requests 100, accepts 10, K 2, floor 1/s × 60 s:
// P = (100 − 2·10) / (100 + 60) = 0.5.
func TestRejectProbabilitySpecCase(t *testing.T) {
	clk := newFakeClock()
	th := New(Now(clk.Now))
	observe(th, 0, 10, 90)
	if got := th.RejectProbability(0); got != 0.5 {
		t.Fatalf("P = %v, want 0.5", got)
	}
	// Later in the same window nothing changes; once the window has passed,
	// everything is forgotten.
	clk.Advance(53 * time.Second)
	if got := th.RejectProbability(0); got != 0.5 {
		t.Fatalf("P after 53 s = %v, want 0.5", got)
	}
	clk.Advance(7 * time.Second)
	if got := th.RejectProbability(0); got != 0 {
		t.Fatalf("P after one window = %v, want 0", got)
	}
}

func TestRejectProbabilityFormula(t *testing.T) {
	for _, c := range []struct {
		name             string
		opts             []Option
		accepted, failed int
		want             float64
	}{
		{"healthy", nil, 100, 0, 0},
		{"K·accepts covers requests", nil, 50, 50, 0},
		{"floor absorbs a few failures", nil, 0, 10, 10.0 / 70},
		{"K=1.5", []Option{K(1.5)}, 20, 80, (100 - 30.0) / 160},
		{"minRate 2/s", []Option{MinRate(2)}, 10, 90, 80.0 / 220},
		{"window 20 s", []Option{Window(20*time.Second, 10)}, 10, 90, 80.0 / 120},
		// Uncapped this is 1000/1060 = 0.943.
		{"cap", nil, 0, 1000, 0.8},
		{"no cap", []Option{MaxRejectProbability(1)}, 0, 1000, 1000.0 / 1060},
		{"zero floor, no traffic", []Option{MinRate(0)}, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newFakeClock()
			th := New(append([]Option{Now(clk.Now)}, c.opts...)...)
			observe(th, 0, c.accepted, c.failed)
			if got := th.RejectProbability(0); got != c.want {
				t.Fatalf("P = %v, want %v", got, c.want)
			}
		})
	}
}

// Failures at a priority throttle that priority and every less important one,
// never a more important one.
func TestHigherPriorityFailuresThrottleLowerOnly(t *testing.T) {
	clk := newFakeClock()
	th := New(Now(clk.Now))
	observe(th, High, 0, 20)
	want := []float64{0, 20.0 / 80, 20.0 / 80, 20.0 / 80}
	for p, w := range want {
		if got := th.RejectProbability(p); got != w {
			t.Fatalf("after high failures: P(%d) = %v, want %v", p, got, w)
		}
	}
	// Accepts at Medium offset its own requests and the 20 inherited ones:
	// (20 + 10 − 2·10) / (30 + 60).
	observe(th, Medium, 10, 0)
	if got, w := th.RejectProbability(Medium), 10.0/90; got != w {
		t.Fatalf("P(medium) = %v, want %v", got, w)
	}
	// Low inherits High's 20 failures but not Medium's accepted requests.
	if got, w := th.RejectProbability(Low), 20.0/80; got != w {
		t.Fatalf("P(low) = %v, want %v", got, w)
	}
	// Failures at Low change nothing above it.
	observe(th, Low, 0, 40)
	for p, w := range []float64{0, 20.0 / 80, 10.0 / 90, 60.0 / 120} {
		if got := th.RejectProbability(p); got != w {
			t.Fatalf("after low failures: P(%d) = %v, want %v", p, got, w)
		}
	}
	// Out-of-range priorities are clamped, not a panic.
	if got, w := th.RejectProbability(-5), 0.0; got != w {
		t.Fatalf("P(-5) = %v, want P(0) = %v", got, w)
	}
	if got, w := th.RejectProbability(99), 60.0/120; got != w {
		t.Fatalf("P(99) = %v, want P(3) = %v", got, w)
	}
}

func TestAllow(t *testing.T) {
	clk := newFakeClock()
	th := New(Now(clk.Now), MinRate(0), Rand(rand.NewPCG(1, 2)))

	// P = 0: always allowed, nothing counted.
	for range 1000 {
		if !th.Allow(0) {
			t.Fatal("rejected at P = 0")
		}
	}
	if got := th.requests[0].get(clk.Now()); got != 0 {
		t.Fatalf("allowed requests counted %d, want 0 (Observe counts them)", got)
	}

	// 400 requests, 100 accepted, K = 2: P = 200/400 = 0.5. Every local
	// rejection is counted as a request, so P rises while we draw; compare the
	// number of rejections with the expectation computed step by step.
	observe(th, 0, 100, 300)
	var rejected int
	var expected float64
	for range 2000 {
		expected += th.RejectProbability(0)
		if !th.Allow(0) {
			rejected++
		}
	}
	if got := th.requests[0].get(clk.Now()); got != int64(400+rejected) {
		t.Fatalf("requests = %d, want 400 + %d local rejections", got, rejected)
	}
	// Binomial-like spread: sd ≤ √(2000·0.25) ≈ 22; allow 5 sd.
	if diff := float64(rejected) - expected; diff < -110 || diff > 110 {
		t.Fatalf("rejected %d, expected %.0f", rejected, expected)
	}
	// The cap keeps P at 0.8 however many local rejections pile up.
	if got := th.RejectProbability(0); got != 0.8 {
		t.Fatalf("P = %v, want the cap 0.8", got)
	}
}

func TestObserveClassifies(t *testing.T) {
	clk := newFakeClock()
	th := New(Now(clk.Now))
	th.Observe(0, nil)
	th.Observe(0, &pgconn.PgError{Code: "23505"}) // unique violation: the backend worked
	th.Observe(0, errShed)
	th.Observe(0, newRejectedError(0, "x", 0.5, time.Second)) // counted by Allow, ignored here
	if r, a := th.requests[0].get(clk.Now()), th.accepts[0].get(clk.Now()); r != 3 || a != 2 {
		t.Fatalf("requests %d accepts %d, want 3 and 2", r, a)
	}
}

func TestNewRejectsNonsense(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  Option
	}{
		{"K<1", K(0.5)},
		{"K NaN", K(nanValue())},
		{"no buckets", Window(time.Minute, 0)},
		{"zero window", Window(0, 10)},
		{"negative rate", MinRate(-1)},
		{"probability > 1", MaxRejectProbability(1.5)},
		{"no priorities", Priorities(0)},
		{"no attempts", Retry(0, time.Millisecond, time.Second)},
		{"cap below base", Retry(3, time.Second, time.Millisecond)},
		{"negative budget", RetryBudget(-0.1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("New did not panic")
				}
			}()
			New(c.opt)
		})
	}
}

func nanValue() float64 { zero := 0.0; return zero / zero }

func TestRejectedErrorShape(t *testing.T) {
	var err error = newRejectedError(Low, "batch", 0.75, 1500*time.Millisecond)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatal("a local rejection must unwrap to *pgconn.PgError")
	}
	want := pgconn.PgError{
		Severity:            "ERROR",
		SeverityUnlocalized: "ERROR",
		Code:                "53000",
		Message:             "pgturnstile: transaction rejected by admission control (client throttle)",
		Detail:              "reason=client_throttle priority=low category=batch waited_ms=0 retry_after_ms=1500",
		Hint:                "The database is shedding load; retry after a randomized backoff.",
	}
	if *pgErr != want {
		t.Fatalf("got %+v\nwant %+v", *pgErr, want)
	}
	if !IsOverload(err) || !errors.Is(err, ErrRejected) {
		t.Fatalf("IsOverload %v, Is(ErrRejected) %v; want both true", IsOverload(err), errors.Is(err, ErrRejected))
	}
	if s, ok := err.(interface{ SQLState() string }); !ok || s.SQLState() != "53000" {
		t.Fatal("SQLState() must be 53000")
	}
	if got := err.Error(); got != "ERROR: pgturnstile: transaction rejected by admission control (client throttle) (SQLSTATE 53000)" {
		t.Fatalf("Error() = %q", got)
	}
	if got := newRejectedError(7, "default", 0.5, 0).pg.Detail; got != "reason=client_throttle priority=7 category=default waited_ms=0 retry_after_ms=0" {
		t.Fatalf("numeric priority DETAIL = %q", got)
	}
}

// Concurrent use under -race: the counts come out exact.
func TestConcurrentObserve(t *testing.T) {
	var mu sync.Mutex
	clk := newFakeClock()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clk.Now() }
	th := New(Now(now))
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				if th.Allow(g % 4) {
					if i%2 == 0 {
						accepted.Add(1)
						th.Observe(g%4, nil)
					} else {
						th.Observe(g%4, errShed)
					}
				}
				_ = th.RejectProbability(g % 4)
				if i%100 == 0 {
					mu.Lock()
					clk.Advance(time.Millisecond)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	var requests, accepts int64
	for p := range 4 {
		requests += th.requests[p].get(now())
		accepts += th.accepts[p].get(now())
	}
	// Every Allow ends as exactly one request: a local rejection or an Observe.
	if requests != 8000 {
		t.Fatalf("requests %d, want 8000", requests)
	}
	if accepts != accepted.Load() {
		t.Fatalf("accepts %d, want %d", accepts, accepted.Load())
	}
}
