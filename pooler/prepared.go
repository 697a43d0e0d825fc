package pooler

import (
	"github.com/pgturnstile/pgturnstile/internal/ring"
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
)

// Protocol-level named prepared statements in transaction and statement
// mode (as PgBouncer ≥ 1.21 does it, max_prepared_statements > 0).
//
// Each distinct (query text, parameter types) gets one pooler-wide server
// name, PGTS_<n> (stmtcache.Registry, Service.stmts). A client's own
// statement names map to those definitions (client.mu.stmts). Each server
// remembers which definitions it has prepared, in an LRU bounded by
// max_prepared_statements (stmtcache.Cache, server.stmts).
//
// Rewriting, done by serve while it holds the link:
//   - Parse "name": registered and mapped; sent as Parse PGTS_n when the
//     server lacks it. When the server already has it, the client still
//     needs a ParseComplete in order, so serve sends a Parse of an empty
//     query under a scratch name followed by a Close of that name: Postgres
//     produces the ParseComplete in the right place and the pump swallows
//     the CloseComplete. The server's plan for PGTS_n stays warm.
//   - Bind / Describe 'S' "name": the name is rewritten; a Parse of the
//     definition is injected first when this server lacks it and its
//     ParseComplete is swallowed.
//   - Close 'S' "name": removed from the client's map only; the server's
//     statement stays for other clients. The client's CloseComplete comes
//     from a Close of a name that never exists, which Postgres answers with
//     CloseComplete in order.
//   - a re-Parse of a name the client still holds, and a Bind or Describe
//     of a name it does not hold, are answered with PgBouncer's errors
//     (08P01 "prepared statement name is already in use", "prepared
//     statement did not exist") and log lines, emitted in order just
//     before the ReadyForQuery of the client's next Sync; serve drops the
//     client's messages up to that Sync, as Postgres would after an error.
//     PgBouncer closes the client there; pgturnstile keeps it usable.
//   - SQL DEALLOCATE name (a simple Query that is exactly that) removes
//     the client's name only. The server gets `DO $$BEGIN END$$` in its
//     place: a statement that, like DEALLOCATE, succeeds when idle or in
//     a block and fails with 25P02 in an aborted transaction, and that
//     creates and drops nothing on the server, so no state the pooler does
//     not know of can be left behind whatever happens to it. Its
//     CommandComplete "DO" is rewritten to "DEALLOCATE"; on its error the
//     client keeps its name, as Postgres keeps the statement.
//   - DEALLOCATE ALL / DISCARD ALL clear the client's map and the server's
//     cache when their CommandComplete comes (also from a client whose
//     names are not mapped, on a server whose statements are).
//   - a Parse that fails, or that the server skips after an error (or
//     the pooler drops, when the error came back before the Parse was
//     relayed: skipAfterError), keeps the client's name, as PgBouncer
//     keeps it: psycopg's pipeline mode
//     binds such names later. The statement is prepared on the server
//     again at its next Bind or Describe, and a Parse of the name again is
//     accepted (client.mu.unconfirmed; errorLocked).
//   - after a migration changed a statement's result, a server's 0A000
//     (cached plan must not change result type) for it bumps its shape
//     epoch: copies parsed before are prepared again at their next use,
//     and client names prepared before are refused with that 0A000, as
//     their own statements would fail directly, until the client prepares
//     the text again (stmtcache.Def.Epoch; relay_retry.go).
//   - max_prepared_statements changed from or to 0 at runtime starts or
//     stops the mapping for connected clients too, at their next message
//     with no server linked (followTrackingLocked); their names are kept.
//
// So that injected replies can be swallowed and the caches stay true when
// the server skips messages after an error, the link keeps a queue (opQueue)
// of every Parse, Close and Sync-like message sent, popped by the pump as
// the replies come.

// noopStmt is a statement name the pooler uses for its scratch Parse and
// Close; clients never see it.
const noopStmt = "pgturnstile_noop"

// opKind is an entry of the link's queue of replies owed by the server.
type opKind uint8

const (
	opParse         opKind = iota + 1 // a Parse whose ParseComplete goes to the client
	opParseInjected                   // a Parse the pooler injected: swallow its ParseComplete
	opClose                           // a Close whose CloseComplete goes to the client
	opCloseInjected                   // a Close the pooler injected: swallow its CloseComplete
	opSync                            // Sync, Query or FunctionCall: ends with ReadyForQuery
	opError                           // an error the pooler owes the client, emitted before the next ReadyForQuery
	// opDeallocate is a client's SQL DEALLOCATE of a mapped name, sent to
	// the server as a statement that touches no prepared statement (see
	// relayQuery): its CommandComplete is rewritten to DEALLOCATE and the
	// client's name is let go; an error gives the name back.
	opDeallocate
	// opDead is an entry whose message the server ignored (a Sync read in
	// COPY IN mode): peek and pop pass over it.
	opDead
	// opBind is a Bind (BindComplete pops it), opDescribe a Describe
	// (RowDescription or NoData pops it): with their place in their Sync
	// cycle (pos), an ErrorResponse is tied to the Bind or Describe of a
	// mapped statement that failed (pumpError, relay_retry.go).
	opBind
	opDescribe
)

type op struct {
	kind opKind
	def  *stmtcache.Def // the statement a Parse/Close was about, if mapped
	// clientName is the client's name for an opParse of a mapped
	// statement (undone if the Parse fails).
	clientName string
	err        *Error
	// unnamed marks a Parse of the unnamed statement.
	unnamed bool
	// reused marks an opParse of a statement the server already had: only
	// the client's name depends on it.
	reused bool
	// msg is an opSync's message: Sync, Query or FunctionCall.
	msg byte
	// epoch is, for an opCloseInjected, the shape epoch of the copy it
	// closes: if the server skips the Close, the copy stays there as it
	// was. For an opParse or opParseInjected of a mapped statement, the
	// epoch of the copy it adds. For an opDescribe sent again
	// (relay_retry.go), the epoch whose shape its reply tells the client
	// (name).
	epoch uint64
	// name is, for an opDescribe sent again, the client's name whose
	// description its reply brings up to date; for an opDeallocate, the
	// name the DEALLOCATE let go, given back if it fails.
	name *stmtcache.ClientStmt
	// pos is an opBind's or opDescribe's place among the extended
	// messages of its Sync cycle (linkstate.State.CyclePos).
	pos int
}

// opQueue is the replies a link owes, in order: a ring.Queue of ops
// (steady state does not allocate) that passes over dead entries.
type opQueue struct{ ring.Queue[op] }

func (q *opQueue) push(o op) { q.Push(o) }

func (q *opQueue) peek() *op {
	for q.Len() > 0 && q.At(0).kind == opDead {
		q.Pop()
	}
	if q.Len() == 0 {
		return nil
	}
	return q.At(0)
}

// killSyncs marks the opSync entries at the given positions among the
// queue's opSync entries (ascending) as dead.
func (q *opQueue) killSyncs(positions []int) {
	n := 0
	for i := 0; i < q.Len() && len(positions) > 0; i++ {
		o := q.At(i)
		if o.kind != opSync {
			continue
		}
		if n == positions[0] {
			o.kind = opDead
			positions = positions[1:]
		}
		n++
	}
}

// tail is the entry pushed last; the queue must not be empty.
func (q *opQueue) tail() *op { return q.Tail() }

func (q *opQueue) pop() op { return q.Pop() }

func (q *opQueue) reset() { q.Reset() }
