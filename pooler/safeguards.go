package pooler

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/tokenbucket"
)

// Connection safeguards (PGKeeper's): server logins and closes of healthy
// servers are paced by per-pool token buckets, logins in flight are capped,
// lifetimes are spread so servers opened together do not expire together,
// and pools are warmed to min_pool_size before clients arrive. Postgres
// pays for every login (a fork, catalog caches, replanning); a pooler that
// reopens a whole pool at once after churn can overload the server it is
// recovering from.

// bucket is a pool's token bucket for logins or closes
// (internal/tokenbucket), guarded by the pool's mu.
type bucket = tokenbucket.Bucket

// lifetimeDraw is a server's position in the lifetime spread, in [-1, 1).
func lifetimeDraw() float64 { return rand.Float64()*2 - 1 }

// jitteredLifetime is base scaled by 1 + jitter·draw: with jitter 0.1, a
// server lives between 0.9 and 1.1 times server_lifetime. The draw is fixed
// per server; the settings are read at each check, so RELOAD applies.
func jitteredLifetime(base time.Duration, jitter, draw float64) time.Duration {
	return time.Duration(float64(base) * (1 + jitter*draw))
}

// idlePeekEvery is how often the janitor looks whether Postgres closed an
// idle server, so a pool whose backends were terminated refills (through
// the create bucket) without waiting for clients to trip over them.
const idlePeekEvery = time.Second

// Close reasons that are emergencies or operator stops: they never wait
// for a close token.
const (
	reasonPause   = "pause"
	reasonCrashed = "server conn crashed?"
	// reasonConfigChanged: RELOAD changed where or as whom the pool's
	// servers log in (retarget); PgBouncer's words.
	reasonConfigChanged = "database configuration changed"
)

// mayConnectLocked says whether one more server login may start now:
// server_max_parallel_connects has room (else the next login to finish
// grows again) and the create bucket has a token (else the grow timer is
// armed for when it will).
func (p *serverPool) mayConnectLocked(now time.Time) bool {
	st := p.svc.settings()
	if m := st.ServerMaxParallelConnects; m > 0 && p.connecting >= m {
		return false
	}
	p.creates.Set(st.ServerConnectRate, st.ServerConnectBurst, now)
	if d := p.creates.Wait(now); d > 0 {
		if p.tokenWaitSince.IsZero() {
			p.tokenWaitSince = now
		}
		p.armGrowLocked(now, d)
		return false
	}
	return true
}

// startConnectLocked takes a create token and starts one login; the caller
// checked mayConnectLocked and took the shared cap slots.
func (p *serverPool) startConnectLocked(now time.Time, fromReserve bool) {
	p.creates.Take(now)
	p.endTokenWaitLocked(now)
	s := p.newLoginLocked()
	s.fromReserve = fromReserve
	p.metrics.connectAttempts.Inc()
	if p.launch != nil {
		p.launch(s)
		return
	}
	go p.connect(s)
}

// endTokenWaitLocked adds the time growth waited for a create token to the
// pool's wait counter.
func (p *serverPool) endTokenWaitLocked(now time.Time) {
	if p.tokenWaitSince.IsZero() {
		return
	}
	p.metrics.connectWait.Add(now.Sub(p.tokenWaitSince).Seconds())
	p.tokenWaitSince = time.Time{}
}

// armGrowLocked makes the pool's one grow timer fire after d (unless it is
// already due sooner): growth that found no create token resumes then,
// without a goroutine per waiting login.
func (p *serverPool) armGrowLocked(now time.Time, d time.Duration) {
	at := now.Add(d)
	if !p.growAt.IsZero() && !at.Before(p.growAt) {
		return
	}
	p.growAt = at
	if p.growTimer == nil {
		p.growTimer = p.svc.clock.AfterFunc(d, p.growTick)
	} else {
		p.growTimer.Reset(d)
	}
}

// growTick is the grow timer: a create token is due.
func (p *serverPool) growTick() {
	now := p.svc.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.growAt = time.Time{}
	if p.queue.len() > 0 {
		p.growLocked(now, p.reserveDueLocked(now))
	}
	p.fillMinLocked(now)
	if p.growAt.IsZero() {
		// Nothing waits for a token any more.
		p.endTokenWaitLocked(now)
	}
}

// fillMinLocked starts logins up to min_pool_size, for pools that have
// clients or a forced user, through the same in-flight cap and create
// bucket as growth for waiters. After a failed login it waits
// server_login_retry, as growth for clients does.
func (p *serverPool) fillMinLocked(now time.Time) {
	if p.paused || p.closed || p.freed || p.eff.MinPoolSize <= 0 || (p.clientsInPool() == 0 && p.dbEntry().User == "") {
		return
	}
	if p.loginRetryPendingLocked(now) {
		return
	}
	// The gate learns of the logins it starts (its capacity and the
	// start-up rule follow them), as for growLocked's.
	defer p.syncGateLocked()
	for p.total < p.eff.MinPoolSize && (p.eff.PoolSize == 0 || p.total < p.eff.PoolSize) {
		if !p.mayConnectLocked(now) {
			return
		}
		if !p.dbLimit.TryTake() {
			return
		}
		if !p.userLimit.TryTake() {
			p.dbLimit.Give()
			return
		}
		p.startConnectLocked(now, false)
	}
}

// mayCloseLocked says whether a server may be closed for reason now.
// Emergencies and PAUSE close at once; a healthy server (idle timeout,
// lifetime, lowered limit, RECONNECT) needs a close token, else it stays
// in the pool until a later janitor pass finds one.
func (p *serverPool) mayCloseLocked(reason string, now time.Time) bool {
	if reason == reasonPause || reason == reasonCrashed || reason == reasonConfigChanged {
		// A server of the old target is not worth keeping for pacing:
		// after a failover it points at the wrong primary.
		return true
	}
	st := p.svc.settings()
	// Bursts of one second's worth: a RELOAD that shrinks a pool by a few
	// servers still takes effect at once.
	p.closes.Set(st.ServerCloseRate, max(st.ServerCloseRate, 1), now)
	if p.closes.Take(now) {
		return true
	}
	p.metrics.closeDeferred.Inc()
	return false
}

// deadWhileIdleLocked looks, at most every idlePeekEvery, whether Postgres
// closed an idle server (a non-blocking peek; nothing is consumed).
func (p *serverPool) deadWhileIdleLocked(s *server, now time.Time) bool {
	if now.Sub(s.lastUsed) < deadPeekAfter || now.Sub(s.peekedAt) < idlePeekEvery {
		return false
	}
	s.peekedAt = now
	return s.closedByPeer()
}

// deferredLocked counts the pool's idle servers that a shrink doomed but
// could not close for lack of a close token: they are on their way out, so
// a later shrink does not count them as excess again. (Busy servers marked
// close_needed are counted as before: a shrink closes idle servers first.)
func (p *serverPool) deferredLocked() int {
	n := 0
	for _, s := range p.idle {
		if s.closeNeeded {
			n++
		}
	}
	return n
}

// warm starts logins up to min_pool_size now (RESUME, start-up) instead of
// at the next janitor pass, and returns the number of servers it aims for.
func (p *serverPool) warm() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fillMinLocked(p.svc.clock.Now())
	want := p.eff.MinPoolSize
	if p.eff.PoolSize > 0 {
		want = min(want, p.eff.PoolSize)
	}
	return want
}

// warmState reports how many servers are logged in and the last login
// error, if any.
func (p *serverPool) warmState() (live int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total - p.connecting, p.lastLoginErr
}

// Warm opens min_pool_size servers for the pools that exist before any
// client (the [databases] entries with a forced user), paced by each pool's
// create bucket, and waits until they are logged in, a login fails, ctx
// ends or server_connect_timeout passes. Call it before Serve: the first
// clients then find servers ready instead of queueing behind logins.
func (s *Service) Warm(ctx context.Context) {
	st := s.settings()
	limit := st.ServerConnectTimeout
	if limit <= 0 {
		limit = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := s.clock.Now()
	type warming struct {
		p    *serverPool
		want int
	}
	var pending []warming
	for name, db := range s.config().Databases {
		if name == "*" || db.User == "" {
			continue
		}
		p, err := s.poolFor(db, db.User)
		if err != nil {
			s.log.Warn("pool warming: " + name + ": " + err.Error())
			continue
		}
		want := p.warm()
		s.unpin(p)
		if want > 0 {
			pending = append(pending, warming{p, want})
		}
	}
	report := func(w warming, live int, why string) {
		msg := "pool warming: " + strconv.Itoa(live) + "/" + strconv.Itoa(w.want) + " servers in " + s.clock.Since(start).Round(time.Millisecond).String()
		if why != "" {
			w.p.log.Warn(msg + ": " + why)
		} else {
			w.p.log.Info(msg)
		}
	}
	// Polling is enough here: it runs once, before clients are admitted.
	t := s.clock.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for len(pending) > 0 {
		next := pending[:0]
		for _, w := range pending {
			live, err := w.p.warmState()
			switch {
			case live >= w.want:
				report(w, live, "")
			case err != nil:
				report(w, live, "server login failed: "+err.Error())
			default:
				next = append(next, w)
			}
		}
		pending = next
		if len(pending) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			for _, w := range pending {
				live, _ := w.p.warmState()
				report(w, live, "gave up waiting (the janitor keeps filling the pool)")
			}
			return
		case <-t.C():
		}
	}
}

// drainCancelSlots bounds the cancel requests that drains of one pool have
// in flight: each is a new connection (and a forked process) on Postgres,
// and many clients leaving at once must not turn into a burst of them.
const drainCancelSlots = 4

// drainCancelTimeout bounds one drain cancel: the wait for a slot, then the
// request itself.
const drainCancelTimeout = 2 * time.Second

// drainCancel cancels the query of a server whose client left, on the
// pool's bounded cancel path. True when Postgres took the request (it
// closes the connection after signalling the backend).
func (p *serverPool) drainCancel(s *server) bool {
	t := p.svc.clock.NewTimer(drainCancelTimeout)
	defer t.Stop()
	select {
	case p.drainCancelPath <- struct{}{}:
	case <-t.C():
		p.metrics.count("pgturnstile_server_drain_cancels_total", "result", "no_slot")
		return false
	}
	defer func() { <-p.drainCancelPath }()
	if err := s.sendCancel(drainCancelTimeout); err != nil {
		p.serverLogger(s).Warn("cancel of an abandoned query failed: " + err.Error())
		p.metrics.count("pgturnstile_server_drain_cancels_total", "result", "failed")
		return false
	}
	p.metrics.count("pgturnstile_server_drain_cancels_total", "result", "sent")
	return true
}
