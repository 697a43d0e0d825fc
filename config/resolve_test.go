package config

import (
	"testing"
	"time"
)

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
		{"plain", "nobody", Effective{PoolModeSession, 20, 1, 2, 100, 50, Timeouts{}}},
		// Database overrides the globals.
		{"sized", "nobody", Effective{PoolModeTransaction, 10, 4, 3, 30, 50, Timeouts{}}},
		// A database's explicit 0: pool_size/min/reserve 0 apply; max_db_connections 0 falls back to the global.
		{"zero", "nobody", Effective{PoolModeSession, 0, 0, 0, 100, 50, Timeouts{}}},
		// User overrides database and globals (pool_size, pool_mode, reserve, max_user_connections).
		{"plain", "alice", Effective{PoolModeStatement, 7, 1, 5, 100, 6, Timeouts{}}},
		// [pools] beats the user's and the database's pool_size; min_pool_size and max_db stay the database's.
		{"sized", "alice", Effective{PoolModeStatement, 2, 4, 5, 30, 6, Timeouts{}}},
		// A user's max_user_connections=0 falls back to the global.
		{"plain", "bob", Effective{PoolModeSession, 20, 1, 2, 100, 50, Timeouts{}}},
		// User pool_mode beats the database's.
		{"sized", "carol", Effective{PoolModeTransaction, 10, 4, 3, 30, 50, Timeouts{}}},
		// [pools] may raise a pool above the global size when the database sets none.
		{"plain", "carol", Effective{PoolModeTransaction, 60, 1, 2, 100, 50, Timeouts{}}},
		// Negative [pools] size: no override.
		{"sized", "dave", Effective{PoolModeTransaction, 10, 4, 3, 30, 50, Timeouts{}}},
		// [pools] cannot raise a pool above the database's own pool_size (the fork's min rule).
		{"sized", "erin", Effective{PoolModeTransaction, 10, 4, 3, 30, 50, Timeouts{}}},
	}
	for _, tt := range tests {
		db := c.Databases[tt.db]
		got := c.Resolve(db, tt.user)
		got.Timeouts = Timeouts{} // TestResolveTimeouts
		if got != tt.want {
			t.Errorf("Resolve(%s, %s) =\n %+v\nwant\n %+v", tt.db, tt.user, got, tt.want)
		}
	}
	if got, want := c.Resolve(nil, "alice"), (Effective{PoolModeStatement, 7, 1, 5, 100, 6, Timeouts{QueryWaitTimeout: 2 * time.Minute, ServerLifetime: time.Hour}}); got != want {
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

func TestResolveTimeouts(t *testing.T) {
	c := mustParse(t, `[pgbouncer]
query_timeout = 100
idle_transaction_timeout = 200
transaction_timeout = 300
client_idle_timeout = 400
query_wait_timeout = 500
server_lifetime = 600

[databases]
plain =
quick = server_lifetime=2 query_wait_timeout=7
never = query_wait_timeout=0 server_lifetime=0

[users]
alice = query_timeout=1 idle_transaction_timeout=2 transaction_timeout=3 client_idle_timeout=4 query_wait_timeout=5
bob   = query_timeout=0 transaction_timeout=0 query_wait_timeout=0
carol = query_wait_timeout=-1
`)
	const s = time.Second
	global := Timeouts{100 * s, 200 * s, 300 * s, 400 * s, 500 * s, 600 * s}
	tests := []struct {
		db, user string
		want     Timeouts
	}{
		{"plain", "nobody", global},
		// The user's timeouts beat the globals; server_lifetime is the database's only.
		{"plain", "alice", Timeouts{1 * s, 2 * s, 3 * s, 4 * s, 5 * s, 600 * s}},
		// The database's query_wait_timeout and server_lifetime.
		{"quick", "nobody", Timeouts{100 * s, 200 * s, 300 * s, 400 * s, 7 * s, 2 * s}},
		// The user's query_wait_timeout beats the database's.
		{"quick", "alice", Timeouts{1 * s, 2 * s, 3 * s, 4 * s, 5 * s, 2 * s}},
		// A per-user 0 falls back to the global, except query_wait_timeout (0 = forever).
		{"quick", "bob", Timeouts{100 * s, 200 * s, 300 * s, 400 * s, 0, 2 * s}},
		// A per-database query_wait_timeout 0 applies; server_lifetime 0 falls back.
		{"never", "nobody", Timeouts{100 * s, 200 * s, 300 * s, 400 * s, 0, 600 * s}},
		// -1 is unset: the database's applies.
		{"quick", "carol", Timeouts{100 * s, 200 * s, 300 * s, 400 * s, 7 * s, 2 * s}},
	}
	for _, tt := range tests {
		if got := c.Resolve(c.Databases[tt.db], tt.user).Timeouts; got != tt.want {
			t.Errorf("Resolve(%s, %s).Timeouts =\n %+v\nwant\n %+v", tt.db, tt.user, got, tt.want)
		}
	}
}
