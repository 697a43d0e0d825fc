package pooler

// Client caps (max_db_client_connections, max_user_client_connections):
// the counts are package clientcount's (Service.caps, client.caps); this
// is when a client takes them and what it is told over a cap.

import (
	"slices"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

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
	n := c.svc.caps.TakeDB(&c.caps, c.dbName)
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
	n := c.svc.caps.TakeUser(&c.caps, user)
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
	c.svc.caps.Release(&c.caps)
}
