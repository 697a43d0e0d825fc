package admin

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

func TestCommandsCallConsole(t *testing.T) {
	cases := []struct {
		q, tag, call string
	}{
		{"PAUSE", "PAUSE", `Pause("")`},
		{"pause d1;", "PAUSE", `Pause("d1")`},
		{"PAUSE my-db.x", "PAUSE", `Pause("my-db.x")`},
		{`PAUSE "Odd ""Db"""`, "PAUSE", `Pause("Odd \"Db\"")`},
		{"RESUME", "RESUME", `Resume("")`},
		{"PAUSE SHARD app.org 0-63", "PAUSE SHARD", `PauseShard("app.org", "0-63")`},
		{"pause shard app.org 17;", "PAUSE SHARD", `PauseShard("app.org", "17")`},
		{"PAUSE SHARD app.org", "PAUSE SHARD", `PauseShard("app.org", "")`},
		{"RESUME SHARD app.org 0-63", "RESUME SHARD", `ResumeShard("app.org", "0-63")`},
		{"resume shard app.org", "RESUME SHARD", `ResumeShard("app.org", "")`},
		{"PAUSE shard", "PAUSE", `Pause("shard")`},
		{"Resume d1", "RESUME", `Resume("d1")`},
		{"DISABLE d1", "DISABLE", `Disable("d1")`},
		{"ENABLE d1", "ENABLE", `Enable("d1")`},
		{"RECONNECT", "RECONNECT", `Reconnect("")`},
		{"RECONNECT d2", "RECONNECT", `Reconnect("d2")`},
		{"KILL", "KILL", `Kill("")`},
		{"KILL d1", "KILL", `Kill("d1")`},
		{"KILL_CLIENT 42", "KILL_CLIENT", `KillClient(42)`},
		{"kill_client 18446744073709551615", "KILL_CLIENT", `KillClient(18446744073709551615)`},
		{"WAIT_CLOSE", "WAIT_CLOSE", `WaitClose("")`},
		{"WAIT_CLOSE d1", "WAIT_CLOSE", `WaitClose("d1")`},
		{"RELOAD", "RELOAD", `Reload()`},
		{" \t\nreload ;  ", "RELOAD", `Reload()`},
		{"SHUTDOWN WAIT_FOR_SERVERS", "SHUTDOWN", `Shutdown(2)`},
		{"shutdown wait_for_clients", "SHUTDOWN", `Shutdown(3)`},
		{"SET default_pool_size = 30", "SET default_pool_size=30", `Set("default_pool_size", "30")`},
		{"set server_reset_query to 'DISCARD ALL'", "SET server_reset_query=DISCARD ALL", `Set("server_reset_query", "DISCARD ALL")`},
		{"SET admin_users = 'a,b'", "SET admin_users=a,b", `Set("admin_users", "a,b")`},
		{`SET "max_client_conn" = "300"`, "SET max_client_conn=300", `Set("max_client_conn", "300")`},
		{"SET x = 'it''s'", "SET x=it's", `Set("x", "it's")`},
		{"SET USER bob = 'max_user_connections=4';", "SET bob=max_user_connections=4", `SetUser("bob", "max_user_connections=4")`},
		{"set user bob to 'max_user_connections=4'", "SET bob=max_user_connections=4", `SetUser("bob", "max_user_connections=4")`},
		{"SET USER bob = 'pool_mode=session max_user_connections=4'", "SET bob=pool_mode=session max_user_connections=4", `SetUser("bob", "pool_mode=session max_user_connections=4")`},
		{`SET USER "odd@user" = 'max_user_connections=1'`, "SET odd@user=max_user_connections=1", `SetUser("odd@user", "max_user_connections=1")`},
		{"SET POOL bob.d2 = 'pool_size=3'", "SET bob.d2=pool_size=3", `SetPool("bob", "d2", "pool_size=3")`},
		{"SeT PoOl bob.d2 = 'pool_size=2'", "SET bob.d2=pool_size=2", `SetPool("bob", "d2", "pool_size=2")`},
		{"SET POOL bob.d2 = 'pool_size=-1'", "SET bob.d2=pool_size=-1", `SetPool("bob", "d2", "pool_size=-1")`},
		// "SET user = ..." with two words before "=" is the global setting.
		{"SET user = 'postgres'", "SET user=postgres", `Set("user", "postgres")`},
	}
	for _, c := range cases {
		con := newFake()
		r := run1(t, con, RoleAdmin, c.q)
		wantOK(t, r, c.tag)
		if !slices.Equal(con.calls, []string{c.call}) {
			t.Errorf("%q: calls %v, want [%s]", c.q, con.calls, c.call)
		}
	}
}

func TestShutdownImmediate(t *testing.T) {
	con := newFake()
	in := wire.AppendQuery(nil, "SHUTDOWN")
	in = wire.AppendQuery(in, "SHOW POOLS") // never read
	out, err := runRaw(t, con, RoleAdmin, in)
	if err != nil || len(out) != 0 {
		t.Fatalf("SHUTDOWN: err %v, reply %q (PgBouncer sends none)", err, out)
	}
	if !slices.Equal(con.calls, []string{"Shutdown(1)"}) {
		t.Errorf("calls %v", con.calls)
	}
}

func TestCommandErrors(t *testing.T) {
	cases := []struct{ q, msg string }{
		{"FOO", "invalid command 'FOO', use SHOW HELP;"},
		{"", "invalid command '', use SHOW HELP;"},
		{"SHOW", "invalid command 'SHOW', use SHOW HELP;"},
		{"SHOW nosuch", "invalid command 'SHOW nosuch', use SHOW HELP;"},
		{"SHOW POOLS EXTRA", "invalid command 'SHOW POOLS EXTRA', use SHOW HELP;"},
		{"SELECT 1", "invalid command 'SELECT 1', use SHOW HELP;"},
		{"RELOAD now", "invalid command 'RELOAD now', use SHOW HELP;"},
		{"SUSPEND x", "invalid command 'SUSPEND x', use SHOW HELP;"},
		{"SHUTDOWN later", "invalid command 'SHUTDOWN later', use SHOW HELP;"},
		{"PAUSE a; PAUSE b", "invalid command 'PAUSE a; PAUSE b', use SHOW HELP;"},
		{"PAUSE SHARD app.org 0-3 4-7", "invalid command 'PAUSE SHARD app.org 0-3 4-7', use SHOW HELP;"},
		{"PAUSE SHARD app.org " + strings.Repeat("1", 64), "bad arguments"},
		{"DISABLE", "a database is required"},
		{"ENABLE", "a database is required"},
		{"KILL_CLIENT abc", "invalid client pointer supplied"},
		{"KILL_CLIENT", "invalid client pointer supplied"},
		{"abcdefghijklmnop", "bad arguments"},
		{"PAUSE " + strings.Repeat("d", 64), "bad arguments"},
		{"SET " + strings.Repeat("k", 64) + " = 1", "bad arguments"},
		{"SET k = '" + strings.Repeat("v", 254) + "'", "bad arguments"},
		{`SET "" = 1`, "bad arguments"},
		{"SET USER " + strings.Repeat("u", 128) + " = 'pool_mode=session'", "bad arguments"},
		{"SET USER bob = '" + strings.Repeat("v", 254) + "'", "bad arguments"},
	}
	for _, c := range cases {
		con := newFake()
		r := run1(t, con, RoleAdmin, c.q)
		wantError(t, r, "08P01", c.msg)
		if len(con.calls) != 0 {
			t.Errorf("%q: calls %v", c.q, con.calls)
		}
	}
	// Just under the limits is fine.
	con := newFake()
	wantOK(t, run1(t, con, RoleAdmin, "PAUSE "+strings.Repeat("d", 63)), "PAUSE")
	wantOK(t, run1(t, con, RoleAdmin, "SET k = '"+strings.Repeat("v", 253)+"'"), "SET k="+strings.Repeat("v", 253))
}

func TestConsoleErrors(t *testing.T) {
	con := newFake()
	con.err = &Error{SQLState: "08P01", Message: "no such database: nope"}
	wantError(t, run1(t, con, RoleAdmin, "PAUSE nope"), "08P01", "no such database: nope")
	con.err = &Error{Message: "already suspended/paused"}
	wantError(t, run1(t, con, RoleAdmin, "PAUSE"), "08P01", "already suspended/paused")
	con.err = &Error{Message: "client not found"}
	wantError(t, run1(t, con, RoleAdmin, "KILL_CLIENT 9"), "08P01", "client not found")

	// A plain error from Reload: PgBouncer's text and F0000, the reason as DETAIL.
	con.err = errors.New("pgbouncer.ini:12: invalid value")
	r := run1(t, con, RoleAdmin, "RELOAD")
	wantError(t, r, "F0000", "RELOAD failed, see logs for additional details")
	if r.errs[0].Detail != "pgbouncer.ini:12: invalid value" {
		t.Errorf("detail %q", r.errs[0].Detail)
	}
	con.err = errors.New("cannot change listen_port at runtime (needs a restart)")
	r = run1(t, con, RoleAdmin, "SET listen_port = 7000")
	wantError(t, r, "08P01", "SET failed")
	if r.errs[0].Detail == "" {
		t.Error("SET failed should carry the reason")
	}
	// The pooler's own *Error for SET still reads "SET failed", its text as DETAIL.
	con.err = &Error{SQLState: "08P01", Message: "invalid value for pool_size: x"}
	r = run1(t, con, RoleAdmin, "SET POOL bob.d2 = 'pool_size=1'")
	wantError(t, r, "08P01", "SET failed")
	if r.errs[0].Detail != "invalid value for pool_size: x" {
		t.Errorf("detail %q", r.errs[0].Detail)
	}
	con.err = errors.New("boom")
	wantError(t, run1(t, con, RoleAdmin, "SET USER bob = 'max_user_connections=1'"), "08P01", "SET failed")
	wantError(t, run1(t, con, RoleAdmin, "SET POOL bob.d2 = 'pool_size=1'"), "08P01", "SET failed")

	// The session goes on after each error.
	con.err = nil
	res := run(t, con, RoleAdmin, "FOO", "SHOW STATE", "PAUSE nope")
	wantOK(t, res[1], "SHOW")
	wantOK(t, res[2], "PAUSE")
}

func TestRoles(t *testing.T) {
	adminOnly := []string{
		"PAUSE", "RESUME d1", "DISABLE d1", "ENABLE d1", "RECONNECT", "KILL d1", "KILL_CLIENT 1",
		"WAIT_CLOSE", "RELOAD", "SUSPEND", "SHUTDOWN", "SHUTDOWN WAIT_FOR_CLIENTS",
		"SET default_pool_size = 3", "SET USER bob = 'max_user_connections=1'",
		"SET POOL bob.d2 = 'pool_size=1'", "SHOW FDS", "select fds", "PAUSE SHARD app.org 0-3", "RESUME SHARD app.org",
		// The role check comes before the argument checks of these.
		"DISABLE", "KILL_CLIENT x", "SET USER bob = 'nonsense'",
	}
	for _, q := range adminOnly {
		con := newFake()
		wantError(t, run1(t, con, RoleStats, q), "08P01", "admin access needed")
		if len(con.calls) != 0 {
			t.Errorf("%q as stats user: calls %v", q, con.calls)
		}
	}
	for n, sc := range shows {
		if sc.adminOnly {
			continue
		}
		for _, verb := range []string{"SHOW ", "select "} {
			wantOK(t, run1(t, newFake(), RoleStats, verb+n), "SHOW")
		}
	}
}

func TestRoleFor(t *testing.T) {
	cfg := config.Default()
	for k, v := range map[string]string{"admin_users": "admin, root", "stats_users": "stats,admin"} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		authType, user string
		role           Role
		ok             bool
	}{
		{"md5", "admin", RoleAdmin, true},
		{"md5", "root", RoleAdmin, true},
		{"md5", "stats", RoleStats, true},
		{"md5", "Admin", 0, false},
		{"md5", "alice", 0, false},
		{"trust", "alice", 0, false},
		{"any", "alice", RoleStats, true},
		{"any", "admin", RoleAdmin, true},
	}
	for _, c := range cases {
		if err := cfg.Set("auth_type", c.authType); err != nil {
			t.Fatal(err)
		}
		role, ok := RoleFor(cfg, c.user)
		if role != c.role || ok != c.ok {
			t.Errorf("auth_type=%s user %s: %v %v, want %v %v", c.authType, c.user, role, ok, c.role, c.ok)
		}
	}
}

func TestExtendedProtocolRefused(t *testing.T) {
	for _, typ := range []byte{'P', 'B', 'E'} {
		in := append([]byte{typ, 0, 0, 0, 6}, 0, 0)
		in = wire.AppendQuery(in, "SHOW POOLS") // never answered: the session is closed
		out, err := runRaw(t, newFake(), RoleAdmin, in)
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("%c: err %v", typ, err)
		}
		// ERROR + ReadyForQuery, then FATAL "bad packet", as PgBouncer.
		res := decode(t, out)
		if len(res) != 2 || !res[0].ready || res[1].ready {
			t.Fatalf("%c: want ERROR, ReadyForQuery, FATAL; got %+v", typ, res)
		}
		wantError(t, res[0], "08P01", "extended query protocol not supported by admin console")
		wantFatal(t, res[1], "bad packet")
	}
	out, err := runRaw(t, newFake(), RoleAdmin, wire.AppendSync(nil))
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("Sync: err %v", err)
	}
	res := decode(t, out)
	wantError(t, res[0], "08P01", "unsupported packet type for admin console: 83")
	wantFatal(t, res[1], "bad packet")

	// A Query without its terminating NUL: FATAL only.
	out, err = runRaw(t, newFake(), RoleAdmin, []byte{'Q', 0, 0, 0, 8, 'S', 'H', 'O', 'W'})
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("bad query: err %v", err)
	}
	res = decode(t, out)
	if len(res) != 1 {
		t.Fatalf("bad query: %+v", res)
	}
	wantFatal(t, res[0], "incomplete query")

	// EOF without Terminate is a normal end.
	if _, err := runRaw(t, newFake(), RoleAdmin, wire.AppendQuery(nil, "SHOW STATE")); err != nil {
		t.Fatalf("EOF: %v", err)
	}
}

func wantFatal(t *testing.T, r result, msg string) {
	t.Helper()
	if len(r.errs) != 1 || r.errs[0].Severity != "FATAL" || r.errs[0].Code != "08P01" || r.errs[0].Message != msg {
		t.Fatalf("want FATAL 08P01 %q, got %+v", msg, r.errs)
	}
}

// A console query longer than pkt_buf is refused from its header, FATAL
// 54000, whatever length it claims, and the body is never read: here the
// header claims 200 MB that never come.
func TestConsoleQueryTooLong(t *testing.T) {
	con := newFake()
	con.cfg.Settings.PktBuf = 4096
	in := []byte{wire.MsgQuery, 0x0b, 0xeb, 0xc2, 0x04, 'S', 'H', 'O', 'W'}
	out, err := runRaw(t, con, RoleAdmin, in)
	if !errors.Is(err, ErrQueryTooLong) {
		t.Fatalf("Serve: %v, want ErrQueryTooLong", err)
	}
	res := decode(t, out)
	if len(res) != 1 || len(res[0].errs) != 1 || res[0].errs[0].Severity != "FATAL" || res[0].errs[0].Code != "54000" ||
		res[0].errs[0].Message != "query too long for the admin console (pkt_buf = 4096)" {
		t.Fatalf("reply %+v", res)
	}
	// At the limit, a query is taken.
	q := "SHOW VERSION;" + strings.Repeat(" ", 4096-len("SHOW VERSION;")-1)
	if r := run1(t, con, RoleAdmin, q); len(r.errs) != 0 || len(r.rows) != 1 {
		t.Fatalf("query of 4096 bytes: %+v", r)
	}
}

// A *Notice from Set is not a failure: the value was taken, and the client
// gets the NOTICE and then the SET tag (PgBouncer's SET of a TLS setting
// that cannot be applied yet).
func TestSetNoticeIsNotAFailure(t *testing.T) {
	con := newFake()
	con.err = &Notice{Message: "TLS settings could not be applied, still using old configuration", Detail: "key does not match"}
	r := run1(t, con, RoleAdmin, "SET client_tls_key_file = '/k.pem'")
	wantOK(t, r, "SET client_tls_key_file=/k.pem")
	if len(r.notices) != 1 || r.notices[0].Message != con.err.Error() || r.notices[0].Detail != "key does not match" || r.notices[0].Severity != "NOTICE" {
		t.Errorf("notices %+v; want one NOTICE %q with the detail", r.notices, con.err.Error())
	}
}
