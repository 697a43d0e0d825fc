package throttle

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Tracer feeds a Throttle from pgx: install it as the connection config's
// Tracer (pgx.ConnConfig.Tracer, or pgxpool.Config.ConnConfig.Tracer) and every
// Query, QueryRow, Exec, SendBatch and CopyFrom reports its outcome, at the
// priority tagged on its context, including errors that only surface when the
// rows are closed. To combine it with another tracer, use
// github.com/jackc/pgx/v5/multitracer.
//
// pgx tracers cannot refuse a query, so the Tracer only accounts; gating is
// Allow (or Do). Outside Do each statement counts as one request; inside Do of
// the same Throttle, statements are folded into Do's attempt, so a transaction
// counts once however many statements it runs.
type Tracer struct {
	Throttle *Throttle
}

var (
	_ pgx.QueryTracer    = Tracer{}
	_ pgx.BatchTracer    = Tracer{}
	_ pgx.CopyFromTracer = Tracer{}
)

// TraceQueryStart returns ctx unchanged; the class is already on it.
func (tr Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd reports the statement's outcome.
func (tr Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	tr.report(ctx, overloaded(ctx, data.Err))
}

// batchState collects a batch's outcome so that the batch counts once: the
// pooler admits or sheds the batch's transaction as a whole.
type batchState struct{ overload bool }

type batchKey struct{}

// TraceBatchStart prepares to collect the batch's outcome.
func (tr Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, batchKey{}, &batchState{})
}

// TraceBatchQuery notes an overload of one statement of the batch. pgx reads
// a batch's results on the caller's goroutine, one at a time.
func (tr Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if b, ok := ctx.Value(batchKey{}).(*batchState); ok && overloaded(ctx, data.Err) {
		b.overload = true
	}
}

// TraceBatchEnd reports the batch's outcome.
func (tr Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	failed := overloaded(ctx, data.Err)
	if b, ok := ctx.Value(batchKey{}).(*batchState); ok && b.overload {
		failed = true
	}
	tr.report(ctx, failed)
}

// TraceCopyFromStart returns ctx unchanged.
func (tr Tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return ctx
}

// TraceCopyFromEnd reports the COPY's outcome.
func (tr Tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromEndData) {
	tr.report(ctx, overloaded(ctx, data.Err))
}

func (tr Tracer) report(ctx context.Context, failed bool) {
	if tr.Throttle == nil {
		return
	}
	if call := doCallFrom(ctx); call != nil && call.t == tr.Throttle {
		if failed {
			call.overload.Store(true)
		}
		return
	}
	tr.Throttle.record(PriorityFrom(ctx), !failed)
}
