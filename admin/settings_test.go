package admin

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

// Cloudflare fork acceptance scenarios 3, 5 and 6 (cloudflare-fork.md §4),
// console side: rejected strings answer ERROR 08P01 "SET failed" and call
// nothing; grammar misses answer "invalid command".
func TestSetUserPoolRejects(t *testing.T) {
	setFailed := []string{
		"SET USER bob = 'max_user_connections=0d'",
		"SET USER bob = 'max_user_connections='",
		"SET USER bob = ''",
		"SET USER bob = 'foo=1'",
		"SET USER bob = 'MAX_USER_CONNECTIONS=1'",
		"SET USER bob = 'pool_mode=fast'",
		"SET USER bob = 'max_user_connections=3x'",
		"SET USER bob = 'max_user_connections=4\tpool_mode=session'",
		"SET POOL lo.ng.d2 = 'pool_size=3'",
		"SET POOL .d2 = 'pool_size=3'",
		"SET POOL bob. = 'pool_size=3'",
		"SET POOL bob = 'pool_size=3'",
		"SET POOL .bob.d2 = 'pool_size=3'",
		"SET POOL bob.d2. = 'pool_size=3'",
		"SET POOL bob.d2 = 'pool_size=0d'",
		"SET POOL bob.d2 = 'pool_size='",
		"SET POOL bob.d2 = ''",
		"SET POOL bob.d2 = 'max_user_connections=1'",
	}
	for _, q := range setFailed {
		con := newFake()
		r := run1(t, con, RoleAdmin, q)
		wantError(t, r, "08P01", "SET failed")
		if r.errs[0].Detail == "" {
			t.Errorf("%q: no reason in DETAIL", q)
		}
		if len(con.calls) != 0 {
			t.Errorf("%q: calls %v", q, con.calls)
		}
	}
	invalid := []string{
		`SET USER bob = "max_user_connections=4"`,
		`SET USER bob = max_user_connections=4`,
		`SET POOL "bob"."d2" = 'pool_size=1'`,
		"SET USER bob = ‘max_user_connections=4’",
		`SET USER "" = 'pool_mode=session'`,
	}
	for _, q := range invalid {
		con := newFake()
		wantError(t, run1(t, con, RoleAdmin, q), "08P01", "invalid command '"+q+"', use SHOW HELP;")
		if len(con.calls) != 0 {
			t.Errorf("%q: calls %v", q, con.calls)
		}
	}
}

func TestParseUserSettings(t *testing.T) {
	good := []struct {
		in   string
		want UserSettings
	}{
		{"max_user_connections=4", UserSettings{MaxUserConnections: 4, PoolSize: -1, ReservePoolSize: -1, MaxUserClientConnections: -1}},
		{"  pool_mode=Session   max_user_connections=0x10 ", UserSettings{PoolMode: config.PoolModeSession, MaxUserConnections: 16, PoolSize: -1, ReservePoolSize: -1, MaxUserClientConnections: -1}},
		{"max_user_connections=010", UserSettings{MaxUserConnections: 8, PoolSize: -1, ReservePoolSize: -1, MaxUserClientConnections: -1}},
		{"max_user_connections=-1", UserSettings{MaxUserConnections: -1, PoolSize: -1, ReservePoolSize: -1, MaxUserClientConnections: -1}},
		{"pool_mode='transaction'", UserSettings{PoolMode: config.PoolModeTransaction, MaxUserConnections: -1, PoolSize: -1, ReservePoolSize: -1, MaxUserClientConnections: -1}},
		{"pool_size=12 reserve_pool_size=1 max_user_client_connections=100", UserSettings{MaxUserConnections: -1, PoolSize: 12, ReservePoolSize: 1, MaxUserClientConnections: 100}},
	}
	for _, g := range good {
		got, err := ParseUserSettings(g.in)
		if err != nil || got != g.want {
			t.Errorf("%q: %+v %v, want %+v", g.in, got, err, g.want)
		}
	}
	bad := []string{"", "   ", "x", "=1", "max_user_connections", "max_user_connections =1",
		"max_user_connections=''", "pool_mode='session", "pool_mode='session'x", "max_user_connections=99999999999",
		"max_user_connections=+-1", "max_user_connections=0x", "max_user_connections=1_0", "Pool_mode=session"}
	for _, b := range bad {
		if _, err := ParseUserSettings(b); err == nil {
			t.Errorf("%q accepted", b)
		}
	}
}

func TestParsePoolSettings(t *testing.T) {
	for in, want := range map[string]int{"pool_size=3": 3, "pool_size=0": 0, "pool_size=-7": -1, "pool_size=1 pool_size=2": 2} {
		got, err := ParsePoolSettings(in)
		if err != nil || got.PoolSize != want {
			t.Errorf("%q: %+v %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "pool_size=", "pool_size=0d", "POOL_SIZE=1", "max_user_connections=1"} {
		if _, err := ParsePoolSettings(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	for in, ok := range map[string]bool{"bob.d2": true, "a.b.c": false, ".d": false, "u.": false, "u": false, "": false} {
		if _, _, got := SplitPoolName(in); got != ok {
			t.Errorf("SplitPoolName(%q) = %v", in, got)
		}
	}
}
