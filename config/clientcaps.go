package config

// The client-connection caps (PgBouncer 1.25's max_db_client_connections
// and max_user_client_connections) are kept apart from Resolve: they bound
// a client's login, counted by the database it names and the user it logs
// in as, not a pool, whose user is the forced one where the database names
// one.

// MaxDBClients is the client-connection cap of the database db (nil: the
// admin console, which has only the global value): its own
// max_db_client_connections when > 0, else the global one. 0 = unlimited.
// As with max_db_connections, a per-database 0 falls back to the global
// value rather than meaning "unlimited".
func (c *Config) MaxDBClients(db *Database) int {
	if db != nil && db.MaxDBClientConnections > 0 {
		return db.MaxDBClientConnections
	}
	return c.Settings.MaxDBClientConnections
}

// MaxUserClients is the client-connection cap of the login user name:
// its [users] (or SET USER) max_user_client_connections when > 0, else
// the global one. 0 = unlimited.
func (c *Config) MaxUserClients(user string) int {
	if u := c.Users[user]; u != nil && u.MaxUserClientConnections > 0 {
		return u.MaxUserClientConnections
	}
	return c.Settings.MaxUserClientConnections
}
