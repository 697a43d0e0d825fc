package pooler

import "github.com/pgturnstile/pgturnstile/config"

// The timeouts a pool's servers and clients live by are the global
// settings with the pool's [users] and [databases] overrides applied
// (config.Resolve's Timeouts), and its limits are config.Resolve's
// Effective. Both follow from one configuration generation (apply.go): a
// pool's view is what they are under one generation, computed once per
// generation and read without the pool's lock. A link asks for the view
// under the generation it took (viewIn), so the pool settings a
// transaction runs by are never of another generation than its admission
// policy, even while swap is still bringing the pools up to date.

// poolView is a pool's settings under one generation.
type poolView struct {
	gen *generation
	// st is the generation's settings with the pool's timeouts, so the
	// code that reads a timeout reads it the same way from the pool as
	// from the service.
	st  *config.Settings
	eff config.Effective
}

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

// resolveView computes the pool's view under g, for the database entry
// db (the pool's own when g has none for it).
func (p *serverPool) resolveView(g *generation, db *config.Database) *poolView {
	eff := g.cfg.Resolve(db, p.key.user)
	return &poolView{gen: g, st: poolSettings(&g.cfg.Settings, eff.Timeouts), eff: eff}
}

// viewIn returns the pool's view under g. The view of the generation in
// force is kept; one of an older generation (a link that took it before
// a RELOAD) is computed for the caller alone.
func (p *serverPool) viewIn(g *generation) *poolView {
	v := p.view.Load()
	if v != nil && v.gen == g {
		return v
	}
	db := p.dbEntry()
	if nd, ok := g.cfg.LookupDatabase(p.key.db); ok {
		db = nd
	}
	nv := p.resolveView(g, db)
	if g == p.svc.gen.Load() {
		p.view.CompareAndSwap(v, nv)
	}
	return nv
}

// settings returns the settings in force for this pool's servers and
// clients: the current generation's, with the pool's timeouts.
func (p *serverPool) settings() *config.Settings {
	return p.viewIn(p.svc.gen.Load()).st
}

// settings returns the settings in force for the client (settingsIn of
// the current generation).
func (c *client) settings() *config.Settings {
	return c.settingsIn(c.svc.gen.Load())
}

// settingsIn returns the settings for the client under generation g: its
// pool's, with its own user's client_idle_timeout, which PgBouncer takes
// from the client's login user, not the pool's (a database's forced
// user).
func (c *client) settingsIn(g *generation) *config.Settings {
	if c.pool == nil {
		return &g.cfg.Settings
	}
	st := c.pool.viewIn(g).st
	if c.user == c.pool.key.user {
		return st
	}
	cfg := g.cfg
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

// linkSettings returns the settings the linked transaction runs by: those
// of the generation it was admitted under (linkServer). A session-mode
// link is the whole session, which follows RELOAD between its batches.
func (c *client) linkSettings() *config.Settings {
	if g := c.mu.link.mu.gen; g != nil && c.mode != config.PoolModeSession {
		return c.settingsIn(g)
	}
	return c.settings()
}
