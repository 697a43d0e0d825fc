package throttle

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgx calls the tracer with the query's context and its final error; these
// tests call it the same way, without a database.

func TestTracerObservesQueries(t *testing.T) {
	clk := newFakeClock()
	th := New(Now(clk.Now))
	tr := Tracer{Throttle: th}
	low := WithPriority(context.Background(), Low)

	query := func(ctx context.Context, err error) {
		ctx = tr.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "SELECT 1"})
		tr.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{Err: err})
	}
	query(low, nil)
	query(low, errShed)
	query(low, &pgconn.PgError{Code: "23505"})
	query(context.Background(), errShed) // untagged: High

	cancelled, cancel := context.WithCancel(low)
	cancel()
	// pgx's view of a cancelled query: a socket deadline it set itself.
	query(cancelled, &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded})

	for _, c := range []struct {
		p                  int
		requests, accepted int64
	}{{Low, 4, 3}, {High, 1, 0}, {Critical, 0, 0}} {
		if r, a := th.requests[c.p].get(clk.Now()), th.accepts[c.p].get(clk.Now()); r != c.requests || a != c.accepted {
			t.Fatalf("priority %d: requests %d accepts %d, want %d and %d", c.p, r, a, c.requests, c.accepted)
		}
	}
}

func TestTracerBatchCountsOnce(t *testing.T) {
	clk := newFakeClock()
	th := New(Now(clk.Now))
	tr := Tracer{Throttle: th}
	batch := func(errs ...error) {
		ctx := tr.TraceBatchStart(context.Background(), nil, pgx.TraceBatchStartData{})
		for _, err := range errs {
			tr.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{Err: err})
		}
		tr.TraceBatchEnd(ctx, nil, pgx.TraceBatchEndData{})
	}
	batch(nil, nil, nil)
	batch(errShed, errShed) // a shed batch: every queued query fails with it
	ctx := tr.TraceCopyFromStart(context.Background(), nil, pgx.TraceCopyFromStartData{})
	tr.TraceCopyFromEnd(ctx, nil, pgx.TraceCopyFromEndData{Err: errShed})
	if r, a := th.requests[High].get(clk.Now()), th.accepts[High].get(clk.Now()); r != 3 || a != 1 {
		t.Fatalf("requests %d accepts %d, want 3 (two batches, one COPY) and 1", r, a)
	}
}

// Inside Do, statements fold into the attempt: a transaction counts once, and
// an overload that fn swallowed still counts.
func TestTracerInsideDo(t *testing.T) {
	th, clk, rec := newDoThrottle()
	tr := Tracer{Throttle: th}
	query := func(ctx context.Context, err error) {
		ctx = tr.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{})
		tr.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{Err: err})
	}
	// Five statements, all fine: one request, one accept.
	th.Do(context.Background(), func(ctx context.Context) error {
		for range 5 {
			query(ctx, nil)
		}
		return nil
	})
	// fn logs a shed and returns nil: one request, not accepted, no retry.
	calls := 0
	err := th.Do(context.Background(), func(ctx context.Context) error {
		calls++
		query(ctx, errShed)
		return nil
	})
	if err != nil || calls != 1 || len(rec.delays) != 0 {
		t.Fatalf("swallowed shed: err %v calls %d sleeps %v", err, calls, rec.delays)
	}
	if r, a := th.requests[High].get(clk.Now()), th.accepts[High].get(clk.Now()); r != 2 || a != 1 {
		t.Fatalf("requests %d accepts %d, want 2 and 1", r, a)
	}
	// A tracer of another throttle still counts per statement.
	other := New(Now(clk.Now))
	th.Do(context.Background(), func(ctx context.Context) error {
		ctx = Tracer{Throttle: other}.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{})
		Tracer{Throttle: other}.TraceQueryEnd(ctx, nil, pgx.TraceQueryEndData{})
		return nil
	})
	if r := other.requests[High].get(clk.Now()); r != 1 {
		t.Fatalf("other throttle counted %d, want 1", r)
	}
	// A zero Tracer is inert.
	Tracer{}.TraceQueryEnd(context.Background(), nil, pgx.TraceQueryEndData{Err: errShed})
}
