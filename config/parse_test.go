package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// memFS serves %include files from a map, so tests do not touch the disk.
type memFS map[string]string

func (m memFS) read(path string) ([]byte, error) {
	if s, ok := m[filepath.Clean(path)]; ok {
		return []byte(s), nil
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
}

func mustParse(t *testing.T, ini string) *Config {
	t.Helper()
	c, err := parse("pgbouncer.ini", []byte(ini), memFS{}.read)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	c := Default()
	want := map[string]string{
		"listen_addr":               "",
		"listen_port":               "6432",
		"unix_socket_dir":           "/tmp",
		"unix_socket_mode":          "511", // 0777, printed as PgBouncer's SHOW CONFIG does
		"auth_type":                 "md5",
		"auth_query":                DefaultAuthQuery,
		"pool_mode":                 "session",
		"max_client_conn":           "100",
		"default_pool_size":         "20",
		"min_pool_size":             "0",
		"reserve_pool_size":         "0",
		"reserve_pool_timeout":      "5",
		"max_db_connections":        "0",
		"max_user_connections":      "0",
		"server_lifetime":           "3600",
		"server_idle_timeout":       "600",
		"server_connect_timeout":    "15",
		"server_login_retry":        "15",
		"server_check_delay":        "30",
		"server_check_query":        "<empty>",
		"server_reset_query":        "DISCARD ALL",
		"server_reset_query_always": "0",
		"client_login_timeout":      "60",
		"client_idle_timeout":       "0",
		"query_wait_timeout":        "120",
		"query_timeout":             "0",
		"max_prepared_statements":   "200",
		"max_packet_size":           "2147483647",
		"pkt_buf":                   "4096",
		"track_extra_parameters":    "IntervalStyle,search_path,default_transaction_read_only",
		"ignore_startup_parameters": "",
		"log_connections":           "1",
		"log_disconnections":        "1",
		"log_pooler_errors":         "1",
		"log_stats":                 "1",
		"stats_period":              "60",
		"server_tls_sslmode":        "prefer",
		"client_tls_sslmode":        "disable",
		"syslog_ident":              "pgbouncer",
		"scram_iterations":          "4096",
		"listen_backlog":            "128",
		"autodb_idle_timeout":       "3600",
		"cancel_wait_timeout":       "10",
		"query_wait_notify":         "5",
		"verbose":                   "0",
		"admission_file":            "",
		"shard_file":                "",
	}
	for k, w := range want {
		if got, ok := c.Value(k); !ok || got != w {
			t.Errorf("Value(%q) = %q, %v; want %q", k, got, ok, w)
		}
	}
	s := c.Settings
	if s.ListenPort != 6432 || s.UnixSocketMode != 0o777 || s.PoolMode != PoolModeSession ||
		s.ReservePoolTimeout != 5*time.Second || s.QueryWaitTimeout != 120*time.Second ||
		s.ServerLifetime != time.Hour || !s.LogConnections || s.ServerRoundRobin ||
		s.MaxPacketSize != 2147483647 || s.StatsPeriod != time.Minute || s.AuthType != "md5" {
		t.Errorf("default Settings wrong: %+v", s)
	}
	if !reflect.DeepEqual(s.TrackExtraParameters, []string{"IntervalStyle", "search_path", "default_transaction_read_only"}) {
		t.Errorf("TrackExtraParameters = %q", s.TrackExtraParameters)
	}
	if len(c.Databases)+len(c.Users)+len(c.Pools)+len(c.Warnings) != 0 {
		t.Errorf("Default has entries: %+v", c)
	}
	if _, ok := c.Value("no_such_key"); ok {
		t.Error("Value of an unknown key reported ok")
	}
	if len(Keys) < 102 {
		t.Errorf("len(Keys) = %d, want every PgBouncer setting (101) plus admission_file", len(Keys))
	}
	// Every key with a Settings field must really change that field.
	for _, k := range Keys {
		if k.field == nil {
			continue
		}
		before := reflect.ValueOf(k.field(&c.Settings)).Elem().Interface()
		var alt string
		switch k.Kind {
		case KindInt:
			alt = "7"
		case KindBool:
			alt = map[string]string{"0": "1", "1": "0"}[k.Default]
		case KindDuration:
			alt = "7.5"
		case KindFloat:
			alt = "0.75"
		case KindEnum:
			alt = k.Values[0]
			if alt == k.Default {
				alt = k.Values[1]
			}
		default:
			alt = "zz"
		}
		cc := c.Clone()
		if err := cc.Set(k.Name, alt); err != nil {
			if !k.Reloadable {
				continue
			}
			t.Fatalf("Set(%s, %s): %v", k.Name, alt, err)
		}
		after := reflect.ValueOf(k.field(&cc.Settings)).Elem().Interface()
		if reflect.DeepEqual(before, after) {
			t.Errorf("%s: field unchanged by %q", k.Name, alt)
		}
	}
}

func TestParseValues(t *testing.T) {
	tests := []struct {
		name  string
		ini   string
		check func(t *testing.T, c *Config)
	}{
		{"durations with fractions and units", `
[pgbouncer]
reserve_pool_timeout = 0.5
server_lifetime = 90m
query_wait_timeout = 100ms
server_idle_timeout=15`, func(t *testing.T, c *Config) {
			s := c.Settings
			eq(t, s.ReservePoolTimeout, 500*time.Millisecond)
			eq(t, s.ServerLifetime, 90*time.Minute)
			eq(t, s.QueryWaitTimeout, 100*time.Millisecond)
			eq(t, s.ServerIdleTimeout, 15*time.Second)
			val(t, c, "reserve_pool_timeout", "0.5")
			val(t, c, "server_lifetime", "5400")
			val(t, c, "query_wait_timeout", "0.1")
		}},
		{"ints strtol style", `
[pgbouncer]
unix_socket_mode = 0700
max_client_conn = 0x10
default_pool_size = +7`, func(t *testing.T, c *Config) {
			eq(t, c.Settings.UnixSocketMode, 0o700)
			eq(t, c.Settings.MaxClientConn, 16)
			eq(t, c.Settings.DefaultPoolSize, 7)
		}},
		{"bools", `
[pgbouncer]
log_connections = off
log_disconnections = no
server_round_robin = yes
server_reset_query_always = TRUE
log_pooler_errors = 0
application_name_add_host = 2`, func(t *testing.T, c *Config) {
			s := c.Settings
			eq(t, s.LogConnections, false)
			eq(t, s.LogDisconnections, false)
			eq(t, s.ServerRoundRobin, true)
			eq(t, s.ServerResetQueryAlways, true)
			eq(t, s.LogPoolerErrors, false)
			eq(t, s.ApplicationNameAddHost, true)
			val(t, c, "server_round_robin", "1")
		}},
		{"lists, enums, strings, case-insensitive keys", `
[pgbouncer]
Admin_Users = alice ,bob,, carol
stats_users =
POOL_MODE = Transaction
auth_type = SCRAM-SHA-256
ignore_startup_parameters = extra_float_digits,options
server_reset_query = DISCARD ALL ; not a comment
listen_addr = 127.0.0.1, ::1
server_check_query =`, func(t *testing.T, c *Config) {
			s := c.Settings
			eq(t, s.AdminUsers, []string{"alice", "bob", "carol"})
			eq(t, s.StatsUsers, []string(nil))
			eq(t, s.PoolMode, PoolModeTransaction)
			eq(t, s.AuthType, "scram-sha-256")
			eq(t, s.IgnoreStartupParameters, []string{"extra_float_digits", "options"})
			eq(t, s.ServerResetQuery, "DISCARD ALL ; not a comment")
			eq(t, s.ListenAddr, "127.0.0.1, ::1")
			eq(t, s.ServerCheckQuery, "")
			val(t, c, "admin_users", "alice,bob,carol")
			val(t, c, "pool_mode", "transaction")
		}},
		{"comments, blanks, CRLF, indentation, last value wins", "; comment\r\n# another\r\n\r\n  [pgbouncer]  ; trailing comment\r\n\tlisten_port = 7000\r\n   ; indented comment\r\nlisten_port=7001\r\n", func(t *testing.T, c *Config) {
			eq(t, c.Settings.ListenPort, 7001)
		}},
		{"listen_port 0 is allowed", "[pgbouncer]\nlisten_port = 0\n", func(t *testing.T, c *Config) {
			eq(t, c.Settings.ListenPort, 0)
		}},
		{"sections case-insensitive and repeated", "[PgBouncer]\nlisten_port=1\n[databases]\na=\n[pgbouncer]\nlisten_port=2\n", func(t *testing.T, c *Config) {
			eq(t, c.Settings.ListenPort, 2)
			if c.Databases["a"] == nil {
				t.Error("database a missing")
			}
		}},
		{"admission_file extension", "[pgbouncer]\nadmission_file = /etc/pgturnstile/admission.toml\n", func(t *testing.T, c *Config) {
			eq(t, c.Settings.AdmissionFile, "/etc/pgturnstile/admission.toml")
			eq(t, len(c.Warnings), 0)
		}},
		{"conffile defaults to the path", "", func(t *testing.T, c *Config) {
			val(t, c, "conffile", "pgbouncer.ini")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, mustParse(t, tt.ini)) })
	}
}

func TestDatabases(t *testing.T) {
	c := mustParse(t, `[databases]
plain =
foo = host=db1 port=6000 dbname=bar user=u password='a b''c' auth_user=au pool_size=5 min_pool_size=1 reserve_pool=2 pool_mode=Statement max_db_connections=9 connect_query='SELECT 1' client_encoding=UTF8 datestyle=ISO timezone=UTC application_name=app
"my db" = host = /var/run/postgresql   port=5433
'a@b' = dbname='x y'
* = host=fallback dbname=
`)
	foo := c.Databases["foo"]
	want := &Database{
		Name: "foo", Host: "db1", Port: 6000, DBName: "bar", User: "u", Password: "a b'c", AuthUser: "au",
		PoolSize: 5, MinPoolSize: 1, ReservePoolSize: 2, MaxDBConnections: 9, PoolMode: PoolModeStatement,
		ConnectQuery: "SELECT 1", ClientEncoding: "UTF8", DateStyle: "ISO", TimeZone: "UTC", ApplicationName: "app",
		MaxDBClientConnections: -1, ServerLifetime: -1, QueryWaitTimeout: -1,
		File: "pgbouncer.ini", Line: 3,
	}
	if !reflect.DeepEqual(foo, want) {
		t.Errorf("foo =\n%+v\nwant\n%+v", foo, want)
	}
	plain := c.Databases["plain"]
	if plain == nil || plain.Host != "" || plain.Port != 5432 || plain.PoolSize != -1 || plain.PoolMode != PoolModeUnset || plain.ServerDBName() != "plain" {
		t.Errorf("plain = %+v", plain)
	}
	if d := c.Databases["my db"]; d == nil || d.Host != "/var/run/postgresql" || d.Port != 5433 {
		t.Errorf(`"my db" = %+v`, d)
	}
	if d := c.Databases["a@b"]; d == nil || d.DBName != "x y" {
		t.Errorf(`"a@b" = %+v`, d)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
}

func TestLookupDatabase(t *testing.T) {
	c := mustParse(t, "[databases]\nexact = host=h1\n* = host=h2 port=6000 pool_size=3\n")
	d, ok := c.LookupDatabase("exact")
	if !ok || d.Host != "h1" || d.Name != "exact" {
		t.Errorf("exact: %+v %v", d, ok)
	}
	d, ok = c.LookupDatabase("tenant_42")
	if !ok || d.Name != "tenant_42" || d.DBName != "tenant_42" || d.Host != "h2" || d.Port != 6000 || d.PoolSize != 3 {
		t.Errorf("fallback: %+v %v", d, ok)
	}
	if c.Databases["*"].Name != "*" || c.Databases["*"].DBName != "" {
		t.Error("LookupDatabase modified the * entry")
	}

	c = mustParse(t, "[databases]\n* = host=h2 dbname=shared\n")
	d, _ = c.LookupDatabase("x")
	if d.Name != "x" || d.DBName != "shared" {
		t.Errorf("fallback with dbname: %+v", d)
	}

	c = mustParse(t, "[databases]\nexact = host=h1\n")
	if d, ok := c.LookupDatabase("other"); ok || d != nil {
		t.Errorf("no fallback: %+v %v", d, ok)
	}
}

func TestUsersAndPools(t *testing.T) {
	c := mustParse(t, `[users]
alice = pool_mode=transaction pool_size=7 reserve_pool_size=1 max_user_connections=3
bob =
[pools]
alice.d1 = pool_size=2
"my.user"."my.db" = pool_size=4
carol.d2 = pool_size=-5
`)
	a := c.Users["alice"]
	if a == nil || a.PoolMode != PoolModeTransaction || a.PoolSize != 7 || a.ReservePoolSize != 1 || a.MaxUserConnections != 3 || a.Line != 2 {
		t.Errorf("alice = %+v", a)
	}
	if b := c.Users["bob"]; b == nil || b.PoolSize != -1 || b.PoolMode != PoolModeUnset || b.MaxUserConnections != -1 {
		t.Errorf("bob = %+v", b)
	}
	want := map[string]Pool{
		"alice.d1":      {User: "alice", Database: "d1", PoolSize: 2, File: "pgbouncer.ini", Line: 5},
		"my.user.my.db": {User: "my.user", Database: "my.db", PoolSize: 4, File: "pgbouncer.ini", Line: 6},
		"carol.d2":      {User: "carol", Database: "d2", PoolSize: -1, File: "pgbouncer.ini", Line: 7},
	}
	if len(c.Pools) != len(want) {
		t.Errorf("pools = %v", c.Pools)
	}
	for k, w := range want {
		if p := c.Pools[k]; p == nil || *p != w {
			t.Errorf("pool %s = %+v, want %+v", k, p, w)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		ini, want string
	}{
		{"[pgbouncer]\nlisten_port = 6432\nno_such_thing = 1\n", "pgbouncer.ini:3: unknown parameter: pgbouncer/no_such_thing"},
		{"[pgbouncer]\n[nonsense]\n", "pgbouncer.ini:2: unknown section: [nonsense]"},
		{"[pgbouncer\n", "pgbouncer.ini:1: syntax error in configuration: missing ']'"},
		{"[pgbouncer] junk\n", "pgbouncer.ini:1: syntax error in configuration: unexpected text after section header"},
		{"listen_port = 1\n", "pgbouncer.ini:1: value without section: listen_port"},
		{"[pgbouncer]\nlisten_port 6432\n", `pgbouncer.ini:2: syntax error in configuration: expected "key = value"`},
		{"[pgbouncer]\n= 1\n", "pgbouncer.ini:2: syntax error in configuration: expected a name"},
		{"[databases]\n\"open = host=x\n", "pgbouncer.ini:2: syntax error in configuration: unterminated quoted name"},
		{"[pgbouncer]\nlisten_port = abc\n", `pgbouncer.ini:2: invalid value "abc" for parameter listen_port: not an integer: "abc"`},
		{"[pgbouncer]\nlisten_port = 70000\n", `pgbouncer.ini:2: invalid value "70000" for parameter listen_port: must be between 0 and 65535`},
		{"[pgbouncer]\nlisten_port = 6432 ; comment\n", `pgbouncer.ini:2: invalid value "6432 ; comment" for parameter listen_port: not an integer: "6432 ; comment"`},
		{"[pgbouncer]\nmax_client_conn = -1\n", `pgbouncer.ini:2: invalid value "-1" for parameter max_client_conn: must be between 0 and 2147483647`},
		{"[pgbouncer]\npool_mode = sometimes\n", `pgbouncer.ini:2: invalid value "sometimes" for parameter pool_mode: must be one of session, transaction, statement`},
		{"[pgbouncer]\nauth_type = password\n", `pgbouncer.ini:2: invalid value "password" for parameter auth_type: must be one of any, cert, hba, ldap, md5, pam, plain, scram-sha-256, trust`},
		{"[pgbouncer]\nlog_stats = maybe\n", `pgbouncer.ini:2: invalid value "maybe" for parameter log_stats: not a boolean: "maybe" (use 0/1, yes/no, on/off, true/false)`},
		{"[pgbouncer]\nserver_lifetime = -5\n", `pgbouncer.ini:2: invalid value "-5" for parameter server_lifetime: duration must not be negative: "-5"`},
		{"[pgbouncer]\nserver_lifetime = 5 minutes\n", `pgbouncer.ini:2: invalid value "5 minutes" for parameter server_lifetime: not a duration: "5 minutes"`},
		{"[pgbouncer]\nserver_lifetime = 1e30\n", `pgbouncer.ini:2: invalid value "1e30" for parameter server_lifetime: duration too large: "1e30"`},
		{"[pgbouncer]\nserver_tls_sslmode = sometimes\n", `pgbouncer.ini:2: invalid value "sometimes" for parameter server_tls_sslmode: must be one of disable, allow, prefer, require, verify-ca, verify-full`},
		{"[pgbouncer]\nauth_dbname = pgbouncer\n", `pgbouncer.ini:2: invalid value "pgbouncer" for parameter auth_dbname: cannot use the reserved "pgbouncer" database as an auth_dbname`},
		{"[pgbouncer]\npeer_id = 20000\n", `pgbouncer.ini:2: invalid value "20000" for parameter peer_id: must be between 0 and 16383`},
		{"[databases]\nfoo = host=x bogus=1\n", `pgbouncer.ini:2: database "foo": unrecognized connection parameter: bogus`},
		{"[databases]\nfoo = host=x port=0\n", `pgbouncer.ini:2: database "foo": invalid value "0" for port: must be between 1 and 65535`},
		{"[databases]\nfoo = pool_size=big\n", `pgbouncer.ini:2: database "foo": invalid value "big" for pool_size: not an integer: "big"`},
		{"[databases]\nfoo = pool_mode=never\n", `pgbouncer.ini:2: database "foo": invalid value "never" for pool_mode: invalid pool_mode "never": must be one of session, transaction, statement`},
		{"[databases]\nfoo = password='open\n", `pgbouncer.ini:2: database "foo": syntax error in connection string: unterminated quoted value of "password"`},
		{"[databases]\nfoo = host\n", `pgbouncer.ini:2: database "foo": syntax error in connection string: expected '=' after "host"`},
		{"[databases]\nfoo = password='a'b\n", `pgbouncer.ini:2: database "foo": syntax error in connection string: unexpected text after quoted value of "password"`},
		{"[databases]\nfoo = =x\n", `pgbouncer.ini:2: database "foo": syntax error in connection string: missing parameter name before '='`},
		{"[databases]\npgbouncer = host=x\n", `pgbouncer.ini:2: database "pgbouncer": the name is reserved for the admin console`},
		{"[databases]\nfoo = load_balance_hosts=random\n", `pgbouncer.ini:2: database "foo": invalid value "random" for load_balance_hosts: must be one of round-robin, disable`},
		{"[users]\nalice = bogus=1\n", `pgbouncer.ini:2: user "alice": unrecognized user parameter: bogus`},
		{"[users]\nalice = max_user_connections=3x\n", `pgbouncer.ini:2: user "alice": invalid value "3x" for max_user_connections: not an integer: "3x"`},
		{"[pools]\nalice = pool_size=1\n", `pgbouncer.ini:2: invalid pool name "alice": must be user.database (quote names that contain a dot: "my.user"."my.db")`},
		{"[pools]\na.b.c = pool_size=1\n", `pgbouncer.ini:2: invalid pool name "a.b.c": must be user.database (quote names that contain a dot: "my.user"."my.db")`},
		{"[pools]\n.db = pool_size=1\n", `pgbouncer.ini:2: invalid pool name ".db": must be user.database (quote names that contain a dot: "my.user"."my.db")`},
		{"[pools]\nu.d =\n", `pgbouncer.ini:2: pool u.d: empty pool parameters`},
		{"[pools]\nu.d = pool_mode=session\n", `pgbouncer.ini:2: pool u.d: unrecognized pool parameter: pool_mode`},
		{"[pools]\nu.d = pool_size=\n", `pgbouncer.ini:2: pool u.d: invalid value "" for pool_size: not an integer: ""`},
		{"[pgbouncer]\n%includex foo\n", `pgbouncer.ini:2: syntax error in configuration: unknown directive (only %include is known)`},
		{"[pgbouncer]\n%include nope.ini\n", `pgbouncer.ini:2: cannot read %include file "nope.ini": open nope.ini: file does not exist`},
	}
	for _, tt := range tests {
		_, err := parse("pgbouncer.ini", []byte(tt.ini), memFS{}.read)
		if err == nil {
			t.Errorf("%q: no error, want %q", tt.ini, tt.want)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: error %T is not a *ParseError", tt.ini, err)
		}
		if err.Error() != tt.want {
			t.Errorf("%q:\n got %s\nwant %s", tt.ini, err, tt.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	c := mustParse(t, `[pgbouncer]
sbuf_loopcnt = 10
sbuf_loopcnt = 10
max_prepared_statements = 200
pkt_buf = 4096
tcp_keepalive = yes
syslog = 1
auth_type = pam
auth_type = trust
[databases]
a = host=x load_balance_hosts=disable server_lifetime=60
b = host=y load_balance_hosts=round-robin auth_query='SELECT 1' max_db_client_connections=3
[users]
u = pool_size=1 query_timeout=5 max_user_client_connections=3
[peers]
1 = host=/tmp/pgbouncer1
2 = host=/tmp/pgbouncer2
`)
	want := []string{
		`setting "sbuf_loopcnt" is not supported yet and is ignored (pgbouncer.ini:2)`,
		// auth_type = pam is supported (a -tags pam build; the default
		// build refuses it at startup, not here).
	}
	eq(t, c.Warnings, want)
	if c.Users["u"].QueryTimeout != 5*time.Second || c.Databases["a"].LoadBalanceHosts != "disable" {
		t.Error("unsupported values were not stored")
	}
}

func TestInclude(t *testing.T) {
	files := memFS{
		"main.ini":          "[pgbouncer]\nlisten_port = 1\n%include sub/a.ini\ncarried = host=c\n",
		"sub/a.ini":         "listen_port = 2\n%include b.ini\n", // b.ini is found next to sub/a.ini
		"sub/b.ini":         "[databases]\nfromb = host=b\n",     // section carries back to main.ini
		"loop1.ini":         "[pgbouncer]\n%include loop2.ini\n",
		"loop2.ini":         "\n\n%include loop1.ini\n",
		"self.ini":          "%include self.ini\n",
		"cwdfirst.ini":      "%include x.ini\n",
		"x.ini":             "[pgbouncer]\nlisten_port = 10\n",
		"sub2/cwdfirst.ini": "%include x.ini\n",
		"sub2/x.ini":        "[pgbouncer]\nlisten_port = 20\n",
		"errs.ini":          "[pgbouncer]\n%include sub/bad.ini\n",
		"sub/bad.ini":       "\n\nlisten_port = nope\n",
		"abs.ini":           "%include /abs/y.ini\n",
		"/abs/y.ini":        "[pgbouncer]\nlisten_port = 30\n",
	}
	c, err := parse("main.ini", []byte(files["main.ini"]), files.read)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, c.Settings.ListenPort, 2)
	if d := c.Databases["fromb"]; d == nil || d.File != "sub/b.ini" || d.Line != 2 {
		t.Errorf("fromb = %+v", d)
	}
	// The line after the include lands in [databases] (carried over).
	if d := c.Databases["carried"]; d == nil || d.File != "main.ini" || d.Line != 4 {
		t.Error("section did not carry over the %include boundary")
	}

	for name, port := range map[string]int{"cwdfirst.ini": 10, "sub2/cwdfirst.ini": 10, "abs.ini": 30} {
		c, err := parse(name, []byte(files[name]), files.read)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		eq(t, c.Settings.ListenPort, port)
	}

	errs := map[string]string{
		"loop1.ini": "loop2.ini:3: %include loop: loop1.ini -> loop2.ini -> loop1.ini",
		"self.ini":  "self.ini:1: %include loop: self.ini -> self.ini",
		"errs.ini":  `sub/bad.ini:3: invalid value "nope" for parameter listen_port: not an integer: "nope"`,
	}
	for name, want := range errs {
		_, err := parse(name, []byte(files[name]), files.read)
		if err == nil || err.Error() != want {
			t.Errorf("%s: err = %v, want %s", name, err, want)
		}
	}

	deep := memFS{}
	for i := 0; i < 20; i++ {
		deep[filepath.Clean("d"+string(rune('a'+i))+".ini")] = "%include d" + string(rune('a'+i+1)) + ".ini\n"
	}
	_, err = parse("da.ini", []byte(deep["da.ini"]), deep.read)
	if err == nil || !strings.Contains(err.Error(), "%include nested too deep (more than 10 levels)") {
		t.Errorf("deep include: %v", err)
	}
}

func TestLoadFromDisk(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	main := write("etc/pgbouncer.ini", "[pgbouncer]\n%include conf.d/limits.ini\n")
	write("etc/conf.d/limits.ini", "max_client_conn = 77\n")
	c, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, c.Settings.MaxClientConn, 77)
	eq(t, c.Path, main)

	if _, err := Load(filepath.Join(dir, "missing.ini")); err == nil || !strings.Contains(err.Error(), "cannot load config file") {
		t.Errorf("missing file: %v", err)
	}
	dev := write("dev.ini", "[pgbouncer]\n%include /dev/zero\n")
	if _, err := Load(dev); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("include of a device: %v", err)
	}
	if _, err := Load(filepath.Join("..", "testdata", "config", "bad", "loop_a.ini")); err == nil || !strings.Contains(err.Error(), "loop_b.ini:2: %include loop: loop_a.ini -> loop_b.ini -> loop_a.ini") {
		t.Errorf("loop on disk: %v", err)
	}
	if _, err := Load(filepath.Join("..", "testdata", "config", "bad", "missing_include.ini")); err == nil || !strings.Contains(err.Error(), `missing_include.ini:3: cannot read %include file "does_not_exist.ini"`) {
		t.Errorf("missing include on disk: %v", err)
	}
}

func TestSet(t *testing.T) {
	c := Default()
	cc := c.Clone()
	if err := cc.Set("DEFAULT_POOL_SIZE", "33"); err != nil {
		t.Fatal(err)
	}
	eq(t, cc.Settings.DefaultPoolSize, 33)
	eq(t, c.Settings.DefaultPoolSize, 20) // the original is untouched
	val(t, cc, "default_pool_size", "33")
	for _, tc := range []struct{ key, value, want string }{
		{"listen_port", "1", "cannot change listen_port at runtime (needs a restart)"},
		{"nope", "1", "unknown config parameter: nope"},
		{"pool_mode", "x", `invalid value "x" for parameter pool_mode: must be one of session, transaction, statement`},
	} {
		if err := cc.Set(tc.key, tc.value); err == nil || err.Error() != tc.want {
			t.Errorf("Set(%s, %s) = %v, want %s", tc.key, tc.value, err, tc.want)
		}
	}
}

func TestPoolMode(t *testing.T) {
	for s, want := range map[string]PoolMode{"session": PoolModeSession, "TRANSACTION": PoolModeTransaction, "Statement": PoolModeStatement} {
		m, err := ParsePoolMode(s)
		if err != nil || m != want {
			t.Errorf("ParsePoolMode(%q) = %v, %v", s, m, err)
		}
		if m.String() != strings.ToLower(s) {
			t.Errorf("String() = %q", m.String())
		}
	}
	if _, err := ParsePoolMode(""); err == nil {
		t.Error("empty pool mode accepted")
	}
	eq(t, PoolModeUnset.String(), "")
}

func eq[T any](t *testing.T, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

func val(t *testing.T, c *Config, key, want string) {
	t.Helper()
	if got, ok := c.Value(key); !ok || got != want {
		t.Errorf("Value(%q) = %q, %v; want %q", key, got, ok, want)
	}
}
