package pooler

import (
	"errors"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/wire"
)

// A replication client's own server (replication.go): it counts in its
// pool (pool_size, SHOW POOLS, SHOW SERVERS) and in max_db_connections
// and max_user_connections like any server, but is never idle and never
// handed to another client. It goes login -> active -> closed.

// openReplication waits for room for c's server, then logs it in with
// the pool's startup parameters and extra. The room is a slot under
// pool_size and the database and user caps; when the pool is full, one
// of its idle servers is evicted to make it ("closing because: evicted"),
// as PgBouncer does for replication clients. wait bounds the wait
// (query_wait_timeout; 0 = none); a cancel request ends it.
func (p *serverPool) openReplication(c *client, extra []wire.Param, wait time.Duration) (*server, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	p.replWaiting.Add(1)
	s, err := p.replicationSlot(c, timeout)
	p.replWaiting.Add(-1)
	if err != nil {
		return nil, err
	}
	s.repl = c.repl
	s.replExtra = extra
	p.serverDebugf(s, "launching new connection to server")
	err = p.logIn(s)
	if err != nil {
		p.mu.Lock()
		p.setServerStateLocked(s, serverClosed)
		p.mu.Unlock()
		p.svc.changes.Notify()
		p.dbLimit.Give()
		p.userLimit.Give()
		p.svc.wakeLimited(p.dbLimit, p.userLimit)
		p.metrics.loginFailures.Inc()
		werr := replicationLoginError(p, s, err)
		if p.svc.logDisconnections() {
			reason := werr.Error()
			var pe *pgerror.Error
			if errors.As(werr, &pe) {
				reason = pe.Message
			}
			p.serverLogger(s).Info("closing because: " + reason + " (age=" + formatAge(p.svc.clock.Since(s.created)) + ")")
		}
		return nil, werr
	}
	p.mu.Lock()
	if p.servers == nil {
		p.servers = map[*server]struct{}{}
	}
	p.servers[s] = struct{}{}
	p.setServerStateLocked(s, serverActive)
	p.mu.Unlock()
	p.metrics.connects.Inc()
	if p.svc.logConnections() {
		p.serverLoggerAt(s, s.conn.RemoteAddr().String()).Info("new connection to server (from " + s.conn.LocalAddr().String() + ")")
	}
	return s, nil
}

// replicationSlot takes a slot for a new server of c, in state login,
// waiting for one as openReplication says.
func (p *serverPool) replicationSlot(c *client, timeout <-chan time.Time) (*server, error) {
	for {
		changed := p.svc.changes.Changed()
		p.mu.Lock()
		full := p.paused || p.closed || p.eff.PoolSize > 0 && p.total >= p.eff.PoolSize
		if !full {
			if p.dbLimit.TryTake() {
				if p.userLimit.TryTake() {
					s := p.newLoginLocked()
					s.created = p.svc.clock.Now()
					p.metrics.connectAttempts.Inc()
					p.mu.Unlock()
					return s, nil
				}
				p.dbLimit.Give()
				p.mu.Unlock()
				go p.svc.evictFor(p, p.userLimit)
			} else {
				p.mu.Unlock()
				go p.svc.evictFor(p, p.dbLimit)
			}
		} else {
			paused := p.paused || p.closed
			p.mu.Unlock()
			if !paused && p.closeIdleOne() {
				continue
			}
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, pgerror.New(pgerror.QueryWaitTimeout)
		case <-c.mu.link.mu.cancelWait:
			return nil, errWaitCanceled
		}
	}
}

// closeReplication closes a replication server whose client is gone (or
// that went away itself).
func (p *serverPool) closeReplication(s *server, reason string) {
	p.mu.Lock()
	p.setServerStateLocked(s, serverClosed)
	p.mu.Unlock()
	p.closeServer(s, reason)
}

// replicationDoomedLocked marks the replication servers that are to be
// closed (close_needed: RECONNECT, a changed database, a lowered limit)
// with PgBouncer's reason and returns them, for their sockets to be
// closed once p.mu is released: unlike a pooled server, which is closed
// when its client releases it, a replication server may never be
// released (a subscription streams for ever). Its client's relay then
// ends the link with that reason.
func (p *serverPool) replicationDoomedLocked() []*server {
	var out []*server
	for s := range p.servers {
		if s.repl != replNone && s.closeNeeded && s.state == serverActive && s.replEnd.Load() == nil {
			reason := "database configuration changed"
			s.replEnd.Store(&reason)
			out = append(out, s)
		}
	}
	return out
}
