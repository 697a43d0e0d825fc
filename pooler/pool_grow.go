package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/loginfail"
)

// A pool's growth: logins started for clients waiting (growLocked) within
// pool_size, the shared caps and the connect pacing; and what a failed
// login means to them (loginfail.FailsWaiters, fastFail).

// fastFail is PgBouncer's check at a client's login: while the pool's last
// server login failed less than server_login_retry ago and it has no
// logged-in server, a new client is refused at once with the cached error
// rather than queued behind a server that is down. Clients already
// connected, and the ones already waiting, keep waiting instead; so does a
// new client of a pool that has served before (it has its welcome) while
// its server is only unreachable (refused, timed out, starting up or
// shutting down: not loginfail.FailsWaiters): a client reconnecting
// during a Postgres restart waits for it like the connected ones, up to
// query_wait_timeout, instead of failing once per server_login_retry.
func (p *serverPool) fastFail() error {
	now := p.svc.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastLoginErr == nil {
		return nil // the common case, without FailsWaiters' allocations
	}
	if p.welcome != nil && !loginfail.FailsWaiters(p.lastLoginErr) {
		return nil
	}
	if p.loginRetryPendingLocked(now) && p.total-p.connecting == 0 {
		return loginfail.Cached(p.lastLoginErr)
	}
	return nil
}

// growLocked starts server logins for waiters that no login in flight will
// serve, within pool_size (plus reserve_pool_size when useReserve), the
// database and user caps, server_max_parallel_connects (a finishing login
// grows again) and the create bucket (the grow timer retries when the next
// token is due).
func (p *serverPool) growLocked(now time.Time, useReserve bool) {
	if p.paused || p.closed || p.freed || p.loginRetryPendingLocked(now) {
		return
	}
	// Clients queued at the admission gate are demand too: the gate's
	// capacity grows with the servers opened for them.
	defer p.syncGateLocked()
	need := p.queue.len() + p.gateWaitingLocked() - p.connecting
	for need > 0 {
		limit := p.eff.PoolSize
		if useReserve {
			limit += p.eff.ReservePoolSize
		}
		if limit > 0 && p.total >= limit {
			return
		}
		if !p.mayConnectLocked(now) || p.probingLocked() {
			return
		}
		// Eviction locks sibling pools, so it runs outside p.mu.
		if !p.dbLimit.TryTake() {
			go p.svc.evictFor(p, p.dbLimit)
			return
		}
		if !p.userLimit.TryTake() {
			p.dbLimit.Give()
			go p.svc.evictFor(p, p.userLimit)
			return
		}
		// Past pool_size, the login is the reserve pool's (logged as
		// PgBouncer does, when it starts).
		p.startConnectLocked(now, limit > p.eff.PoolSize && p.total >= p.eff.PoolSize)
		need--
	}
}

// regrowLocked continues growth after a login ended: it freed a slot of
// server_max_parallel_connects that waiters or min_pool_size may need.
func (p *serverPool) regrowLocked(now time.Time) {
	if p.queue.len() > 0 || p.gateWaitingLocked() > 0 {
		p.growLocked(now, p.reserveDueLocked(now))
	}
	p.syncGateLocked()
	p.fillMinLocked(now)
}

// loginRetryPendingLocked: the last login failed less than
// server_login_retry ago, so no new one starts yet; the janitor's pass
// grows the pool again once the interval is over.
func (p *serverPool) loginRetryPendingLocked(now time.Time) bool {
	return p.lastLoginErr != nil && now.Sub(p.lastLoginErrAt) < p.svc.settings().ServerLoginRetry
}

// kick retries growth for waiters, after a cap freed a slot.
func (p *serverPool) kick() {
	p.mu.Lock()
	if p.queue.len() > 0 {
		now := p.svc.clock.Now()
		p.growLocked(now, p.reserveDueLocked(now))
	}
	p.mu.Unlock()
}

func (p *serverPool) effective() config.Effective {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eff
}

// newLoginLocked makes the object of a server about to log in: from this
// moment the pool counts it (in login, and in total). It takes its id
// (S-n) now, as PgBouncer numbers a socket when it makes it, so the log
// lines of its login name it. p.mu is held.
func (p *serverPool) newLoginLocked() *server {
	s := &server{pool: p, target: p.target.Load(), id: p.svc.socketIDs.Add(1)}
	s.ep = p.pickEndpointLocked(s.target)
	p.setServerStateLocked(s, serverLogin)
	return s
}
