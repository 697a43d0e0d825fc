// Package pause is PAUSE SHARD's registry (issue 36): the paused ranges
// of logical shards by cluster and colocation, published whole behind one
// atomic pointer for the routing path, and the transactions waiting for
// them in arrival order. It knows nothing of clients or servers: the
// pooler (pooler/shardpause.go) waits on a Waiter, records each
// transaction's Span, and asks the Registry.
package pause

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pgturnstile/pgturnstile/shard"
)

// Ref names a colocation of a cluster.
type Ref struct{ Cluster, Colo string }

// Range is logical shards first to last, inclusive.
type Range struct{ First, Last uint32 }

func (r Range) String() string { return shard.Range{First: r.First, Last: r.Last}.String() }

func (r Range) Meets(lo, hi uint32) bool { return lo <= r.Last && hi >= r.First }

// Span is what a transaction touches of its cluster's logical shards:
// the colocation and span of its keys, or every range (all: keys of several
// colocations, a scatter). The zero Span touches nothing (no key: the
// default database, a shard named by target).
type Span struct {
	set    bool
	all    bool
	colo   string
	lo, hi uint32
}

// SpanOf is a decision's Span.
func SpanOf(d shard.Decision) Span {
	switch {
	case d.Scattered():
		return Span{set: true, all: true}
	case d.Colo == nil:
		return Span{}
	}
	return Span{set: true, all: d.ManyColos, colo: d.Colo.Name, lo: d.Logical, hi: d.LogicalMax}
}

// widen makes t cover u too.
func (t *Span) Widen(u Span) {
	switch {
	case !u.set:
	case !t.set:
		*t = u
	case u.all || t.all || u.colo != t.colo:
		t.all = true
	default:
		t.lo, t.hi = min(t.lo, u.lo), max(t.hi, u.hi)
	}
}

// Set is the paused ranges at one moment: immutable, published whole.
type Set struct {
	ranges   map[Ref][]Range
	clusters map[string]int // paused ranges per cluster
}

// holds reports whether span t of cluster meets a paused range.
func (ps *Set) Holds(cluster string, t Span) bool {
	if ps == nil || !t.set {
		return false
	}
	if t.all {
		return ps.clusters[cluster] > 0
	}
	for _, r := range ps.ranges[Ref{cluster, t.colo}] {
		if r.Meets(t.lo, t.hi) {
			return true
		}
	}
	return false
}

// newlyHeld reports whether span u of a running transaction meets a
// paused range its span so far, t, does not: the transaction began
// outside that range (before or after the pause) and may not enter it now.
func (ps *Set) NewlyHeld(cluster string, t, u Span) bool {
	if ps == nil || !u.set {
		return false
	}
	for ref, rs := range ps.ranges {
		if ref.Cluster != cluster || !u.all && ref.Colo != u.colo {
			continue
		}
		for _, r := range rs {
			if !u.all && !r.Meets(u.lo, u.hi) {
				continue
			}
			inT := t.set && (t.all || t.colo == ref.Colo && r.Meets(t.lo, t.hi))
			if !inT {
				return true
			}
		}
	}
	return false
}

// Waiter is one transaction waiting for paused ranges.
type Waiter struct {
	cluster    string
	span       Span
	woken      chan struct{} // buffered(1): waking never blocks
	prev, next *Waiter
	queued     bool
}

// Registry is the service's PAUSE SHARD state. The zero value has
// nothing paused.
type Registry struct {
	// set is the paused ranges in force; nil while none is.
	set atomic.Pointer[Set]

	mu     sync.Mutex
	ranges map[Ref][]Range // sorted by first
	// head and tail: the waiters in arrival order.
	head, tail *Waiter
	n          int
}

// Error is a console error of PAUSE SHARD and RESUME SHARD.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// pause adds r to ref's paused ranges; it must overlap none of them.
func (sp *Registry) Pause(ref Ref, r Range) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, p := range sp.ranges[ref] {
		if p.Meets(r.First, r.Last) {
			return &Error{fmt.Sprintf("range %s of %s.%s overlaps paused range %s", r, ref.Cluster, ref.Colo, p)}
		}
	}
	if sp.ranges == nil {
		sp.ranges = map[Ref][]Range{}
	}
	rs := append(slices.Clone(sp.ranges[ref]), r)
	slices.SortFunc(rs, func(a, b Range) int { return int(a.First) - int(b.First) })
	sp.ranges[ref] = rs
	sp.publishLocked()
	return nil
}

// resume removes the paused range r of ref (exactly as paused), or every
// paused range of ref when all; it wakes the waiters no range holds now.
func (sp *Registry) Resume(ref Ref, r Range, all bool) error {
	sp.mu.Lock()
	rs := sp.ranges[ref]
	var kept []Range
	found := false
	for _, p := range rs {
		if all || p == r {
			found = true
			continue
		}
		kept = append(kept, p)
	}
	if !found {
		sp.mu.Unlock()
		if all {
			return &Error{fmt.Sprintf("no range of %s.%s is paused", ref.Cluster, ref.Colo)}
		}
		return &Error{fmt.Sprintf("range %s of %s.%s is not paused", r, ref.Cluster, ref.Colo)}
	}
	if len(kept) == 0 {
		delete(sp.ranges, ref)
	} else {
		sp.ranges[ref] = kept
	}
	sp.publishLocked()
	sp.wakeLocked()
	sp.mu.Unlock()
	return nil
}

// isPaused reports whether r of ref is paused exactly as given.
func (sp *Registry) IsPaused(ref Ref, r Range) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return slices.Contains(sp.ranges[ref], r)
}

// reconcile follows a RELOAD: the pauses of colocations m no longer has,
// or beyond its logical shards, are dropped, and their waiters woken.
func (sp *Registry) Reconcile(m *shard.Map) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	changed := false
	for ref, rs := range sp.ranges {
		var limit uint32
		if cl := m.Cluster(ref.Cluster); cl != nil && cl.Colo(ref.Colo) != nil {
			limit = cl.LogicalShards
		}
		kept := rs[:0:0]
		for _, r := range rs {
			if r.Last < limit {
				kept = append(kept, r)
			}
		}
		if len(kept) == len(rs) {
			continue
		}
		changed = true
		if len(kept) == 0 {
			delete(sp.ranges, ref)
		} else {
			sp.ranges[ref] = kept
		}
	}
	if changed {
		sp.publishLocked()
	}
	// Woken whether or not a pause went: a waiter of a cluster the map
	// removed has nothing left to wait for.
	sp.wakeLocked()
}

// publishLocked makes the ranges the set in force (nil for none).
func (sp *Registry) publishLocked() {
	if len(sp.ranges) == 0 {
		sp.set.Store(nil)
		return
	}
	ps := &Set{ranges: make(map[Ref][]Range, len(sp.ranges)), clusters: map[string]int{}}
	for ref, rs := range sp.ranges {
		ps.ranges[ref] = rs // never changed in place: pause and resume copy
		ps.clusters[ref.Cluster] += len(rs)
	}
	sp.set.Store(ps)
}

// enqueue queues w unless the set in force no longer holds it (a RESUME
// came between the caller's check and now): false then, and the caller
// routes again.
func (sp *Registry) Enqueue(w *Waiter) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.set.Load().Holds(w.cluster, w.span) {
		return false
	}
	w.prev, w.next, w.queued = sp.tail, nil, true
	if sp.tail != nil {
		sp.tail.next = w
	} else {
		sp.head = w
	}
	sp.tail = w
	sp.n++
	return true
}

// remove takes w out of the queue; false when it was woken already.
func (sp *Registry) Remove(w *Waiter) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.removeLocked(w)
}

func (sp *Registry) removeLocked(w *Waiter) bool {
	if !w.queued {
		return false
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		sp.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		sp.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	sp.n--
	return true
}

// wakeLocked wakes, in arrival order, the waiters the set in force no
// longer holds.
func (sp *Registry) wakeLocked() {
	ps := sp.set.Load()
	for w := sp.head; w != nil; {
		next := w.next
		if !ps.Holds(w.cluster, w.span) {
			sp.removeLocked(w)
			w.woken <- struct{}{}
		}
		w = next
	}
}

// Row is a paused range and its waiters, for SHOW SHARDS.
type Row struct {
	r       Range
	waiting int
}

// snapshot returns the paused ranges of every colocation with the number
// of waiters each holds (a waiter held by two ranges counts in both).
func (sp *Registry) Snapshot() map[Ref][]Row {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	out := make(map[Ref][]Row, len(sp.ranges))
	for ref, rs := range sp.ranges {
		rows := make([]Row, len(rs))
		for i, r := range rs {
			rows[i].r = r
			for w := sp.head; w != nil; w = w.next {
				if w.cluster != ref.Cluster {
					continue
				}
				if w.span.all || w.span.colo == ref.Colo && r.Meets(w.span.lo, w.span.hi) {
					rows[i].waiting++
				}
			}
		}
		out[ref] = rows
	}
	return out
}

// waiting is the number of transactions waiting for a paused range.
func (sp *Registry) Waiting() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.n
}

// Part is a piece of a map range for SHOW SHARDS: wholly paused (by
// one paused range, whose waiters it shows) or wholly running.
type Part struct {
	Range   Range
	Paused  bool
	Waiting int
}

// Split cuts r where the paused ranges (sorted, disjoint) start
// and end.
func Split(r Range, paused []Row) []Part {
	var out []Part
	at := r.First
	for _, p := range paused {
		if !p.r.Meets(r.First, r.Last) {
			continue
		}
		lo, hi := max(p.r.First, r.First), min(p.r.Last, r.Last)
		if lo > at {
			out = append(out, Part{Range: Range{at, lo - 1}})
		}
		out = append(out, Part{Range: Range{lo, hi}, Paused: true, Waiting: p.waiting})
		at = hi + 1
		if hi == r.Last {
			return out
		}
	}
	return append(out, Part{Range: Range{at, r.Last}})
}

// Current is the set of paused ranges in force; nil while none is.
func (sp *Registry) Current() *Set { return sp.set.Load() }

// NewWaiter is a transaction of cluster with span t about to wait.
func NewWaiter(cluster string, t Span) *Waiter {
	return &Waiter{cluster: cluster, span: t, woken: make(chan struct{}, 1)}
}

// Woken is sent on once when no paused range holds the waiter any more.
func (w *Waiter) Woken() <-chan struct{} { return w.woken }

// SpanAll is the span of a transaction that may touch every range of its
// cluster (a scatter).
func SpanAll() Span { return Span{set: true, all: true} }

// Touches reports whether the span touches any logical shard.
func (t Span) Touches() bool { return t.set }

// In reports whether the span touches range r of colocation colo.
func (t Span) In(colo string, r Range) bool {
	return t.set && (t.all || t.colo == colo && r.Meets(t.lo, t.hi))
}
