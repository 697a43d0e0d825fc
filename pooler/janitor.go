package pooler

import (
	"context"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/parking"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// janitor runs periodic pool maintenance.
func (s *Service) janitor(ctx context.Context) {
	t := s.clock.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	lastRoll := s.clock.Now()
	lastParkScan := s.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			now := s.clock.Now() // the clock's time, whatever the tick carries
			s.mu.Lock()
			pools := make([]*serverPool, 0, len(s.pools))
			for _, p := range s.pools {
				pools = append(pools, p)
			}
			s.mu.Unlock()
			period := s.settings().StatsPeriod
			roll := period > 0 && now.Sub(lastRoll) >= period
			if roll {
				lastRoll = now
			}
			var grown admin.Counters // all pools' growth over the period
			for _, p := range pools {
				p.maintain(now)
				if roll {
					grown = grown.Add(p.stats.rollPeriod(period))
				}
			}
			if roll {
				grown = grown.Add(s.consoleStats.rollPeriod(period))
				if s.settings().LogStats {
					s.log.Info(grown.PeriodAverages(period).StatsLine())
				}
			}
			s.freeUnusedPools(now)
			s.zoneCheckDue(ctx, now)
			if now.Sub(lastParkScan) >= parkScanEvery {
				lastParkScan = now
				// Client goroutines idle for the whole second end (a
				// burst's grown stacks); their memory goes back with
				// the parked clients', or on its own when it is much
				// (a stack freed while the collection runs goes at its
				// second, FreeOSMemory's).
				ended := s.workers.Shrink()
				if !s.requestParks(now) && ended >= returnAfterWorkers {
					parking.ReturnMemory()
				}
			}
		}
	}
}

// closeIdleOne closes the longest-idle server, for eviction under a shared
// cap; false if the pool had none.
func (p *serverPool) closeIdleOne() bool {
	p.mu.Lock()
	if len(p.idle) == 0 {
		p.mu.Unlock()
		return false
	}
	s := p.idle[0]
	p.setServerStateLocked(s, serverClosed)
	p.mu.Unlock()
	p.closeServer(s, "evicted")
	return true
}

func (p *serverPool) reserveDueLocked(now time.Time) bool {
	st := p.svc.settings()
	if p.eff.ReservePoolSize <= 0 || st.ReservePoolTimeout <= 0 {
		return false
	}
	w := p.queue.oldest()
	return w != nil && now.Sub(w.enqueued) >= st.ReservePoolTimeout
}

// maintain is the janitor's periodic pass over one pool: idle and lifetime
// limits, query_wait_timeout, reserve pool, min_pool_size.
func (p *serverPool) maintain(now time.Time) {
	st := p.settings()
	// Waiting clients are held to the global query_timeout, as in
	// PgBouncer's janitor; the per-user one bounds a running query.
	queryTimeout := p.svc.settings().QueryTimeout
	var doomed []*server
	var reasons []string
	p.mu.Lock()
	var evict []*server
	if st.LimitEvictGrace > 0 {
		// Busy servers over a lowered limit whose client did not release
		// them within limit_evict_grace are taken away; the client gets
		// FATAL "evicted" from its pump, which discards the server.
		for s := range p.servers {
			if s.state == serverActive && !s.evictAt.IsZero() && now.After(s.evictAt) && !s.evicted.Load() {
				s.evicted.Store(true)
				evict = append(evict, s)
			}
		}
	}
	// Replication servers, which live as long as their client, are
	// closed as soon as they are marked close_needed (pool_replication.go).
	evict = append(evict, p.replicationDoomedLocked()...)
	defer func() {
		for _, s := range evict {
			s.conn.Close()
			s.wakeAwaiter()
		}
	}()
	for _, s := range p.idle {
		reason := p.closeReasonLocked(s, st, now, true, len(doomed))
		if reason == "" && p.deadWhileIdleLocked(s, now) {
			// Postgres closed it (pg_terminate_backend, restart): an
			// emergency, and min_pool_size below refills through the
			// create bucket.
			reason = "server conn crashed?"
		}
		if reason != "" && p.mayCloseLocked(reason, now) {
			doomed = append(doomed, s)
			reasons = append(reasons, reason)
		}
	}
	// Closed after the pass, which must not see the idle list change
	// under it; the pass counts the doomed itself (closing).
	for _, s := range doomed {
		p.setServerStateLocked(s, serverClosed)
	}
	expired := p.expireWaitersLocked(now, waitLimit(queryTimeout, st.QueryWaitTimeout))
	p.notifyWaitersLocked(now, st.QueryWaitNotify)
	p.regrowLocked(now)
	p.fillMinLocked(now)
	p.mu.Unlock()
	for _, w := range expired {
		w.give(grant{err: pgerror.New(waitTimeoutCode(queryTimeout, now.Sub(w.enqueued)))})
	}
	for i, s := range doomed {
		p.closeServer(s, reasons[i])
	}
	if st.ServerFastClose {
		p.fastClose()
	}
}

// waitLimit is how long a client may wait for a server: query_timeout or
// query_wait_timeout, whichever is set and shorter (0: no limit). As in
// PgBouncer's janitor, query_timeout also bounds the wait, so a client
// waiting for a server that cannot log in hears of it at query_timeout.
func waitLimit(queryTimeout, queryWaitTimeout time.Duration) time.Duration {
	limit := queryWaitTimeout
	if q := queryTimeout; q > 0 && (limit <= 0 || q < limit) {
		limit = q
	}
	return limit
}

// waitTimeoutCode is what a client that waited waited for is told:
// "query_timeout" once query_timeout has passed (PgBouncer checks it
// first), else "query_wait_timeout".
func waitTimeoutCode(queryTimeout, waited time.Duration) pgerror.Code {
	if queryTimeout > 0 && waited >= queryTimeout {
		return pgerror.QueryTimeoutWaiting
	}
	return pgerror.QueryWaitTimeout
}

// overLimitLocked reports whether the pool holds more servers than its
// size or a shared cap now allows.
func (p *serverPool) overLimitLocked() bool {
	if p.closed {
		return true
	}
	if size := p.eff.PoolSize + p.eff.ReservePoolSize; p.eff.PoolSize > 0 && p.total > size {
		return true
	}
	return p.dbLimit.Over() > 0 || p.userLimit.Over() > 0
}

// shrink brings the pool under a lowered limit (pool_size, or a shared cap
// it belongs to): logins in flight are aborted, idle servers closed, busy
// ones marked close_needed and closed when their client releases them, so
// the pool never grows back past the new limit (growth checks the caps
// too). Idle servers take a close token each (server_close_rate);
// those that find none are marked close_needed and closed by later janitor
// passes as tokens come; a later shrink does not count those twice.
func (p *serverPool) shrink() {
	excess := 0
	p.mu.Lock()
	if size := p.eff.PoolSize + p.eff.ReservePoolSize; p.eff.PoolSize > 0 && p.total > size {
		excess = p.total - size
	}
	if p.closed {
		excess = p.total
	}
	excess -= p.deferredLocked()
	p.mu.Unlock()
	excess = max(excess, p.dbLimit.Over()-limiterDeferred(p.dbLimit), p.userLimit.Over()-limiterDeferred(p.userLimit))
	if excess <= 0 {
		return
	}
	var doomed []*server
	now := p.svc.clock.Now()
	p.mu.Lock()
	// Logins in flight first: their backends would appear over the limit.
	for conn, aborted := range p.dials {
		if excess == 0 {
			break
		}
		if !aborted {
			p.dials[conn] = true
			conn.Close()
			excess--
		}
	}
	// Longest idle first (the front of the stack).
	for _, s := range p.idle {
		if excess > 0 && !s.closeNeeded {
			excess--
			if p.mayCloseLocked("limit lowered", now) {
				doomed = append(doomed, s)
				continue
			}
			s.closeNeeded = true
			s.doomReason = "limit lowered"
		}
	}
	for _, s := range doomed {
		p.setServerStateLocked(s, serverClosed)
	}
	// Busy ones next; a server waiting for its cancels to be done is
	// busy too: release's rule closes it when they are.
	for s := range p.servers {
		if excess == 0 {
			break
		}
		if (s.state == serverActive || s.state == serverBeingCanceled) && !s.closeNeeded {
			s.closeNeeded = true
			s.doomReason = "limit lowered"
			s.evictAt = p.svc.clock.Now().Add(p.svc.settings().LimitEvictGrace)
			excess--
		}
	}
	p.mu.Unlock()
	for _, s := range doomed {
		p.closeServer(s, "limit lowered")
	}
}
