package config

import "testing"

func TestResolve(t *testing.T) {
	c := mustParse(t, `[pgbouncer]
pool_mode = session
default_pool_size = 20
min_pool_size = 1
reserve_pool_size = 2
max_db_connections = 100
max_user_connections = 50

[databases]
plain   =
sized   = pool_size=10 min_pool_size=4 reserve_pool_size=3 pool_mode=transaction max_db_connections=30
zero    = pool_size=0 max_db_connections=0 reserve_pool_size=0 min_pool_size=0

[users]
alice = pool_size=7 pool_mode=statement reserve_pool_size=5 max_user_connections=6
bob   = max_user_connections=0
carol = pool_mode=transaction

[pools]
alice.sized = pool_size=2
carol.plain = pool_size=60
dave.sized  = pool_size=-1
erin.sized  = pool_size=50
`)
	tests := []struct {
		db, user string
		want     Effective
	}{
		// Globals only.
		{"plain", "nobody", Effective{PoolModeSession, 20, 1, 2, 100, 50}},
		// Database overrides the globals.
		{"sized", "nobody", Effective{PoolModeTransaction, 10, 4, 3, 30, 50}},
		// A database's explicit 0: pool_size/min/reserve 0 apply; max_db_connections 0 falls back to the global.
		{"zero", "nobody", Effective{PoolModeSession, 0, 0, 0, 100, 50}},
		// User overrides database and globals (pool_size, pool_mode, reserve, max_user_connections).
		{"plain", "alice", Effective{PoolModeStatement, 7, 1, 5, 100, 6}},
		// [pools] beats the user's and the database's pool_size; min_pool_size and max_db stay the database's.
		{"sized", "alice", Effective{PoolModeStatement, 2, 4, 5, 30, 6}},
		// A user's max_user_connections=0 falls back to the global.
		{"plain", "bob", Effective{PoolModeSession, 20, 1, 2, 100, 50}},
		// User pool_mode beats the database's.
		{"sized", "carol", Effective{PoolModeTransaction, 10, 4, 3, 30, 50}},
		// [pools] may raise a pool above the global size when the database sets none.
		{"plain", "carol", Effective{PoolModeTransaction, 60, 1, 2, 100, 50}},
		// Negative [pools] size: no override.
		{"sized", "dave", Effective{PoolModeTransaction, 10, 4, 3, 30, 50}},
		// [pools] cannot raise a pool above the database's own pool_size (the fork's min rule).
		{"sized", "erin", Effective{PoolModeTransaction, 10, 4, 3, 30, 50}},
	}
	for _, tt := range tests {
		db := c.Databases[tt.db]
		if got := c.Resolve(db, tt.user); got != tt.want {
			t.Errorf("Resolve(%s, %s) =\n %+v\nwant\n %+v", tt.db, tt.user, got, tt.want)
		}
	}
	if got, want := c.Resolve(nil, "alice"), (Effective{PoolModeStatement, 7, 1, 5, 100, 6}); got != want {
		t.Errorf("Resolve(nil, alice) = %+v, want %+v", got, want)
	}
	// A fallback database resolved through "*" finds [pools] by the client's name.
	c = mustParse(t, "[databases]\n* = pool_size=5\n[pools]\nu.tenant = pool_size=1\n")
	d, _ := c.LookupDatabase("tenant")
	if got := c.Resolve(d, "u").PoolSize; got != 1 {
		t.Errorf("pool size via * = %d, want 1", got)
	}
	if got := c.Resolve(d, "v").PoolSize; got != 5 {
		t.Errorf("pool size via * for another user = %d, want 5", got)
	}
}
