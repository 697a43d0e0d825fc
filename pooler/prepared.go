package pooler

import (
	"bytes"
	"container/list"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Protocol-level named prepared statements in transaction and statement
// mode (as PgBouncer ≥ 1.21 does it, max_prepared_statements > 0).
//
// Each distinct (query text, parameter types) gets one pooler-wide server
// name, PGTS_<n> (stmtRegistry; keyed by the full text, never by a hash
// alone). A client's own statement names map to those definitions
// (client.mu.stmts). Each server remembers which definitions it has prepared,
// in an LRU bounded by max_prepared_statements (serverStmts).
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
//     the text again (stmtDef.epoch; relay_retry.go).
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

// stmtDef is one registered statement.
type stmtDef struct {
	name  string // server-side name
	query string
	types []byte // raw parameter-type section of the Parse (count + OIDs)
	key   stmtKey
	refs  int // client maps and server caches holding it; guarded by the registry
	// validated is set once a server has parsed it successfully: a later
	// Parse of the same text may then be answered without a server.
	validated atomic.Bool
	// epoch is the statement's shape epoch: how many times a server
	// reported that a migration changed its result (0A000 cached plan
	// must not change result type; bumpEpoch). A server's copy parsed at
	// an older epoch is closed and parsed again at its next use there
	// (serverStmts.has), and a client's name held since an older epoch
	// is refused with Postgres's 0A000 (clientStmt; relay_retry.go).
	epoch atomic.Uint64
}

// bumpEpoch records that a server's copy of d parsed at epoch from had its
// plan refused: d's epoch becomes from+1, unless another server's report
// already took it past from (one migration, one bump).
func (d *stmtDef) bumpEpoch(from uint64) bool { return d.epoch.CompareAndSwap(from, from+1) }

// clientStmt is a client's name for a definition, with the shape epoch of
// the result description the client has for it: the definition's epoch
// when the client prepared the name, brought up to date when the client is
// sent the new shape (a Describe in a request sent again; relay_retry.go).
// Guarded by the client's mu.
type clientStmt struct {
	def   *stmtDef
	epoch uint64
}

// current reports whether the client's description is of the
// definition's current shape.
func (cs *clientStmt) current() bool { return cs.epoch >= cs.def.epoch.Load() }

// learned brings the client's epoch up to epoch: it has been sent the
// description of a copy parsed at that epoch.
func (cs *clientStmt) learned(epoch uint64) {
	if epoch > cs.epoch {
		cs.epoch = epoch
	}
}

// stmtKey identifies a statement by its full text and parameter types. The
// query string is the definition's own, so a statement's text is held once.
type stmtKey struct{ query, types string }

// size is what a definition counts against prepared_statement_budget.
func (d *stmtDef) size() int64 { return int64(len(d.query) + 2*len(d.types)) }

// stmtRegistry holds every statement any client or server references.
type stmtRegistry struct {
	mu    sync.Mutex
	byKey map[stmtKey]*stmtDef
	next  uint64
	// bytes is the statement text held for prepared statements: the
	// definitions, and each client's remembered unnamed Parse
	// (reserveText). prepared_statement_budget bounds it.
	bytes atomic.Int64
}

func newStmtRegistry() *stmtRegistry { return &stmtRegistry{byKey: map[stmtKey]*stmtDef{}} }

// acquire returns the definition for (query, types), creating it, with one
// more reference. It returns nil when a new definition would take the
// statement text past limit bytes (0 = no limit).
func (r *stmtRegistry) acquire(query string, types []byte, limit int) *stmtDef {
	key := stmtKey{query, string(types)}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.byKey[key]
	if d == nil {
		d = &stmtDef{query: query, types: bytes.Clone(types), key: key}
		if !r.reserveText(d.size(), limit) {
			return nil
		}
		r.next++
		d.name = "PGTS_" + strconv.FormatUint(r.next, 10)
		r.byKey[key] = d
	}
	d.refs++
	return d
}

// adoptNamed returns, with one more reference, the definition for (query,
// types) under the server-side name a server taken over from the old
// process knows it by (takeover.go). The old process named each
// definition once, so the names it hands over never clash; the next name
// made here comes after the highest. A definition made here first keeps
// its name (the server then lacks it: prepared again when needed).
func (r *stmtRegistry) adoptNamed(name, query string, types []byte) *stmtDef {
	key := stmtKey{query, string(types)}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.byKey[key]
	if d == nil {
		d = &stmtDef{name: name, query: query, types: bytes.Clone(types), key: key}
		r.reserveText(d.size(), 0)
		r.byKey[key] = d
		d.validated.Store(true) // Postgres parsed it
		if n, err := strconv.ParseUint(strings.TrimPrefix(name, "PGTS_"), 10, 64); err == nil && n > r.next {
			r.next = n
		}
	}
	d.refs++
	return d
}

// lookupValidated returns, with one more reference, the definition for
// (query, types) if a server has parsed it successfully; else nil.
func (r *stmtRegistry) lookupValidated(query string, types []byte) *stmtDef {
	key := stmtKey{query, string(types)}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.byKey[key]
	if d == nil || !d.validated.Load() {
		return nil
	}
	d.refs++
	return d
}

// reserveText counts n bytes of statement text, or reports false and
// counts nothing when that would pass limit (0 = no limit).
func (r *stmtRegistry) reserveText(n int64, limit int) bool {
	for {
		cur := r.bytes.Load()
		if limit > 0 && cur+n > int64(limit) {
			return false
		}
		if r.bytes.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// releaseText gives back what reserveText counted.
func (r *stmtRegistry) releaseText(n int64) { r.bytes.Add(-n) }

func (r *stmtRegistry) ref(d *stmtDef) {
	r.mu.Lock()
	d.refs++
	r.mu.Unlock()
}

// release drops one reference; the definition is forgotten at zero.
func (r *stmtRegistry) release(d *stmtDef) {
	r.mu.Lock()
	d.refs--
	if d.refs == 0 {
		delete(r.byKey, d.key)
		r.releaseText(d.size())
	}
	r.mu.Unlock()
}

func (r *stmtRegistry) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey)
}

// serverStmts is a server's prepared-statement cache, least recently used
// first. Its holder (the linked client, under client.mu) owns it.
type serverStmts struct {
	lru *list.List // of *stmtCopy, front = most recently used
	m   map[*stmtDef]*list.Element
	// n is len(m) for SHOW SERVERS, which reads it without the holder's
	// lock (shown).
	n atomic.Int32
}

// stmtCopy is a statement prepared on a server, with the definition's
// shape epoch when its Parse was sent. A copy older than the definition's
// epoch is stale: some server refused the plan of the statement since
// (0A000 cached plan must not change result type, after a migration
// changed its result), so this one's plan may be of the old shape too; it
// is still prepared on the server, and is closed and prepared again at its
// next use there (prepareLocked). One server's report makes every
// server's copy stale, lazily: a client that prepared the text again after
// it does not meet the old plan on another server.
type stmtCopy struct {
	def   *stmtDef
	epoch uint64
}

func (c *serverStmts) init() {
	if c.m == nil {
		c.lru = list.New()
		c.m = map[*stmtDef]*list.Element{}
	}
}

// defs are the statements the server has.
func (c *serverStmts) defs() []*stmtDef {
	c.init()
	out := make([]*stmtDef, 0, len(c.m))
	for d := range c.m {
		out = append(out, d)
	}
	return out
}

// copyOf returns the server's copy of d, or nil.
func (c *serverStmts) copyOf(d *stmtDef) *stmtCopy {
	if e, ok := c.m[d]; ok {
		return e.Value.(*stmtCopy)
	}
	return nil
}

// has reports whether the server has d prepared and usable (not stale).
func (c *serverStmts) has(d *stmtDef) bool {
	c.init()
	e, ok := c.m[d]
	if !ok || e.Value.(*stmtCopy).epoch < d.epoch.Load() {
		return false
	}
	c.lru.MoveToFront(e)
	return true
}

// isStale reports whether the server has d prepared at an epoch older than
// d's (stmtCopy).
func (c *serverStmts) isStale(d *stmtDef) bool {
	cp := c.copyOf(d)
	return cp != nil && cp.epoch < d.epoch.Load()
}

// markStale applies the server's refusal of its copy of d's plan: d's
// epoch is bumped past the copy's (bumpEpoch), which makes this copy
// stale, and every other server's copy parsed before the bump. It reports
// whether this report bumped it. Nothing when the server lacks d.
func (c *serverStmts) markStale(d *stmtDef) bool {
	cp := c.copyOf(d)
	return cp != nil && d.bumpEpoch(cp.epoch)
}

// holds reports whether d is prepared on the server, stale or not.
func (c *serverStmts) holds(d *stmtDef) bool {
	_, ok := c.m[d]
	return ok
}

// add records d as prepared on the server at shape epoch epoch.
func (c *serverStmts) add(reg *stmtRegistry, d *stmtDef, epoch uint64) {
	c.init()
	if _, ok := c.m[d]; ok {
		return
	}
	reg.ref(d)
	c.m[d] = c.lru.PushFront(&stmtCopy{def: d, epoch: epoch})
	c.n.Add(1)
}

func (c *serverStmts) remove(reg *stmtRegistry, d *stmtDef) {
	c.init()
	if e, ok := c.m[d]; ok {
		c.lru.Remove(e)
		delete(c.m, d)
		c.n.Add(-1)
		reg.release(d)
	}
}

// oldest returns the least recently used definition, or nil.
func (c *serverStmts) oldest() *stmtDef {
	c.init()
	if e := c.lru.Back(); e != nil {
		return e.Value.(*stmtCopy).def
	}
	return nil
}

func (c *serverStmts) len() int {
	if c.m == nil {
		return 0
	}
	return len(c.m)
}

func (c *serverStmts) clear(reg *stmtRegistry) {
	for d := range c.m {
		reg.release(d)
	}
	c.lru, c.m = nil, nil
	c.n.Store(0)
}

// shown is the number of statements, for SHOW SERVERS; any goroutine.
func (c *serverStmts) shown() int { return int(c.n.Load()) }

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
	def  *stmtDef // the statement a Parse/Close was about, if mapped
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
	name *clientStmt
	// pos is an opBind's or opDescribe's place among the extended
	// messages of its Sync cycle (linkState.cyclePos).
	pos int
}

// opQueue is a FIFO ring; it grows but does not shrink, so steady state
// does not allocate.
type opQueue struct {
	buf        []op
	head, size int
}

func (q *opQueue) push(o op) {
	if q.size == len(q.buf) {
		nb := make([]op, max(8, 2*len(q.buf)))
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = o
	q.size++
}

func (q *opQueue) peek() *op {
	for q.size > 0 && q.buf[q.head].kind == opDead {
		q.pop()
	}
	if q.size == 0 {
		return nil
	}
	return &q.buf[q.head]
}

// killSyncs marks the opSync entries at the given positions among the
// queue's opSync entries (ascending) as dead.
func (q *opQueue) killSyncs(positions []int) {
	n := 0
	for i := 0; i < q.size && len(positions) > 0; i++ {
		o := &q.buf[(q.head+i)%len(q.buf)]
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
func (q *opQueue) tail() *op { return &q.buf[(q.head+q.size-1)%len(q.buf)] }

func (q *opQueue) pop() op {
	o := q.buf[q.head]
	q.buf[q.head] = op{}
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return o
}

func (q *opQueue) reset() {
	for q.size > 0 {
		q.pop()
	}
	q.head = 0
}
