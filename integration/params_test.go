//go:build linux

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestParametersFollowClient: two clients with different TimeZone and
// application_name startup parameters alternate transactions over a pool of
// one server; each always sees its own values, both in query results and in
// what Postgres reports for the backend.
func TestParametersFollowClient(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)

	type client struct {
		zone, suffix, app string
		conn              *pgx.Conn
	}
	clients := []*client{
		{zone: "UTC", suffix: "+00", app: "it-client-utc"},
		{zone: "Asia/Tokyo", suffix: "+09", app: "it-client-tokyo"},
	}
	for _, c := range clients {
		cfg := pgxConfig(t, p.App())
		cfg.RuntimeParams["TimeZone"] = c.zone
		cfg.RuntimeParams["application_name"] = c.app
		conn, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatalf("connect with TimeZone=%s: %v", c.zone, err)
		}
		c.conn = conn
		if got := conn.PgConn().ParameterStatus("TimeZone"); got != c.zone {
			t.Errorf("ParameterStatus TimeZone after login = %q, want %q", got, c.zone)
		}
	}

	pids := map[int32]bool{}
	for round := 0; round < 6; round++ {
		for _, c := range clients {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			tx, err := c.conn.Begin(ctx)
			if err != nil {
				cancel()
				t.Fatalf("round %d %s: BEGIN: %v", round, c.zone, err)
			}
			var now, zone, app string
			var pid int32
			err = tx.QueryRow(ctx, "SELECT now()::text, current_setting('TimeZone'), pg_backend_pid()").Scan(&now, &zone, &pid)
			if err == nil {
				err = tx.QueryRow(ctx, "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&app)
			}
			var shown string
			if err == nil {
				err = tx.QueryRow(ctx, "SHOW TimeZone").Scan(&shown)
			}
			if err != nil {
				cancel()
				t.Fatalf("round %d %s: %v", round, c.zone, err)
			}
			if err := tx.Commit(ctx); err != nil {
				cancel()
				t.Fatalf("round %d %s: COMMIT: %v", round, c.zone, err)
			}
			cancel()
			pids[pid] = true
			if !strings.HasSuffix(now, c.suffix) {
				t.Errorf("round %d client %s: now()::text = %q, want suffix %q", round, c.zone, now, c.suffix)
			}
			if zone != c.zone || shown != c.zone {
				t.Errorf("round %d client %s: current_setting=%q SHOW=%q", round, c.zone, zone, shown)
			}
			if app != c.app {
				t.Errorf("round %d client %s: pg_stat_activity.application_name = %q, want %q", round, c.zone, app, c.app)
			}
		}
	}
	// Outside a transaction too (simple protocol, autocommit).
	for _, c := range clients {
		var shown string
		if err := c.conn.QueryRow(ctxT(t, 10*time.Second), "SHOW TimeZone", pgx.QueryExecModeSimpleProtocol).Scan(&shown); err != nil || shown != c.zone {
			t.Errorf("client %s: SHOW TimeZone (simple protocol) = %q, %v", c.zone, shown, err)
		}
	}
	if len(pids) != 1 {
		t.Errorf("clients ran on backends %v; with default_pool_size=1 they must share one", pids)
	}
}

// TestOptionsEscapedSpace: a value with a backslash-escaped space in the
// options startup parameter reaches the session whole, as Postgres reads
// it (issue 18, cause 14: it was refused).
func TestOptionsEscapedSpace(t *testing.T) {
	p := startPooler(t, iniSettings(nil, ""), testUserlist)
	cfg := pgxConfig(t, p.App())
	cfg.RuntimeParams["options"] = `-c application_name=hello\ world`
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatalf("login with an escaped space in options: %v", err)
	}
	defer conn.Close(ctxT(t, 5*time.Second))
	if got := queryText(t, conn, "SELECT current_setting('application_name')"); got != "hello world" {
		t.Errorf("application_name = %q, want %q", got, "hello world")
	}
}
