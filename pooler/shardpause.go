package pooler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// PAUSE SHARD cluster.colo RANGE and RESUME SHARD (issue 36): the paused
// ranges of logical shards, the transactions waiting for them, and the
// check on the routing path (shardroute.go, shardLink).
//
// The design, by cost:
//
//   - The routing path reads one atomic pointer (shardPauses.set): nil
//     while nothing is paused anywhere, which is the common case. Only
//     when some range is paused does a transaction look its colocation up
//     in the immutable pauseSet (a map index and a few compares).
//   - What is in flight is not counted per range; each link records the
//     logical span of its transaction (link.mu.shardTx) under the client's
//     lock that shardLink takes anyway to set the transaction's pool, and
//     forgets it when the server goes back (unlinkServerLocked) or the wait
//     ends without one (endWait). PAUSE SHARD publishes the pause first and
//     then scans the clients of the cluster under their locks: a client
//     that read the pointer before the pause recorded its span before that
//     read, so the scan sees it (both the store and the load are
//     sequentially consistent, and the client's unlock precedes its load).
//     The scan repeats at every s.changes.Notify, which a link forgetting
//     its span sends only while some range is paused. So nothing is
//     counted while nothing is paused, and PAUSE SHARD costs a scan of the
//     clients per transaction end while it waits.
//   - Waiters queue in arrival order, one queue for the whole service
//     (pauses are rare and few); a RESUME or a RELOAD wakes, in order,
//     those no range holds any more. A woken waiter routes its message
//     again from the start, under the map in force then: a RELOAD that
//     moved the range while it waited sends it to the new database.
//
// The pauses are keyed by cluster and colocation names and logical shard
// numbers, so they outlive a RELOAD that keeps them valid; one whose
// cluster or colocation a RELOAD removed (or whose range the new
// logical_shards does not hold) is dropped and its waiters woken, to meet
// the new map's routing error.

// coloRef names a colocation of a cluster.
type coloRef struct{ cluster, colo string }

// logicalRange is logical shards first to last, inclusive.
type logicalRange struct{ first, last uint32 }

func (r logicalRange) String() string { return shard.Range{First: r.first, Last: r.last}.String() }

func (r logicalRange) meets(lo, hi uint32) bool { return lo <= r.last && hi >= r.first }

// txSpan is what a transaction touches of its cluster's logical shards:
// the colocation and span of its keys, or every range (all: keys of several
// colocations, a scatter). The zero txSpan touches nothing (no key: the
// default database, a shard named by target).
type txSpan struct {
	set    bool
	all    bool
	colo   string
	lo, hi uint32
}

// spanOf is a decision's txSpan.
func spanOf(d shard.Decision) txSpan {
	switch {
	case d.Scattered():
		return txSpan{set: true, all: true}
	case d.Colo == nil:
		return txSpan{}
	}
	return txSpan{set: true, all: d.ManyColos, colo: d.Colo.Name, lo: d.Logical, hi: d.LogicalMax}
}

// widen makes t cover u too.
func (t *txSpan) widen(u txSpan) {
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

// pauseSet is the paused ranges at one moment: immutable, published whole.
type pauseSet struct {
	ranges   map[coloRef][]logicalRange
	clusters map[string]int // paused ranges per cluster
}

// holds reports whether span t of cluster meets a paused range.
func (ps *pauseSet) holds(cluster string, t txSpan) bool {
	if ps == nil || !t.set {
		return false
	}
	if t.all {
		return ps.clusters[cluster] > 0
	}
	for _, r := range ps.ranges[coloRef{cluster, t.colo}] {
		if r.meets(t.lo, t.hi) {
			return true
		}
	}
	return false
}

// newlyHeld reports whether span u of a running transaction meets a
// paused range its span so far, t, does not: the transaction began
// outside that range (before or after the pause) and may not enter it now.
func (ps *pauseSet) newlyHeld(cluster string, t, u txSpan) bool {
	if ps == nil || !u.set {
		return false
	}
	for ref, rs := range ps.ranges {
		if ref.cluster != cluster || !u.all && ref.colo != u.colo {
			continue
		}
		for _, r := range rs {
			if !u.all && !r.meets(u.lo, u.hi) {
				continue
			}
			inT := t.set && (t.all || t.colo == ref.colo && r.meets(t.lo, t.hi))
			if !inT {
				return true
			}
		}
	}
	return false
}

// pauseWaiter is one transaction waiting for paused ranges.
type pauseWaiter struct {
	cluster    string
	span       txSpan
	woken      chan struct{} // buffered(1): waking never blocks
	prev, next *pauseWaiter
	queued     bool
}

// shardPauses is the service's PAUSE SHARD state. The zero value has
// nothing paused.
type shardPauses struct {
	// set is the paused ranges in force; nil while none is.
	set atomic.Pointer[pauseSet]

	mu     sync.Mutex
	ranges map[coloRef][]logicalRange // sorted by first
	// head and tail: the waiters in arrival order.
	head, tail *pauseWaiter
	n          int
}

// pauseError is a console error of PAUSE SHARD and RESUME SHARD.
type pauseError struct{ msg string }

func (e *pauseError) Error() string { return e.msg }

// pause adds r to ref's paused ranges; it must overlap none of them.
func (sp *shardPauses) pause(ref coloRef, r logicalRange) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, p := range sp.ranges[ref] {
		if p.meets(r.first, r.last) {
			return &pauseError{fmt.Sprintf("range %s of %s.%s overlaps paused range %s", r, ref.cluster, ref.colo, p)}
		}
	}
	if sp.ranges == nil {
		sp.ranges = map[coloRef][]logicalRange{}
	}
	rs := append(slices.Clone(sp.ranges[ref]), r)
	slices.SortFunc(rs, func(a, b logicalRange) int { return int(a.first) - int(b.first) })
	sp.ranges[ref] = rs
	sp.publishLocked()
	return nil
}

// resume removes the paused range r of ref (exactly as paused), or every
// paused range of ref when all; it wakes the waiters no range holds now.
func (sp *shardPauses) resume(ref coloRef, r logicalRange, all bool) error {
	sp.mu.Lock()
	rs := sp.ranges[ref]
	var kept []logicalRange
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
			return &pauseError{fmt.Sprintf("no range of %s.%s is paused", ref.cluster, ref.colo)}
		}
		return &pauseError{fmt.Sprintf("range %s of %s.%s is not paused", r, ref.cluster, ref.colo)}
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
func (sp *shardPauses) isPaused(ref coloRef, r logicalRange) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return slices.Contains(sp.ranges[ref], r)
}

// reconcile follows a RELOAD: the pauses of colocations m no longer has,
// or beyond its logical shards, are dropped, and their waiters woken.
func (sp *shardPauses) reconcile(m *shard.Map) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	changed := false
	for ref, rs := range sp.ranges {
		var limit uint32
		if cl := m.Cluster(ref.cluster); cl != nil && cl.Colo(ref.colo) != nil {
			limit = cl.LogicalShards
		}
		kept := rs[:0:0]
		for _, r := range rs {
			if r.last < limit {
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
func (sp *shardPauses) publishLocked() {
	if len(sp.ranges) == 0 {
		sp.set.Store(nil)
		return
	}
	ps := &pauseSet{ranges: make(map[coloRef][]logicalRange, len(sp.ranges)), clusters: map[string]int{}}
	for ref, rs := range sp.ranges {
		ps.ranges[ref] = rs // never changed in place: pause and resume copy
		ps.clusters[ref.cluster] += len(rs)
	}
	sp.set.Store(ps)
}

// enqueue queues w unless the set in force no longer holds it (a RESUME
// came between the caller's check and now): false then, and the caller
// routes again.
func (sp *shardPauses) enqueue(w *pauseWaiter) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.set.Load().holds(w.cluster, w.span) {
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
func (sp *shardPauses) remove(w *pauseWaiter) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.removeLocked(w)
}

func (sp *shardPauses) removeLocked(w *pauseWaiter) bool {
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
func (sp *shardPauses) wakeLocked() {
	ps := sp.set.Load()
	for w := sp.head; w != nil; {
		next := w.next
		if !ps.holds(w.cluster, w.span) {
			sp.removeLocked(w)
			w.woken <- struct{}{}
		}
		w = next
	}
}

// pausedRow is a paused range and its waiters, for SHOW SHARDS.
type pausedRow struct {
	r       logicalRange
	waiting int
}

// snapshot returns the paused ranges of every colocation with the number
// of waiters each holds (a waiter held by two ranges counts in both).
func (sp *shardPauses) snapshot() map[coloRef][]pausedRow {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	out := make(map[coloRef][]pausedRow, len(sp.ranges))
	for ref, rs := range sp.ranges {
		rows := make([]pausedRow, len(rs))
		for i, r := range rs {
			rows[i].r = r
			for w := sp.head; w != nil; w = w.next {
				if w.cluster != ref.cluster {
					continue
				}
				if w.span.all || w.span.colo == ref.colo && r.meets(w.span.lo, w.span.hi) {
					rows[i].waiting++
				}
			}
		}
		out[ref] = rows
	}
	return out
}

// waiting is the number of transactions waiting for a paused range.
func (sp *shardPauses) waiting() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.n
}

// holdIfPaused is the routing path's check of a transaction about to
// link with span t (recorded in link.mu.shardTx just before, under c.mu):
// one atomic load while nothing is paused. held: the transaction waited
// (waitShardPause's step).
func (l *link) holdIfPaused(typ byte, t txSpan) (loopStep, bool) {
	ps := l.c.svc.shardPauses.set.Load()
	if ps == nil || !ps.holds(l.c.shard.cluster, t) {
		return stepOn, false
	}
	return l.waitShardPause(typ, t), true
}

// waitShardPause waits, in arrival order, while a paused range holds the
// transaction's span t: until RESUME SHARD (or a RELOAD that drops the
// pause), then stepReroute, and route decides the message again under the
// map in force; until query_wait_timeout (or query_timeout) has passed,
// then the client is closed with PgBouncer's query_wait_timeout, as a
// wait for a server is; or until a cancel request, answered as one for a
// wait for a server (57014). The client is waiting meanwhile (SHOW
// CLIENTS, cl_waiting of its own pool), and holds no server: the
// transaction's span is forgotten, so PAUSE SHARD does not wait for it.
func (l *link) waitShardPause(typ byte, t txSpan) loopStep {
	c := l.c
	sp := &c.svc.shardPauses
	queryTimeout := c.svc.settings().QueryTimeout
	limit := waitLimit(queryTimeout, c.settings().QueryWaitTimeout)
	start := c.svc.clock.Now()
	w := &pauseWaiter{cluster: c.shard.cluster, span: t, woken: make(chan struct{}, 1)}
	c.mu.Lock()
	l.mu.route = nil
	l.mu.shardTx = txSpan{}
	c.setStateLocked(clientWaiting)
	l.mu.waitStart = start
	if l.mu.cancelWait == nil {
		l.mu.cancelWait = make(chan struct{}, 1)
	}
	select {
	case <-l.mu.cancelWait: // a stale cancel for an earlier wait
	default:
	}
	if l.mu.poolWait == nil {
		l.mu.poolWait = &poolWaiter{notify: make(chan struct{}, 1), onQueued: c.sendQueuedNotice}
	}
	// A cancel request reaches this wait through cancelWait; the pool
	// queue it also tries (the client's own pool) does not hold this
	// wait's number.
	l.mu.poolWait.seq.Add(1)
	l.mu.pool = c.pool
	cancel := l.mu.cancelWait
	c.mu.Unlock()
	c.svc.changes.Notify() // a PAUSE SHARD scanning for this span
	if !sp.enqueue(w) {
		l.endWait()
		return stepReroute
	}
	var expired <-chan time.Time
	if limit > 0 {
		tm := c.svc.clock.NewTimer(limit)
		defer tm.Stop()
		expired = tm.C()
	}
	select {
	case <-w.woken:
		l.endWait()
		return stepReroute
	case <-expired:
		if !sp.remove(w) {
			<-w.woken // resumed at the same moment: it goes on
			l.endWait()
			return stepReroute
		}
		l.endWait()
		c.r.Skip()
		c.fail(pgerror.New(waitTimeoutCode(queryTimeout, c.svc.clock.Since(start))))
		return stepEnd
	case <-cancel:
		if !sp.remove(w) {
			<-w.woken
		}
		l.endWait()
		if err := c.queryCanceled(typ); err != nil {
			c.leave(err)
			return stepEnd
		}
		return stepNext
	}
}

// forgetShardTxLocked ends the transaction's span (its server went back,
// or its wait ended without one); a PAUSE SHARD waiting for it hears of
// it. c.mu held.
func (l *link) forgetShardTxLocked() {
	if !l.mu.shardTx.set {
		return
	}
	l.mu.shardTx = txSpan{}
	if l.c.svc.shardPauses.set.Load() != nil {
		l.c.svc.changes.Notify()
	}
}

// pausedInTxLocked holds a statement of a transaction already linked
// (span so far l.mu.shardTx) whose keys d enter a paused range the
// transaction was not in: refused as a statement for another shard is
// (raise), since it must not run on the range's old database once PAUSE
// SHARD has returned. Otherwise the statement's span joins the
// transaction's, which PAUSE SHARD waits for. c.mu held.
func (l *link) pausedInTxLocked(typ byte, d shard.Decision) (raise []byte) {
	u := spanOf(d)
	if !u.set {
		return nil
	}
	ss := l.c.shard
	if ss.routerOf != nil && ss.routerOf.Shadow {
		return nil
	}
	if ps := l.c.svc.shardPauses.set.Load(); ps != nil && ps.newlyHeld(ss.cluster, l.mu.shardTx, u) {
		msg := "pgturnstile: statement for a paused range of cluster " + ss.cluster + " in a transaction that began outside it"
		detail := "PAUSE SHARD holds new transactions for its range, and a transaction that did not touch the range may not enter it."
		hint := "Run it in a transaction of its own: it waits until RESUME SHARD."
		switch typ {
		case wire.MsgQuery:
			return raiseQuery(msg, detail, hint)
		case wire.MsgBind:
			l.mu.refusal = wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "0A000", msg, detail, hint)
			return poisonBind
		}
		return nil
	}
	l.mu.shardTx.widen(u)
	return nil
}

// shardPart is a piece of a map range for SHOW SHARDS: wholly paused (by
// one paused range, whose waiters it shows) or wholly running.
type shardPart struct {
	r       logicalRange
	paused  bool
	waiting int
}

// splitByPauses cuts r where the paused ranges (sorted, disjoint) start
// and end.
func splitByPauses(r logicalRange, paused []pausedRow) []shardPart {
	var out []shardPart
	at := r.first
	for _, p := range paused {
		if !p.r.meets(r.first, r.last) {
			continue
		}
		lo, hi := max(p.r.first, r.first), min(p.r.last, r.last)
		if lo > at {
			out = append(out, shardPart{r: logicalRange{at, lo - 1}})
		}
		out = append(out, shardPart{r: logicalRange{lo, hi}, paused: true, waiting: p.waiting})
		at = hi + 1
		if hi == r.last {
			return out
		}
	}
	return append(out, shardPart{r: logicalRange{at, r.last}})
}

// shardTarget reads PAUSE SHARD's and RESUME SHARD's "cluster.colo" and
// range against the map in force; rng "" is the whole colocation.
func (s *Service) shardTarget(target, rng string) (coloRef, logicalRange, error) {
	i := strings.LastIndexByte(target, '.')
	if i <= 0 || i == len(target)-1 {
		return coloRef{}, logicalRange{}, &admin.Error{SQLState: admin.CodeProtocolViolation,
			Message: "PAUSE SHARD and RESUME SHARD take cluster.colo: " + target}
	}
	ref := coloRef{target[:i], target[i+1:]}
	cl := s.gen.Load().shards.Cluster(ref.cluster)
	if cl == nil {
		return ref, logicalRange{}, &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "no such cluster: " + ref.cluster}
	}
	if cl.Colo(ref.colo) == nil {
		return ref, logicalRange{}, &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "no such colo: " + target}
	}
	if rng == "" {
		return ref, logicalRange{0, cl.LogicalShards - 1}, nil
	}
	first, last, err := shard.ParseRange(rng)
	if err != nil {
		return ref, logicalRange{}, &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "bad range " + rng + ": " + err.Error()}
	}
	if last >= cl.LogicalShards {
		return ref, logicalRange{}, &admin.Error{SQLState: admin.CodeProtocolViolation,
			Message: fmt.Sprintf("bad range %s: cluster %s has logical shards 0-%d", rng, ref.cluster, cl.LogicalShards-1)}
	}
	return ref, logicalRange{first, last}, nil
}

// PauseShard is PAUSE SHARD: the range is paused at once (new
// transactions with a key in it wait), and the command returns when no
// transaction touching it runs any more (or a RESUME SHARD ended the
// pause), as PAUSE returns when the database's servers are released.
func (v consoleView) PauseShard(target, rng string) error {
	s := v.s
	ref, r, err := s.shardTarget(target, rng)
	if err != nil {
		return err
	}
	if err := s.shardPauses.pause(ref, r); err != nil {
		return &admin.Error{SQLState: admin.CodeProtocolViolation, Message: err.Error()}
	}
	s.log.Info("PAUSE SHARD " + ref.cluster + "." + ref.colo + " " + r.String() + ": new transactions in the range wait")
	// The console has no deadline for PAUSE SHARD, as for PAUSE.
	_ = s.changes.Wait(context.Background(), func() bool {
		return !s.shardPauses.isPaused(ref, r) || s.shardRunning(ref, r) == 0
	})
	return nil
}

// shardRunning counts the clients whose transaction touches range r of
// ref: about to link, waiting for a server or linked.
func (s *Service) shardRunning(ref coloRef, r logicalRange) int {
	n := 0
	for _, c := range s.allClients() {
		if c.dbName != ref.cluster {
			continue
		}
		c.mu.Lock()
		if l := c.mu.link; l != nil {
			t := l.mu.shardTx
			if t.set && (t.all || t.colo == ref.colo && r.meets(t.lo, t.hi)) {
				n++
			}
		}
		c.mu.Unlock()
	}
	return n
}

// ResumeShard is RESUME SHARD: the range's waiters go on, in arrival
// order, each routed by the map in force now.
func (v consoleView) ResumeShard(target, rng string) error {
	s := v.s
	i := strings.LastIndexByte(target, '.')
	if i <= 0 || i == len(target)-1 {
		return &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "PAUSE SHARD and RESUME SHARD take cluster.colo: " + target}
	}
	ref := coloRef{target[:i], target[i+1:]}
	var r logicalRange
	if rng != "" {
		first, last, err := shard.ParseRange(rng)
		if err != nil {
			return &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "bad range " + rng + ": " + err.Error()}
		}
		r = logicalRange{first, last}
	}
	if err := s.shardPauses.resume(ref, r, rng == ""); err != nil {
		return &admin.Error{SQLState: admin.CodeProtocolViolation, Message: err.Error()}
	}
	s.log.Info("RESUME SHARD " + target + " " + rng)
	s.changes.Notify() // a PAUSE SHARD of the range still waiting
	return nil
}
