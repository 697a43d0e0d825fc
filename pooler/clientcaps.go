package pooler

import (
	"maps"
	"slices"
	"sync"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// clientCaps counts client connections by database and by login user, for
// max_db_client_connections and max_user_client_connections and for the
// current_client_connections of SHOW DATABASES and SHOW USERS. As in
// PgBouncer 1.25 a client counts from the check at its login (before its
// password exchange) until it closes, and one refused counts until then
// too: the count is taken first, then compared with the cap.
//
// mu is a leaf, taken under no other lock; it also guards every client's
// capCount (the client's own goroutine counts it, and whichever goroutine
// closes the client uncounts it).
type clientCaps struct {
	mu     sync.Mutex
	byDB   map[string]int
	byUser map[string]int
}

// capCount is what one client counts in clientCaps: at most one database
// and one user, each once, whatever the number of checks.
type capCount struct {
	db, user     string
	inDB, inUser bool
}

// takeLocked counts name in m (once per client, by the flag) and returns the
// count now. Under mu.
func (cc *clientCaps) takeLocked(m *map[string]int, counted *bool, as *string, name string) int {
	if !*counted {
		if *m == nil {
			*m = map[string]int{}
		}
		(*m)[name]++
		*counted, *as = true, name
	}
	return (*m)[*as]
}

// release uncounts what k counts. It may run more than once for a client
// (a failed login releases before it tells the client, then the close).
func (cc *clientCaps) release(k *capCount) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if k.inDB {
		dropCount(cc.byDB, k.db)
		k.inDB = false
	}
	if k.inUser {
		dropCount(cc.byUser, k.user)
		k.inUser = false
	}
}

func dropCount(m map[string]int, name string) {
	if m[name] <= 1 {
		delete(m, name)
		return
	}
	m[name]--
}

// snapshot copies the counts for SHOW DATABASES and SHOW USERS.
func (cc *clientCaps) snapshot() (byDB, byUser map[string]int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return maps.Clone(cc.byDB), maps.Clone(cc.byUser)
}

// checkClientCaps counts the client in the database it logs in to (db;
// nil for the admin console, dbKnown false for a database that does not
// exist, which PgBouncer counts on a throwaway object that never fills)
// and in its user, and refuses it over either cap, database first, as
// PgBouncer's set_pool does.
//
// Under auth_type=any a database's forced user is the one counted: PgBouncer
// takes it as the login user there, the name the client gave being
// unchecked.
func (c *client) checkClientCaps(cfg *config.Config, db *config.Database, dbKnown bool) error {
	if dbKnown {
		if err := c.checkDBClients(cfg, db); err != nil {
			return err
		}
	}
	user := c.user
	if cfg.Settings.AuthType == "any" && db != nil && db.User != "" {
		user = db.User
	}
	return c.checkUserClients(cfg, user)
}

// checkDBClients counts the client in its database and refuses it over
// the database's cap; an admin_users user on the admin console is let in
// over it, as PgBouncer lets its admins in.
func (c *client) checkDBClients(cfg *config.Config, db *config.Database) error {
	cc := &c.svc.caps
	cc.mu.Lock()
	n := cc.takeLocked(&cc.byDB, &c.caps.inDB, &c.caps.db, c.dbName)
	cc.mu.Unlock()
	max := cfg.MaxDBClients(db)
	if max <= 0 || n <= max || c.capsExempt(cfg) {
		return nil
	}
	c.debugf("set_pool: db '%s' full (%d >= %d)", c.dbName, n, max)
	return pgerror.New(pgerror.MaxDBClientConns)
}

// checkUserClients counts the client in its login user (user) and refuses it
// over the user's cap. Only a user the pooler knows counts (auth_file,
// [users], SET USER, or found by auth_query, which calls this again once
// it has): PgBouncer keeps no count for names nobody defined, so that
// mistyped or probing names do not fill SHOW USERS. An admin_users user
// on the admin console is counted but never refused.
func (c *client) checkUserClients(cfg *config.Config, user string) error {
	if _, known := c.svc.gen.Load().users.Lookup(user); !known {
		return nil
	}
	cc := &c.svc.caps
	cc.mu.Lock()
	n := cc.takeLocked(&cc.byUser, &c.caps.inUser, &c.caps.user, user)
	cc.mu.Unlock()
	if c.capsExempt(cfg) {
		return nil
	}
	max := cfg.MaxUserClients(user)
	if max <= 0 || n <= max {
		return nil
	}
	c.debugf("set_pool: user '%s' full (%d >= %d)", user, n, max)
	return pgerror.New(pgerror.MaxUserClientConns)
}

// capsExempt: an admin_users user logging in to the admin console.
func (c *client) capsExempt(cfg *config.Config) bool {
	return c.dbName == adminDB && slices.Contains(cfg.Settings.AdminUsers, c.user)
}

// releaseCaps uncounts the client: when it closes, and before a failed
// login tells it why, so that whoever it tells sees the counts without it
// (PgBouncer uncounts before it sends the error).
func (c *client) releaseCaps() {
	c.svc.caps.release(&c.caps)
}
