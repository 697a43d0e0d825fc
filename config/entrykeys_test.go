package config

import (
	"reflect"
	"testing"
	"time"
)

// roundTrip is one key's sample: the text written after "key=" and the
// value the entry's field must hold after parsing it.
type roundTrip[T any] struct {
	text string
	get  func(*T) any
	want any
}

// checkRoundTrips parses "name = key=text" for every key of the table and
// reads the field back. A key of the table without a sample, or a sample
// for a key the table lacks, fails the test, so a new key needs one here.
func checkRoundTrips[T any](t *testing.T, section string, table *entryTable[T], entries func(*Config) map[string]*T, cases map[string]roundTrip[T]) {
	t.Helper()
	for _, k := range table.keys {
		if _, ok := cases[k.Name]; !ok {
			t.Errorf("[%s] key %s has no round-trip case", section, k.Name)
		}
	}
	for key, tc := range cases {
		if _, ok := table.lookup(key); !ok {
			t.Errorf("[%s] round-trip case for %s, which is not in the table", section, key)
			continue
		}
		c := mustParse(t, "["+section+"]\nx = "+key+"="+tc.text+"\n")
		e := entries(c)["x"]
		if e == nil {
			t.Errorf("[%s] %s=%s: no entry x", section, key, tc.text)
			continue
		}
		if got := tc.get(e); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("[%s] %s=%s: read back %#v, want %#v", section, key, tc.text, got, tc.want)
		}
	}
}

func TestDatabaseKeysRoundTrip(t *testing.T) {
	type db = roundTrip[Database]
	checkRoundTrips(t, "databases", dbKeys, func(c *Config) map[string]*Database { return c.Databases }, map[string]db{
		"host":                      {"db1", func(d *Database) any { return d.Host }, "db1"},
		"port":                      {"0x1770", func(d *Database) any { return d.Port }, 6000},
		"dbname":                    {"'x y'", func(d *Database) any { return d.DBName }, "x y"},
		"user":                      {"u", func(d *Database) any { return d.User }, "u"},
		"password":                  {"'a''b'", func(d *Database) any { return d.Password }, "a'b"},
		"auth_user":                 {"au", func(d *Database) any { return d.AuthUser }, "au"},
		"auth_query":                {"'SELECT 1'", func(d *Database) any { return d.AuthQuery }, "SELECT 1"},
		"auth_dbname":               {"adb", func(d *Database) any { return d.AuthDBName }, "adb"},
		"pool_size":                 {"5", func(d *Database) any { return d.PoolSize }, 5},
		"min_pool_size":             {"010", func(d *Database) any { return d.MinPoolSize }, 8},
		"reserve_pool_size":         {"2", func(d *Database) any { return d.ReservePoolSize }, 2},
		"reserve_pool":              {"3", func(d *Database) any { return d.ReservePoolSize }, 3},
		"pool_mode":                 {"Transaction", func(d *Database) any { return d.PoolMode }, PoolModeTransaction},
		"max_db_connections":        {"0", func(d *Database) any { return d.MaxDBConnections }, 0},
		"max_db_client_connections": {"-1", func(d *Database) any { return d.MaxDBClientConnections }, -1},
		"connect_query":             {"'SET x=1'", func(d *Database) any { return d.ConnectQuery }, "SET x=1"},
		"client_encoding":           {"UTF8", func(d *Database) any { return d.ClientEncoding }, "UTF8"},
		"datestyle":                 {"ISO", func(d *Database) any { return d.DateStyle }, "ISO"},
		"timezone":                  {"UTC", func(d *Database) any { return d.TimeZone }, "UTC"},
		"application_name":          {"app", func(d *Database) any { return d.ApplicationName }, "app"},
		"server_lifetime":           {"1.5", func(d *Database) any { return d.ServerLifetime }, 1500 * time.Millisecond},
		"load_balance_hosts":        {"DISABLE", func(d *Database) any { return d.LoadBalanceHosts }, "disable"},
		"query_wait_timeout":        {"-1", func(d *Database) any { return d.QueryWaitTimeout }, time.Duration(-1)},
		"target_session_attrs":      {"read-only", func(d *Database) any { return d.TargetSessionAttrs }, "read-only"},
	})
}

func TestUserKeysRoundTrip(t *testing.T) {
	type user = roundTrip[User]
	checkRoundTrips(t, "users", userKeys, func(c *Config) map[string]*User { return c.Users }, map[string]user{
		"pool_mode":                   {"statement", func(u *User) any { return u.PoolMode }, PoolModeStatement},
		"pool_size":                   {"7", func(u *User) any { return u.PoolSize }, 7},
		"reserve_pool_size":           {"1", func(u *User) any { return u.ReservePoolSize }, 1},
		"max_user_connections":        {"3", func(u *User) any { return u.MaxUserConnections }, 3},
		"max_user_client_connections": {"0x10", func(u *User) any { return u.MaxUserClientConnections }, 16},
		"query_timeout":               {"2", func(u *User) any { return u.QueryTimeout }, 2 * time.Second},
		"idle_transaction_timeout":    {"100ms", func(u *User) any { return u.IdleTransactionTimeout }, 100 * time.Millisecond},
		"transaction_timeout":         {"0", func(u *User) any { return u.TransactionTimeout }, time.Duration(0)},
		"client_idle_timeout":         {"0.25", func(u *User) any { return u.ClientIdleTimeout }, 250 * time.Millisecond},
		"query_wait_timeout":          {"4", func(u *User) any { return u.QueryWaitTimeout }, 4 * time.Second},
	})
}

// An entry with no keys has every field unset: the values Config.Resolve
// and the admin console read as "inherit".
func TestEntryKeysUnset(t *testing.T) {
	c := mustParse(t, "[databases]\nd =\n[users]\nu =\n")
	wantDB := &Database{Name: "d", Port: 5432,
		PoolSize: -1, MinPoolSize: -1, ReservePoolSize: -1, MaxDBConnections: -1, MaxDBClientConnections: -1,
		ServerLifetime: -1, QueryWaitTimeout: -1, File: "pgbouncer.ini", Line: 2}
	if d := c.Databases["d"]; !reflect.DeepEqual(d, wantDB) {
		t.Errorf("empty database =\n%+v\nwant\n%+v", d, wantDB)
	}
	wantUser := &User{Name: "u", PoolSize: -1, ReservePoolSize: -1, MaxUserConnections: -1, MaxUserClientConnections: -1,
		QueryTimeout: -1, IdleTransactionTimeout: -1, TransactionTimeout: -1, ClientIdleTimeout: -1, QueryWaitTimeout: -1,
		File: "pgbouncer.ini", Line: 4}
	if u := c.Users["u"]; !reflect.DeepEqual(u, wantUser) {
		t.Errorf("empty user =\n%+v\nwant\n%+v", u, wantUser)
	}
	wantUser.File, wantUser.Line = "", 0
	if u := NewUser("u"); !reflect.DeepEqual(u, wantUser) {
		t.Errorf("NewUser =\n%+v\nwant\n%+v", u, wantUser)
	}
}

// Unknown keys, and keys of the other section, are errors with
// PgBouncer-compatible texts; a key is matched case-insensitively.
func TestEntryKeysErrors(t *testing.T) {
	for _, tt := range []struct{ ini, want string }{
		{"[databases]\nfoo = host=x bogus=1\n", `pgbouncer.ini:2: database "foo": unrecognized connection parameter: bogus`},
		{"[databases]\nfoo = max_user_connections=1\n", `pgbouncer.ini:2: database "foo": unrecognized connection parameter: max_user_connections`},
		{"[databases]\nfoo = server_lifetime=-1\n", `pgbouncer.ini:2: database "foo": invalid value "-1" for server_lifetime: duration must not be negative: "-1"`},
		{"[databases]\nfoo = port=65536\n", `pgbouncer.ini:2: database "foo": invalid value "65536" for port: must be between 1 and 65535`},
		{"[databases]\nfoo = pool_size=-2\n", `pgbouncer.ini:2: database "foo": invalid value "-2" for pool_size: must be between 0 and 2147483647 (or -1 = unset)`},
		{"[databases]\nfoo = target_session_attrs=any-old\n", `pgbouncer.ini:2: database "foo": invalid value "any-old" for target_session_attrs: must be one of any, read-write, read-only, primary, standby, prefer-standby`},
		{"[databases]\npgbouncer = host=x\n", `pgbouncer.ini:2: database "pgbouncer": the name is reserved for the admin console`},
		{"[databases]\nfoo = host\n", `pgbouncer.ini:2: database "foo": syntax error in connection string: expected '=' after "host"`},
		{"[users]\nalice = bogus=1\n", `pgbouncer.ini:2: user "alice": unrecognized user parameter: bogus`},
		{"[users]\nalice = host=x\n", `pgbouncer.ini:2: user "alice": unrecognized user parameter: host`},
		{"[users]\nalice = query_timeout=-1\n", `pgbouncer.ini:2: user "alice": invalid value "-1" for query_timeout: duration must not be negative: "-1"`},
		{"[users]\nalice = pool_mode=x\n", `pgbouncer.ini:2: user "alice": invalid value "x" for pool_mode: invalid pool_mode "x": must be one of session, transaction, statement`},
	} {
		_, err := parse("pgbouncer.ini", []byte(tt.ini), memFS{}.read)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: got %v\nwant %s", tt.ini, err, tt.want)
		}
	}
	c := mustParse(t, "[databases]\nfoo = POOL_SIZE=4\n[users]\nbob = Pool_Mode=session\n")
	if c.Databases["foo"].PoolSize != 4 || c.Users["bob"].PoolMode != PoolModeSession {
		t.Errorf("upper-case keys: %+v %+v", c.Databases["foo"], c.Users["bob"])
	}
}

// A key that is accepted but not implemented warns once per key. The keys
// are the tables' first unsupported numeric ones, so that building one
// moves the test on to the next instead of breaking it.
func TestEntryKeysWarnings(t *testing.T) {
	unsupported := func(ps []param) string {
		for _, p := range ps {
			if p.Status == NotSupported && (p.Kind == KindInt || p.Kind == KindDuration) {
				return p.Name
			}
		}
		return ""
	}
	ini, want := "[databases]\n", []string(nil)
	if k := unsupported(dbKeys.docs()); k != "" {
		ini += "a = " + k + "=5\nb = " + k + "=6\n"
		want = append(want, `database parameter "`+k+`" is not supported yet and is ignored (pgbouncer.ini:2)`)
	}
	if k := unsupported(userKeys.docs()); k != "" {
		ini += "[users]\nu = " + k + "=1\n"
		want = append(want, `user parameter "`+k+`" is not supported yet and is ignored (pgbouncer.ini:5)`)
	}
	c := mustParse(t, ini)
	if !reflect.DeepEqual(c.Warnings, want) {
		t.Errorf("warnings = %q, want %q", c.Warnings, want)
	}
}
