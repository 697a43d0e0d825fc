//go:build linux

package integration

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server lifecycle and client timeouts, each with short settings.

func TestClientIdleTimeout(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"client_idle_timeout": "0.5"}, ""), testUserlist)
	c := connectPgx(t, p.App())
	ctx := ctxT(t, 10*time.Second)
	if queryInt(t, c, "SELECT 1") != 1 {
		t.Fatal("SELECT 1")
	}
	time.Sleep(1200 * time.Millisecond)
	_, err := c.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
	wantPgError(t, err, "FATAL", "08P01", "client_idle_timeout")
}

func TestIdleTransactionTimeout(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"idle_transaction_timeout": "0.5"}, ""), testUserlist)
	c := connectPgx(t, p.ConnString(otherDB, appUser, appPassword))
	ctx := ctxT(t, 10*time.Second)
	if _, err := c.Exec(ctx, "BEGIN", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	_, err := c.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
	wantPgError(t, err, "FATAL", "08P01", "idle transaction timeout")
	// The server that held the open transaction is closed, not reused.
	waitBackends(t, otherDB, appUser, 5*time.Second, "0", func(n int) bool { return n == 0 })
	if !p.WaitLog("closing because: idle transaction timeout", 5*time.Second) {
		t.Fatalf("log lacks the close reason:\n%s", p.Log())
	}
}

func TestQueryTimeout(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"query_timeout": "0.5"}, ""), testUserlist)
	c := connectPgx(t, p.App())
	ctx := ctxT(t, 10*time.Second)
	start := time.Now()
	_, err := c.Exec(ctx, "SELECT pg_sleep(5)", pgx.QueryExecModeSimpleProtocol)
	wantPgError(t, err, "FATAL", "08P01", "query timeout")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("query_timeout took %v", d)
	}
	// Other clients are unaffected.
	selectOne(t, p.App())
}

func TestServerIdleTimeoutAndMinPoolSize(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"server_idle_timeout": "0.5", "min_pool_size": "2"}, ""), testUserlist)
	c := connectPgx(t, p.ConnString(otherDB, appUser, appPassword))
	if queryInt(t, c, "SELECT 1") != 1 {
		t.Fatal("SELECT 1")
	}
	// min_pool_size fills the pool of a pool with clients...
	waitBackends(t, otherDB, appUser, 5*time.Second, "2", func(n int) bool { return n == 2 })
	// ...and server_idle_timeout never takes it below that.
	time.Sleep(1500 * time.Millisecond)
	if n := countBackends(t, otherDB, appUser); n != 2 {
		t.Fatalf("backends after idle timeout: %d, want min_pool_size 2", n)
	}
	// A burst grows the pool; the extra servers go after the idle timeout.
	conns := make([]*pgx.Conn, 4)
	for i := range conns {
		conns[i] = connectPgx(t, p.ConnString(otherDB, appUser, appPassword))
		if _, err := conns[i].Exec(ctxT(t, 5*time.Second), "BEGIN", pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	waitBackends(t, otherDB, appUser, 5*time.Second, ">= 4", func(n int) bool { return n >= 4 })
	for _, cc := range conns {
		if _, err := cc.Exec(ctxT(t, 5*time.Second), "COMMIT", pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	waitBackends(t, otherDB, appUser, 5*time.Second, "2", func(n int) bool { return n == 2 })
	if !p.WaitLog("closing because: server idle timeout", 5*time.Second) {
		t.Fatalf("log lacks the close reason:\n%s", p.Log())
	}
}

func TestServerLifetime(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"server_lifetime": "0.5", "default_pool_size": "1"}, ""), testUserlist)
	c := connectPgx(t, p.App())
	first := queryInt(t, c, "SELECT pg_backend_pid()")
	time.Sleep(1200 * time.Millisecond)
	// The old server is closed once it is released or found idle; the
	// client gets a new one without noticing.
	second := queryInt(t, c, "SELECT pg_backend_pid()")
	third := queryInt(t, c, "SELECT pg_backend_pid()")
	if second == first && third == first {
		t.Fatalf("backend %d outlived server_lifetime", first)
	}
	if !p.WaitLog("closing because: server lifetime over", 5*time.Second) {
		t.Fatalf("log lacks the close reason:\n%s", p.Log())
	}
}

func TestServerLoginRetry(t *testing.T) {
	needPG(t)
	// The userlist holds a wrong password for the server login; clients
	// authenticate to the pooler with it successfully.
	bad := `"app" "not-the-password"` + "\n"
	p := startPooler(t, iniSettings(map[string]string{"server_login_retry": "30"}, ""), bad)
	connstr := p.ConnString(appDB, appUser, "not-the-password")
	_, err := tryConnectPgx(t, pgxConfig(t, connstr))
	pe := wantPgError(t, err, "FATAL", "28P01", "")
	if !strings.Contains(pe.Message, "password authentication failed") {
		t.Fatalf("first client: %q", pe.Message)
	}
	// Within server_login_retry the pooler does not hammer Postgres: the
	// next client gets the cached error at once.
	start := time.Now()
	_, err = tryConnectPgx(t, pgxConfig(t, connstr))
	pe = wantPgError(t, err, "FATAL", "08P01", "")
	if !strings.HasPrefix(pe.Message, "server login has been failing, cached error: ") || !strings.HasSuffix(pe.Message, " (server_login_retry)") {
		t.Fatalf("second client: %q", pe.Message)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cached error took %v", d)
	}
}

func TestSessionModeResetQuery(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"pool_mode": "session", "default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 10*time.Second)
	c := connectPgx(t, p.App())
	pid := queryInt(t, c, "SELECT pg_backend_pid()")
	if _, err := c.Exec(ctx, "SET work_mem = '7MB'", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "PREPARE leftover AS SELECT 1", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	c2 := connectPgx(t, p.App())
	if got := queryInt(t, c2, "SELECT pg_backend_pid()"); got != pid {
		t.Fatalf("pool of 1 gave another server: %d vs %d", got, pid)
	}
	if wm := queryText(t, c2, "SHOW work_mem"); wm == "7MB" {
		t.Fatal("session SET leaked to the next client: DISCARD ALL did not run")
	}
	if n := queryInt(t, c2, "SELECT count(*) FROM pg_prepared_statements"); n != 0 {
		t.Fatalf("prepared statement leaked to the next client: %d", n)
	}
}

// An idle server that Postgres closed (pg_terminate_backend, a restart,
// idle_session_timeout) is not handed to the next client.
func TestIdleServerKilledByPostgres(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	connstr := p.ConnString(otherDB, appUser, appPassword)
	c := connectPgx(t, connstr)
	old := queryInt(t, c, "SELECT pg_backend_pid()")
	su := directSuperuser(t, "postgres")
	ctx := ctxT(t, 10*time.Second)
	if _, err := su.Exec(ctx, "SELECT pg_terminate_backend($1)", old); err != nil {
		t.Fatal(err)
	}
	waitBackends(t, otherDB, appUser, 5*time.Second, "0", func(n int) bool { return n == 0 })
	time.Sleep(200 * time.Millisecond) // idle longer than the pooler's peek threshold
	got := queryInt(t, c, "SELECT pg_backend_pid()")
	if got == old {
		t.Fatalf("got the terminated backend %d again", old)
	}
}

// limit_evict_grace: a busy server over a lowered limit is evicted after
// the grace; its client gets FATAL "evicted", the other keeps its server.
func TestLimitEvictGrace(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{
		"pool_mode": "session", "limit_evict_grace": "0.5", "admin_users": appUser,
	}, ""), testUserlist)
	ctx := ctxT(t, 20*time.Second)
	var clients []*pgx.Conn
	for i := 0; i < 2; i++ {
		c := connectPgx(t, p.ConnString(otherDB, appUser, appPassword))
		if _, err := c.Exec(ctx, "BEGIN", pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	waitBackends(t, otherDB, appUser, 5*time.Second, "2", func(n int) bool { return n == 2 })
	admin := connectPgx(t, p.ConnString("pgbouncer", appUser, appPassword))
	if _, err := admin.Exec(ctx, "SET USER "+appUser+" = 'max_user_connections=1'", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	// Within the grace both keep their servers.
	time.Sleep(200 * time.Millisecond)
	if n := countBackends(t, otherDB, appUser); n != 2 {
		t.Fatalf("backends within the grace: %d, want 2", n)
	}
	waitBackends(t, otherDB, appUser, 5*time.Second, "1", func(n int) bool { return n == 1 })
	evicted := 0
	for _, c := range clients {
		_, err := c.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			wantPgError(t, err, "FATAL", "08P01", "evicted")
			evicted++
		}
	}
	if evicted != 1 {
		t.Fatalf("%d clients evicted, want 1", evicted)
	}
}

// A client idle in a transaction block hears at once when its server ends,
// without sending anything, as it would on a direct connection: the link's
// pump watches the server while serve waits for the client. Both right
// after the block's last reply and well after it.
func TestIdleInTransactionHearsItsServerEnd(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(nil, ""), testUserlist)
	su := directSuperuser(t, "postgres")
	for _, wait := range []time.Duration{0, 500 * time.Millisecond} {
		t.Run(wait.String(), func(t *testing.T) {
			c := connectPgx(t, p.ConnString(otherDB, appUser, appPassword))
			ctx := ctxT(t, 10*time.Second)
			if _, err := c.Exec(ctx, "BEGIN", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
			pid := queryInt(t, c, "SELECT pg_backend_pid()")
			time.Sleep(wait)
			if _, err := su.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			// Read the client's socket directly: the pooler must send the
			// error and close it on its own.
			conn := c.PgConn().Conn()
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			got, err := io.ReadAll(conn)
			if err != nil {
				t.Fatalf("after its server ended, the idle client read %d bytes, then %v; want an error and EOF", len(got), err)
			}
			if len(got) == 0 || got[0] != 'E' || !bytes.Contains(got, []byte("57P01")) {
				t.Fatalf("the idle client got %q; want Postgres's ErrorResponse 57P01 first", got)
			}
		})
	}
}
