package throttle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATEs that mean "the database (or the pooler in front of it) did not
// take the work because it is out of capacity".
const (
	CodeInsufficientResources = "53000" // pgturnstile's shed; also this package's local rejection
	CodeTooManyConnections    = "53300" // Postgres at max_connections; pgturnstile's opt-in login refusal
	CodeCannotConnectNow      = "57P03" // starting up, shutting down, or a paused/draining pool
)

// MessagePrefix starts the message of every shed, the pooler's and this
// package's, so that log searches and alerts match both.
const MessagePrefix = "pgturnstile: transaction rejected by admission control"

// ErrRejected matches, with errors.Is, every *RejectedError.
var ErrRejected = errors.New(MessagePrefix + " (client throttle)")

// RejectedError is what Do returns when the Throttle rejects a request
// locally, before it reaches the database.
//
// It unwraps to a *pgconn.PgError with severity ERROR and SQLSTATE 53000, the
// same shape as the pooler's own shed, so an application needs one code path:
// errors.As(err, &pgErr) && pgErr.Code == "53000", or IsOverload(err).
type RejectedError struct {
	Priority    int
	Category    string
	Probability float64       // the rejection probability at the time
	RetryAfter  time.Duration // a hint for the caller's backoff

	pg *pgconn.PgError
}

func newRejectedError(priority int, category string, prob float64, retryAfter time.Duration) *RejectedError {
	return &RejectedError{
		Priority:    priority,
		Category:    category,
		Probability: prob,
		RetryAfter:  retryAfter,
		pg: &pgconn.PgError{
			Severity:            "ERROR",
			SeverityUnlocalized: "ERROR",
			Code:                CodeInsufficientResources,
			Message:             MessagePrefix + " (client throttle)",
			// Same keys, in the same order, as the pooler's DETAIL. Nothing
			// waited: the decision is taken before any I/O.
			Detail: fmt.Sprintf("reason=client_throttle priority=%s category=%s waited_ms=0 retry_after_ms=%d",
				priorityName(priority), category, retryAfter.Milliseconds()),
			Hint: "The database is shedding load; retry after a randomized backoff.",
		},
	}
}

func (e *RejectedError) Error() string { return e.pg.Error() }

// Unwrap exposes the *pgconn.PgError (SQLSTATE 53000).
func (e *RejectedError) Unwrap() error { return e.pg }

// SQLState returns 53000, for code that inspects interface{ SQLState() string }.
func (e *RejectedError) SQLState() string { return e.pg.Code }

// Is reports whether target is ErrRejected.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// priorityName spells the default tiers the way the pooler's configuration
// does; other values are written as numbers.
func priorityName(p int) string {
	switch p {
	case Critical:
		return "critical"
	case High:
		return "high"
	case Medium:
		return "medium"
	case Low:
		return "low"
	}
	return fmt.Sprint(p)
}

// IsOverload reports whether err says the database side lacked capacity,
// which is the only kind of failure the Throttle counts against the backend
// and the only kind Do retries:
//
//   - a *pgconn.PgError with SQLSTATE 53000, 53300 or 57P03 (the pooler's shed,
//     Postgres out of connections, a server that cannot take connections now);
//   - a local rejection of this package (*RejectedError);
//   - a failure to connect (*pgconn.ConnectError, which includes login
//     failures, or a *net.OpError from a dial);
//   - a timeout: a net.Error whose Timeout() is true (this includes
//     context.DeadlineExceeded and os.ErrDeadlineExceeded) or pgconn.Timeout.
//
// Everything else is the backend working, and counts as accepted: constraint
// violations, syntax errors, serialization failures, pgx.ErrNoRows,
// statement_timeout and cancels (57014), and in particular context.Canceled
// (the caller gave up, which says nothing about the database). A shed
// SQLSTATE wins over a cancellation found in the same chain.
func IsOverload(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*RejectedError](err); ok {
		return true
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && isOverloadCode(pgErr.Code) {
		return true
	}
	// pgx reports a cancelled query through a deadline it set on the socket,
	// so a cancellation can carry a timeout further down the chain; the
	// cancellation is the truth.
	if errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if opErr, ok := errors.AsType[*net.OpError](err); ok && opErr.Op == "dial" {
		return true
	}
	if netErr, ok := errors.AsType[net.Error](err); ok && netErr.Timeout() {
		return true
	}
	return pgconn.Timeout(err)
}

func isOverloadCode(code string) bool {
	switch code {
	case CodeInsufficientResources, CodeTooManyConnections, CodeCannotConnectNow:
		return true
	}
	return false
}

// overloaded classifies the outcome of an operation run under ctx. The
// context knows things the error may hide: once the caller cancelled, any
// error is the consequence (only an explicit shed still counts); once the
// caller's deadline passed, the backend was too slow for it, whatever error
// pgx made of that (a 57014 from the cancel request pgx sends, say).
func overloaded(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	switch ctxErr := ctx.Err(); {
	case ctxErr == nil:
		return IsOverload(err)
	case errors.Is(ctxErr, context.DeadlineExceeded):
		return true
	default:
		pgErr, ok := errors.AsType[*pgconn.PgError](err)
		return ok && isOverloadCode(pgErr.Code)
	}
}
