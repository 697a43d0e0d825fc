package throttle

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// sleepRecorder is a fake Sleep: it records the delays and advances the fake
// clock by them, or fails with err.
type sleepRecorder struct {
	clk    *fakeClock
	delays []time.Duration
	err    error
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.delays = append(s.delays, d)
	if s.err != nil {
		return s.err
	}
	s.clk.Advance(d)
	return nil
}

// maxSource makes every Float64 the largest value below 1, so that a full
// jitter delay is its ceiling minus a rounding: the schedule itself becomes
// visible.
type maxSource struct{}

func (maxSource) Uint64() uint64 { return ^uint64(0) }

func newDoThrottle(opts ...Option) (*Throttle, *fakeClock, *sleepRecorder) {
	clk := newFakeClock()
	rec := &sleepRecorder{clk: clk}
	base := []Option{Now(clk.Now), Sleep(rec.sleep), Rand(rand.NewPCG(7, 8))}
	return New(append(base, opts...)...), clk, rec
}

// warm gives the throttle a history of accepted requests, so that the retry
// budget (10 % of requests) has room.
func warm(th *Throttle, n int) { observe(th, High, n, 0) }

func TestDoSuccess(t *testing.T) {
	th, clk, rec := newDoThrottle()
	calls := 0
	err := th.Do(context.Background(), func(context.Context) error { calls++; return nil })
	if err != nil || calls != 1 || len(rec.delays) != 0 {
		t.Fatalf("err %v, calls %d, sleeps %v; want nil, 1, none", err, calls, rec.delays)
	}
	if r, a := th.requests[High].get(clk.Now()), th.accepts[High].get(clk.Now()); r != 1 || a != 1 {
		t.Fatalf("requests %d accepts %d, want 1 and 1 (untagged context is High)", r, a)
	}
}

func TestDoRetriesOverloadThenSucceeds(t *testing.T) {
	th, clk, rec := newDoThrottle()
	warm(th, 100)
	calls := 0
	err := th.Do(context.Background(), func(context.Context) error {
		calls++
		if calls == 1 {
			return errShed
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("err %v, calls %d; want nil, 2", err, calls)
	}
	if len(rec.delays) != 1 || rec.delays[0] < 0 || rec.delays[0] >= 10*time.Millisecond {
		t.Fatalf("sleeps %v, want one in [0, 10ms)", rec.delays)
	}
	// Both attempts are requests; the second was accepted.
	if r, a := th.requests[High].get(clk.Now()), th.accepts[High].get(clk.Now()); r != 102 || a != 101 {
		t.Fatalf("requests %d accepts %d, want 102 and 101", r, a)
	}
	if got := th.retries.get(clk.Now()); got != 1 {
		t.Fatalf("retries %d, want 1", got)
	}
}

func TestDoGivesUpAfterThreeAttempts(t *testing.T) {
	th, _, rec := newDoThrottle()
	warm(th, 100)
	calls := 0
	err := th.Do(context.Background(), func(context.Context) error { calls++; return errShed })
	if !errors.Is(err, errShed) || calls != 3 {
		t.Fatalf("err %v, calls %d; want the shed after 3 attempts", err, calls)
	}
	if len(rec.delays) != 2 || rec.delays[0] >= 10*time.Millisecond || rec.delays[1] >= 20*time.Millisecond {
		t.Fatalf("sleeps %v, want [0,10ms) then [0,20ms)", rec.delays)
	}
}

func TestDoDoesNotRetryAcceptedErrors(t *testing.T) {
	th, clk, rec := newDoThrottle()
	warm(th, 100)
	for _, fail := range []error{
		&pgconn.PgError{Code: "23505"},
		&pgconn.PgError{Code: "40001"},
		context.Canceled,
		errors.New("application bug"),
	} {
		calls := 0
		err := th.Do(context.Background(), func(context.Context) error { calls++; return fail })
		if err != fail || calls != 1 {
			t.Fatalf("%v: err %v, calls %d; want it returned after 1 call", fail, err, calls)
		}
	}
	if len(rec.delays) != 0 {
		t.Fatalf("slept %v", rec.delays)
	}
	if r, a := th.requests[High].get(clk.Now()), th.accepts[High].get(clk.Now()); r != 104 || a != 104 {
		t.Fatalf("requests %d accepts %d, want 104 and 104", r, a)
	}
}

func TestDoBackoffSchedule(t *testing.T) {
	// With the largest possible draw every delay sits at its ceiling:
	// 10 ms · 2ⁿ, capped at 1 s. Float64 < 1 and the conversion truncates, so
	// each delay is one nanosecond short at most.
	th, _, rec := newDoThrottle(Retry(10, 10*time.Millisecond, time.Second), Rand(maxSource{}))
	warm(th, 1000)
	calls := 0
	err := th.Do(context.Background(), func(context.Context) error { calls++; return errShed })
	if !errors.Is(err, errShed) || calls != 10 {
		t.Fatalf("err %v, calls %d; want 10 attempts", err, calls)
	}
	ms := time.Millisecond
	want := []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second}
	if len(rec.delays) != len(want) {
		t.Fatalf("sleeps %v, want %d", rec.delays, len(want))
	}
	for i, w := range want {
		if d := rec.delays[i]; d > w || d < w-time.Nanosecond {
			t.Fatalf("sleep %d = %v, want %v (full jitter's ceiling)", i, d, w)
		}
	}
}

func TestDoRetryBudget(t *testing.T) {
	// A fresh client has no budget: 1 request, 10 % of it is not a retry.
	th, _, rec := newDoThrottle()
	calls := 0
	th.Do(context.Background(), func(context.Context) error { calls++; return errShed })
	if calls != 1 || len(rec.delays) != 0 {
		t.Fatalf("fresh: calls %d sleeps %v, want 1 and none", calls, rec.delays)
	}

	// 9 earlier requests + this one = 10: one retry fits (1 ≤ 0.1·10); the
	// retry makes 11 requests, and a second retry would need 2 ≤ 1.1.
	th, _, rec = newDoThrottle()
	warm(th, 9)
	calls = 0
	th.Do(context.Background(), func(context.Context) error { calls++; return errShed })
	if calls != 2 || len(rec.delays) != 1 {
		t.Fatalf("10 requests: calls %d sleeps %v, want 2 and one", calls, rec.delays)
	}

	// Under a sustained outage retries stay within 10 % of requests.
	th, clk, _ := newDoThrottle(MaxRejectProbability(0)) // no local rejections: only the budget limits
	warm(th, 100)
	var attempts, dos int
	for range 500 {
		dos++
		th.Do(context.Background(), func(context.Context) error { attempts++; return errShed })
		clk.Advance(10 * time.Millisecond) // all inside one 60 s window
	}
	retries := attempts - dos
	requests := 100 + attempts
	t.Logf("sustained outage: %d Do calls, %d attempts, %d retries, %d requests", dos, attempts, retries, requests)
	// A retry needs retries+1 ≤ 0.1·requests, so the budget ends full:
	// exactly ⌊requests/10⌋ (66 of 666 here).
	if retries != requests/10 {
		t.Fatalf("%d retries for %d requests, want ⌊10 %%⌋ = %d", retries, requests, requests/10)
	}

	// RetryBudget(0) disables retries.
	th, _, _ = newDoThrottle(RetryBudget(0))
	warm(th, 1000)
	calls = 0
	th.Do(context.Background(), func(context.Context) error { calls++; return errShed })
	if calls != 1 {
		t.Fatalf("budget 0: %d calls", calls)
	}
}

func TestDoBackoffStopsWhenContextEnds(t *testing.T) {
	th, _, rec := newDoThrottle()
	warm(th, 100)
	rec.err = context.Canceled
	calls := 0
	err := th.Do(context.Background(), func(context.Context) error { calls++; return errShed })
	if err != errShed || calls != 1 || len(rec.delays) != 1 {
		t.Fatalf("err %v calls %d sleeps %v; want the shed, 1 call, 1 interrupted sleep", err, calls, rec.delays)
	}

	// The default sleep returns at once on a context that is already done,
	// even for a long delay.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleepCtx(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("sleepCtx = %v, want context.Canceled", err)
	}
	if err := sleepCtx(context.Background(), 0); err != nil {
		t.Fatalf("sleepCtx(0) = %v", err)
	}
}

func TestDoRejectsLocally(t *testing.T) {
	// P = 1 (no cap, no floor, nothing accepted) rejects whatever the coin.
	th, clk, rec := newDoThrottle(MaxRejectProbability(1), MinRate(0))
	observe(th, Low, 0, 10) // P(low) = 10/10 = 1
	ctx := WithCategory(WithPriority(context.Background(), Low), "batch")
	calls := 0
	err := th.Do(ctx, func(context.Context) error { calls++; return nil })
	if calls != 0 || len(rec.delays) != 0 {
		t.Fatalf("calls %d sleeps %v, want fn not called and no retry", calls, rec.delays)
	}
	rej, ok := errors.AsType[*RejectedError](err)
	if !ok {
		t.Fatalf("err %T %v, want *RejectedError", err, err)
	}
	if rej.Priority != Low || rej.Category != "batch" || rej.Probability != 1 || rej.RetryAfter != time.Second {
		t.Fatalf("rejection %+v", rej)
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "53000" ||
		pgErr.Detail != "reason=client_throttle priority=low category=batch waited_ms=0 retry_after_ms=1000" {
		t.Fatalf("PgError %+v", pgErr)
	}
	// The rejection was counted once, as a request that was not accepted.
	if r, a := th.requests[Low].get(clk.Now()), th.accepts[Low].get(clk.Now()); r != 11 || a != 0 {
		t.Fatalf("requests %d accepts %d, want 11 and 0", r, a)
	}
	// A rejection returned by a nested Do is neither counted again nor retried.
	outer := New(Now(clk.Now), Sleep(rec.sleep))
	warm(outer, 100)
	calls = 0
	err = outer.Do(ctx, func(ctx context.Context) error {
		calls++
		return th.Do(ctx, func(context.Context) error { return nil })
	})
	if !errors.Is(err, ErrRejected) || calls != 1 {
		t.Fatalf("nested: err %v calls %d", err, calls)
	}
	if r := outer.requests[Low].get(clk.Now()); r != 0 {
		t.Fatalf("nested rejection counted %d times by the outer throttle", r)
	}
}

// The caller's deadline passing counts as overload (too slow for the caller),
// but Do does not retry, nor spend budget, on a context that is done.
func TestDoDeadlineCountsAsOverload(t *testing.T) {
	th, clk, rec := newDoThrottle()
	warm(th, 100)
	ctx, cancel := context.WithTimeout(context.Background(), -1)
	defer cancel()
	calls := 0
	cancelCode := &pgconn.PgError{Code: "57014"}
	err := th.Do(ctx, func(context.Context) error { calls++; return cancelCode })
	if err != cancelCode || calls != 1 || len(rec.delays) != 0 || th.retries.get(clk.Now()) != 0 {
		t.Fatalf("err %v calls %d sleeps %v retries %d; want 1 call, no retry", err, calls, rec.delays, th.retries.get(clk.Now()))
	}
	if r, a := th.requests[High].get(clk.Now()), th.accepts[High].get(clk.Now()); r != 101 || a != 100 {
		t.Fatalf("requests %d accepts %d, want 101 and 100", r, a)
	}
}
