package pooler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/pause"
	"github.com/pgturnstile/pgturnstile/shard/session"
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
//     in the immutable pause.Set (a map index and a few compares).
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

// holdIfPaused is the routing path's check of a transaction about to
// link with span t (recorded in link.mu.shardTx just before, under c.mu):
// one atomic load while nothing is paused. held: the transaction waited
// (waitShardPause's step).
func (l *link) holdIfPaused(typ byte, t pause.Span) (loopStep, bool) {
	ps := l.c.svc.shardPauses.Current()
	if ps == nil || !ps.Holds(l.c.shard.Cluster, t) {
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
func (l *link) waitShardPause(typ byte, t pause.Span) loopStep {
	c := l.c
	sp := &c.svc.shardPauses
	queryTimeout := c.svc.settings().QueryTimeout
	limit := waitLimit(queryTimeout, c.settings().QueryWaitTimeout)
	start := c.svc.clock.Now()
	w := pause.NewWaiter(c.shard.Cluster, t)
	c.mu.Lock()
	l.mu.route = nil
	l.mu.shardTx = pause.Span{}
	// A cancel request reaches this wait through cancelWait; the pool
	// queue it also tries (the client's own pool) does not hold this
	// wait's number.
	l.newWaitLocked(start)
	l.mu.pool = c.pool
	cancel := l.mu.cancelWait
	c.mu.Unlock()
	c.svc.changes.Notify() // a PAUSE SHARD scanning for this span
	if !sp.Enqueue(w) {
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
	case <-w.Woken():
		l.endWait()
		return stepReroute
	case <-expired:
		if !sp.Remove(w) {
			<-w.Woken() // resumed at the same moment: it goes on
			l.endWait()
			return stepReroute
		}
		l.endWait()
		c.r.Skip()
		c.fail(pgerror.New(waitTimeoutCode(queryTimeout, c.svc.clock.Since(start))))
		return stepEnd
	case <-cancel:
		if !sp.Remove(w) {
			<-w.Woken()
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
	if !l.mu.shardTx.Touches() {
		return
	}
	l.mu.shardTx = pause.Span{}
	if l.c.svc.shardPauses.Current() != nil {
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
	u := pause.SpanOf(d)
	if !u.Touches() {
		return nil
	}
	ss := l.c.shard
	if cl := ss.Map(); cl != nil && cl.Shadow {
		return nil
	}
	if ps := l.c.svc.shardPauses.Current(); ps != nil && ps.NewlyHeld(ss.Cluster, l.mu.shardTx, u) {
		msg := "pgturnstile: statement for a paused range of cluster " + ss.Cluster + " in a transaction that began outside it"
		detail := "PAUSE SHARD holds new transactions for its range, and a transaction that did not touch the range may not enter it."
		hint := "Run it in a transaction of its own: it waits until RESUME SHARD."
		switch typ {
		case wire.MsgQuery:
			return session.RaiseQuery(msg, detail, hint)
		case wire.MsgBind:
			l.mu.refusal = wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "0A000", msg, detail, hint)
			return poisonBind
		}
		return nil
	}
	l.mu.shardTx.Widen(u)
	return nil
}

// shardTarget reads PAUSE SHARD's and RESUME SHARD's "cluster.colo" and
// range against the map in force; rng "" is the whole colocation.
func (s *Service) shardTarget(target, rng string) (pause.Ref, pause.Range, error) {
	i := strings.LastIndexByte(target, '.')
	if i <= 0 || i == len(target)-1 {
		return pause.Ref{}, pause.Range{}, &admin.Error{SQLState: admin.CodeProtocolViolation,
			Message: "PAUSE SHARD and RESUME SHARD take cluster.colo: " + target}
	}
	ref := pause.Ref{Cluster: target[:i], Colo: target[i+1:]}
	cl := s.gen.Load().shards.Cluster(ref.Cluster)
	if cl == nil {
		return ref, pause.Range{}, &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "no such cluster: " + ref.Cluster}
	}
	if cl.Colo(ref.Colo) == nil {
		return ref, pause.Range{}, &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "no such colo: " + target}
	}
	if rng == "" {
		return ref, pause.Range{First: 0, Last: cl.LogicalShards - 1}, nil
	}
	first, last, err := shard.ParseRange(rng)
	if err != nil {
		return ref, pause.Range{}, &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "bad range " + rng + ": " + err.Error()}
	}
	if last >= cl.LogicalShards {
		return ref, pause.Range{}, &admin.Error{SQLState: admin.CodeProtocolViolation,
			Message: fmt.Sprintf("bad range %s: cluster %s has logical shards 0-%d", rng, ref.Cluster, cl.LogicalShards-1)}
	}
	return ref, pause.Range{First: first, Last: last}, nil
}

// PauseShard is PAUSE SHARD: the range is paused at once (new
// transactions with a key in it wait), and the command returns when no
// transaction touching it runs any more (or a RESUME SHARD ended the
// pause), as PAUSE returns when the database's servers are released.
func (v consoleView) PauseShard(target, rng string) error {
	drained, err := v.s.pauseShard(target, rng, "PAUSE SHARD")
	if err != nil {
		return err
	}
	// The console has no deadline for PAUSE SHARD, as for PAUSE.
	return drained(context.Background())
}

// PauseShardRange pauses logical shards rng of cluster.colo for a fleet
// move (`pgturnstile shard move` through etcd), at once, as PAUSE SHARD
// does; drained then waits until no transaction in it runs (or the pause
// has ended), or for its ctx.
func (s *Service) PauseShardRange(cluster, colo, rng string) (drained func(context.Context) error, err error) {
	return s.pauseShard(cluster+"."+colo, rng, "fleet pause")
}

func (s *Service) pauseShard(target, rng, what string) (drained func(context.Context) error, err error) {
	ref, r, err := s.shardTarget(target, rng)
	if err != nil {
		return nil, err
	}
	if err := s.shardPauses.Pause(ref, r); err != nil {
		return nil, &admin.Error{SQLState: admin.CodeProtocolViolation, Message: err.Error()}
	}
	s.log.Info(what + " " + ref.Cluster + "." + ref.Colo + " " + r.String() + ": new transactions in the range wait")
	return func(ctx context.Context) error {
		return s.changes.Wait(ctx, func() bool {
			return !s.shardPauses.IsPaused(ref, r) || s.shardRunning(ref, r) == 0
		})
	}, nil
}

// ResumeShardRange ends a PauseShardRange: the range's waiters go on.
// A range not paused (RESUME SHARD ended it, a RELOAD dropped it) is no
// error.
func (s *Service) ResumeShardRange(cluster, colo, rng string) {
	first, last, err := shard.ParseRange(rng)
	if err != nil {
		return
	}
	ref, r := pause.Ref{Cluster: cluster, Colo: colo}, pause.Range{First: first, Last: last}
	if s.shardPauses.Resume(ref, r, false) == nil {
		s.log.Info("fleet resume " + cluster + "." + colo + " " + rng)
		s.changes.Notify()
	}
}

// shardRunning counts the clients whose transaction touches range r of
// ref: about to link, waiting for a server or linked.
func (s *Service) shardRunning(ref pause.Ref, r pause.Range) int {
	n := 0
	for _, c := range s.allClients() {
		if c.dbName != ref.Cluster {
			continue
		}
		c.mu.Lock()
		if l := c.mu.link; l != nil {
			if l.mu.shardTx.In(ref.Colo, r) {
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
	ref := pause.Ref{Cluster: target[:i], Colo: target[i+1:]}
	var r pause.Range
	if rng != "" {
		first, last, err := shard.ParseRange(rng)
		if err != nil {
			return &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "bad range " + rng + ": " + err.Error()}
		}
		r = pause.Range{First: first, Last: last}
	}
	if err := s.shardPauses.Resume(ref, r, rng == ""); err != nil {
		return &admin.Error{SQLState: admin.CodeProtocolViolation, Message: err.Error()}
	}
	s.log.Info("RESUME SHARD " + target + " " + rng)
	s.changes.Notify() // a PAUSE SHARD of the range still waiting
	return nil
}
