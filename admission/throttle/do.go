package throttle

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"
)

// Do runs fn as one request at the priority and category tagged on ctx
// (PriorityFrom, CategoryFrom).
//
// Each attempt first asks Allow. A local rejection returns a *RejectedError
// at once, without calling fn and without retrying: the rejection already is
// the signal to back off, and retrying it immediately would only feed the
// requests count. Otherwise fn runs with a context derived from ctx, its result
// is observed, and Do returns it unless it is an overload (IsOverload, or the
// caller's deadline passing). An overload is retried after a full-jitter
// exponential backoff, up to the Retry schedule (3 attempts in all by default)
// and only while the retry budget allows (RetryBudget, 10 % of requests).
// Each attempt, retries included, is a request in the Throttle's statistics.
// If ctx ends during a backoff, Do returns the last error of fn.
//
// fn must be safe to run more than once. A whole transaction is (pgx.BeginFunc,
// pgx.BeginTxFunc): the pooler sheds a transaction before its first statement
// reaches a server. Return the error of every query: Do can only retry what
// fn returns. If a Tracer of the same Throttle is installed, the queries
// inside fn are not counted one by one; an overload they see is folded into
// this attempt's outcome, even if fn swallows it. Do calls of one Throttle
// should not nest: each would count the request.
func (t *Throttle) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	p := t.clamp(PriorityFrom(ctx))
	var err error
	for attempt := 0; ; attempt++ {
		ok, prob := t.allow(p)
		if !ok {
			return newRejectedError(p, CategoryFrom(ctx), prob, t.maxDelay)
		}
		call := &doCall{t: t}
		err = fn(context.WithValue(ctx, doCallKey{}, call))
		if errors.Is(err, ErrRejected) {
			// A nested Do (of this Throttle or another) rejected the work
			// before it reached the database: the backend gave no verdict
			// to count, and a local rejection is never retried.
			return err
		}
		failed := overloaded(ctx, err)
		t.record(p, !failed && !call.overload.Load())
		// A caller whose context is done gets no retry: it would be wasted,
		// and so would the budget it spends.
		if !failed || attempt+1 >= t.attempts || ctx.Err() != nil || !t.takeRetry() {
			return err
		}
		if t.sleep(ctx, t.backoff(attempt)) != nil {
			return err
		}
	}
}

// takeRetry spends one unit of the retry budget if there is one. The retry
// is counted before the backoff, so that concurrent failures cannot all pass
// the check.
func (t *Throttle) takeRetry() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var requests int64
	for p := range t.requests {
		requests += t.requests[p].get(now)
	}
	if float64(t.retries.get(now)+1) > t.budget*float64(requests) {
		return false
	}
	t.retries.add(now, 1)
	return true
}

// backoff returns the delay before retry n+1: full jitter, uniform in
// [0, min(maxDelay, base·2ⁿ)). Full jitter spreads the retries of clients that
// failed together, which is the point after a shed.
func (t *Throttle) backoff(n int) time.Duration {
	ceiling := t.base
	for range n {
		if ceiling >= t.maxDelay || ceiling > math.MaxInt64/2 {
			break // at the cap already, or doubling would overflow
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, t.maxDelay)
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Duration(t.float64() * float64(ceiling))
}

// sleepCtx waits d or until ctx ends, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// doCall marks a context as inside one attempt of Do, so that a Tracer of the
// same Throttle folds its queries into that attempt instead of counting each
// as a request. Queries of one attempt may run on several goroutines, hence
// the atomic.
type doCall struct {
	t        *Throttle
	overload atomic.Bool
}

type doCallKey struct{}

func doCallFrom(ctx context.Context) *doCall {
	call, _ := ctx.Value(doCallKey{}).(*doCall)
	return call
}
