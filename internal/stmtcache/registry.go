// Package stmtcache holds the pooler's view of protocol-level named
// prepared statements in transaction and statement mode (as PgBouncer ≥
// 1.21 does it, max_prepared_statements > 0): which statements exist,
// what each server has prepared, and which of a client's names are of a
// statement's current result shape. Rewriting the messages is the
// pooler's; this package only keeps the books.
//
// Each distinct (query text, parameter types) gets one definition (Def)
// with one pooler-wide server-side name, PGTS_<n>, in a Registry keyed by
// the full text, never by a hash alone, so two texts can never share a
// name. A client's own statement names map to definitions (ClientStmt).
// Each server remembers which definitions it has prepared, least recently
// used first, in a Cache that the pooler bounds by
// max_prepared_statements.
//
// A definition lives while a client name, a server's cache or an
// in-flight message holds a reference to it (Registry.Acquire, Ref,
// Release), and the statement text held for prepared statements is
// counted against prepared_statement_budget (ReserveText).
//
// After a migration changed a statement's result, Postgres refuses the
// old plan with 0A000 (cached plan must not change result type). Such a
// report bumps the definition's shape epoch (Cache.MarkStale): every
// server's copy parsed before is stale and is prepared again at its next
// use there, and every client name held since before is no longer
// current (ClientStmt.Current) until the client is sent the new shape.
package stmtcache

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// namePrefix starts every server-side name the registry makes; the number
// after it is never reused, so a server still holding an old definition's
// statement cannot alias a new one.
const namePrefix = "PGTS_"

// Def is one registered statement. Name, Query and Types are set when it is
// made and never change.
type Def struct {
	Name  string // server-side name
	Query string
	Types []byte // raw parameter-type section of the Parse (count + OIDs)
	key   key
	refs  int // client names, server caches and messages holding it; guarded by the registry's mu
	// validated is set once a server has parsed it successfully: a later
	// Parse of the same text may then be answered without a server.
	validated atomic.Bool
	// epoch is the shape epoch: how many times a server reported that a
	// migration changed the statement's result (BumpEpoch).
	epoch atomic.Uint64
}

// key identifies a statement by its full text and parameter types. The
// query string is the definition's own, so a statement's text is held once.
type key struct{ query, types string }

// Size is what d counts against prepared_statement_budget: its text, and
// its parameter types twice (they are held as Types and again in the key).
func (d *Def) Size() int64 { return int64(len(d.Query) + 2*len(d.Types)) }

// Validated reports whether a server has parsed d successfully.
func (d *Def) Validated() bool { return d.validated.Load() }

// MarkValidated records that a server parsed d successfully; any goroutine.
func (d *Def) MarkValidated() { d.validated.Store(true) }

// Epoch is d's shape epoch; any goroutine.
func (d *Def) Epoch() uint64 { return d.epoch.Load() }

// BumpEpoch records that a server's copy of d parsed at epoch from had its
// plan refused: d's epoch becomes from+1, unless another server's report
// already took it past from (one migration, one bump). It reports whether
// this call bumped it.
func (d *Def) BumpEpoch(from uint64) bool { return d.epoch.CompareAndSwap(from, from+1) }

// ClientStmt is a client's name for a definition, with the shape epoch of
// the result description the client has for it: d's epoch when the client
// prepared the name, brought up to date when the client is sent the new
// shape (Learned). Its holder's lock guards it.
type ClientStmt struct {
	Def   *Def
	Epoch uint64
}

// NewClientStmt is a client's name for d, prepared now: it has d's
// current shape.
func NewClientStmt(d *Def) *ClientStmt { return &ClientStmt{Def: d, Epoch: d.Epoch()} }

// Current reports whether the client's description is of the definition's
// current shape.
func (cs *ClientStmt) Current() bool { return cs.Epoch >= cs.Def.Epoch() }

// Learned brings the client's epoch up to epoch: it has been sent the
// description of a copy parsed at that epoch.
func (cs *ClientStmt) Learned(epoch uint64) {
	if epoch > cs.Epoch {
		cs.Epoch = epoch
	}
}

// Registry holds every statement any client or server references. Its
// methods are safe for concurrent use.
type Registry struct {
	mu    sync.Mutex
	byKey map[key]*Def
	next  uint64 // the number of the last server-side name made
	// bytes is the statement text held for prepared statements: the
	// definitions, and whatever else a caller reserved (ReserveText).
	bytes atomic.Int64
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byKey: map[key]*Def{}} }

// Acquire returns the definition for (query, types), creating it, with one
// more reference. It returns nil when a new definition would take the
// statement text past limit bytes (0 = no limit); one that exists is
// handed out whatever the limit, as its text is already counted.
func (r *Registry) Acquire(query string, types []byte, limit int) *Def {
	k := key{query, string(types)}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.byKey[k]
	if d == nil {
		d = &Def{Query: query, Types: bytes.Clone(types), key: k}
		if !r.ReserveText(d.Size(), limit) {
			return nil
		}
		r.next++
		d.Name = namePrefix + strconv.FormatUint(r.next, 10)
		r.byKey[k] = d
	}
	d.refs++
	return d
}

// AdoptNamed returns, with one more reference, the definition for (query,
// types) under the server-side name a server taken over from an old
// process (online restart) knows it by. The old process named each
// definition once, so the names it hands over never clash; the next name
// made here comes after the highest. A definition made here first keeps
// its name (that server then lacks it, and it is prepared again when
// needed). An adopted definition is validated: Postgres parsed it.
func (r *Registry) AdoptNamed(name, query string, types []byte) *Def {
	k := key{query, string(types)}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.byKey[k]
	if d == nil {
		d = &Def{Name: name, Query: query, Types: bytes.Clone(types), key: k}
		r.ReserveText(d.Size(), 0)
		r.byKey[k] = d
		d.validated.Store(true)
		if n, err := strconv.ParseUint(strings.TrimPrefix(name, namePrefix), 10, 64); err == nil && n > r.next {
			r.next = n
		}
	}
	d.refs++
	return d
}

// LookupValidated returns, with one more reference, the definition for
// (query, types) if a server has parsed it successfully; else nil.
func (r *Registry) LookupValidated(query string, types []byte) *Def {
	k := key{query, string(types)}
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.byKey[k]
	if d == nil || !d.validated.Load() {
		return nil
	}
	d.refs++
	return d
}

// ReserveText counts n bytes of statement text, or reports false and
// counts nothing when that would pass limit (0 = no limit). Callers
// reserve the text they keep besides the definitions (a client's
// remembered unnamed Parse) so that one budget bounds both.
func (r *Registry) ReserveText(n int64, limit int) bool {
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

// ReleaseText gives back what ReserveText counted.
func (r *Registry) ReleaseText(n int64) { r.bytes.Add(-n) }

// TextBytes is the statement text counted now; any goroutine.
func (r *Registry) TextBytes() int64 { return r.bytes.Load() }

// Ref adds a reference to d.
func (r *Registry) Ref(d *Def) {
	r.mu.Lock()
	d.refs++
	r.mu.Unlock()
}

// Release drops one reference to d; the definition is forgotten at zero
// and its text no longer counted.
func (r *Registry) Release(d *Def) {
	r.mu.Lock()
	d.refs--
	if d.refs == 0 {
		delete(r.byKey, d.key)
		r.ReleaseText(d.Size())
	}
	r.mu.Unlock()
}

// Len is the number of definitions held.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byKey)
}
