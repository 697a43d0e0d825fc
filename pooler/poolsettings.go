package pooler

import "github.com/pgturnstile/pgturnstile/config"

// The timeouts a pool's servers and clients live by are the global
// settings with the pool's [users] and [databases] overrides applied
// (config.Resolve's Timeouts). The pool keeps them as a whole Settings
// value, so the code that reads a timeout reads it the same way from the
// pool as from the service; it is rebuilt whenever the pool's limits are
// resolved (a new pool, Apply), and read without the pool's lock.

// poolSettings returns the settings st with the timeouts t in force.
func poolSettings(st *config.Settings, t config.Timeouts) *config.Settings {
	ps := *st
	ps.QueryTimeout = t.QueryTimeout
	ps.IdleTransactionTimeout = t.IdleTransactionTimeout
	ps.TransactionTimeout = t.TransactionTimeout
	ps.ClientIdleTimeout = t.ClientIdleTimeout
	ps.QueryWaitTimeout = t.QueryWaitTimeout
	ps.ServerLifetime = t.ServerLifetime
	return &ps
}

// settings returns the settings in force for this pool's servers and
// clients: the service's, with the pool's timeouts.
func (p *serverPool) settings() *config.Settings {
	if st := p.st.Load(); st != nil {
		return st
	}
	return p.svc.settings()
}

// setSettings records the settings of cfg with the timeouts t for the pool.
func (p *serverPool) setSettings(cfg *config.Config, t config.Timeouts) {
	p.st.Store(poolSettings(&cfg.Settings, t))
}

// settings returns the settings in force for the client: its pool's, with
// its own user's client_idle_timeout, which PgBouncer takes from the
// client's login user, not the pool's (a database's forced user).
func (c *client) settings() *config.Settings {
	if c.pool == nil {
		return c.svc.settings()
	}
	st := c.pool.settings()
	if c.user == c.pool.key.user {
		return st
	}
	cfg := c.svc.config()
	idle := cfg.Settings.ClientIdleTimeout
	if u := cfg.Users[c.user]; u != nil && u.ClientIdleTimeout > 0 {
		idle = u.ClientIdleTimeout
	}
	if idle == st.ClientIdleTimeout {
		return st
	}
	cst := *st
	cst.ClientIdleTimeout = idle
	return &cst
}
