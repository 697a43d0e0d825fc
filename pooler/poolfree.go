package pooler

import (
	"fmt"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// Freeing unused pools: pool_idle_timeout frees any pool that has had no
// clients and no servers for that long; autodb_idle_timeout frees a
// database served from "*" once all its pools have been so for that long
// (PgBouncer's kill_database: its pools go, and a later client registers
// it anew).
//
// Why a client never joins a freed pool: the janitor decides and removes
// under Service.mu, the lock poolFor takes. Every poolFor pins the pool
// (pins, under Service.mu) and its caller unpins it once the pool holds
// what it came for: a login after it counted itself in the pool (login
// returns), an auth query after its server went back. A pool is freed
// only with no pins, no clients, no servers or logins, no waiters and no
// armed growth, so nothing can count itself in it afterwards. A freed
// pool still referenced elsewhere (a RELOAD or RESUME pass that copied the
// pool list just before) is marked freed under its mu and opens no server.

// unpin drops a pin poolFor took.
func (s *Service) unpin(p *serverPool) {
	s.mu.Lock()
	p.pins--
	s.mu.Unlock()
}

// unusedLocked says whether p holds nothing: no client in any state, no
// server in any state, no login or waiter, no growth armed. p.mu held.
func (p *serverPool) unusedLocked() bool {
	return p.clients.Load() == 0 && p.total == 0 && len(p.servers) == 0 &&
		len(p.dials) == 0 && p.queue.len() == 0 && p.replWaiting.Load() == 0 &&
		p.growAt.IsZero() && !p.paused
}

// freeUnusedPools is the janitor's pass for pool_idle_timeout and
// autodb_idle_timeout.
func (s *Service) freeUnusedPools(now time.Time) {
	st := s.settings()
	if st.PoolIdleTimeout <= 0 && st.AutodbIdleTimeout <= 0 {
		return
	}
	cfg := s.config()
	// PgBouncer's lines for what is freed, logged once Service.mu is
	// released (no log write under an outer lock).
	var freedPools, droppedDBs []string
	defer func() {
		for _, l := range freedPools {
			s.log.Info(l)
		}
		for _, name := range droppedDBs {
			s.log.Warn("dropping database '" + name + "' as it does not exist anymore or inactive auto-database")
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	// An auto-database is unused since the latest of its pools' times;
	// zero once one of them is in use.
	type autoState struct {
		since time.Time
		inUse bool
	}
	autos := map[string]*autoState{}
	for _, p := range s.pools {
		p.mu.Lock()
		// A forced user's pool with a min_pool_size stays: nothing but
		// RELOAD would create it again (createForcedPools).
		keep := p.eff.MinPoolSize > 0 && p.dbEntry().User != ""
		unused := p.pins == 0 && !keep && p.unusedLocked()
		p.mu.Unlock()
		switch {
		case !unused:
			p.unusedSince = time.Time{}
		case p.unusedSince.IsZero():
			p.unusedSince = now
		}
		if isAutoDB(cfg, p.key.db) {
			a := autos[p.key.db]
			if a == nil {
				a = &autoState{}
				autos[p.key.db] = a
			}
			a.inUse = a.inUse || !unused
			if p.unusedSince.After(a.since) {
				a.since = p.unusedSince
			}
		}
	}
	for key, p := range s.pools {
		if p.unusedSince.IsZero() {
			continue
		}
		a := autos[key.db]
		autoGone := a != nil && !a.inUse && st.AutodbIdleTimeout > 0 && now.Sub(a.since) >= st.AutodbIdleTimeout
		poolGone := st.PoolIdleTimeout > 0 && now.Sub(p.unusedSince) >= st.PoolIdleTimeout
		if autoGone || poolGone {
			s.freePoolLocked(key, p)
		}
		if poolGone && !autoGone {
			// janitor.c's words; the auto-database's own line says why
			// its pools go.
			freedPools = append(freedPools, fmt.Sprintf("cleaning up idle pool for user %s on db %s because: pool idle timeout (age= %ds)",
				key.user, key.db, int64(now.Sub(p.unusedSince)/time.Second)))
		}
	}
	for name, a := range autos {
		if !a.inUse && st.AutodbIdleTimeout > 0 && now.Sub(a.since) >= st.AutodbIdleTimeout {
			s.autoDBs.Delete(name)
			droppedDBs = append(droppedDBs, name)
		}
	}
}

func isAutoDB(cfg *config.Config, name string) bool {
	_, listed := cfg.Databases[name]
	_, star := cfg.Databases["*"]
	return !listed && star
}

// freePoolLocked takes p out of the service: the pool map, its shared
// caps and its Prometheus series. Service.mu held, p unused and unpinned.
func (s *Service) freePoolLocked(key poolKey, p *serverPool) {
	p.mu.Lock()
	p.freed = true
	p.mu.Unlock()
	delete(s.pools, key)
	dropLimiterMember(s.dbLimits, key.db, p)
	dropLimiterMember(s.userLimits, key.user, p)
	prefix := "{" + p.metrics.labels
	for _, name := range s.metrics.ListMetricNames() {
		if i := strings.Index(name, prefix); i >= 0 {
			if rest := name[i+len(prefix):]; strings.HasPrefix(rest, "}") || strings.HasPrefix(rest, ",") {
				s.metrics.UnregisterMetric(name)
			}
		}
	}
}

// dropLimiterMember takes p out of the limiter of name, and the limiter
// out of m once no pool shares it (it then counts no server).
func dropLimiterMember(m map[string]*limiter, name string, p *serverPool) {
	l, ok := m[name]
	if !ok {
		return
	}
	if l.Drop(p) {
		delete(m, name)
	}
}
