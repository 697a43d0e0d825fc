//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// searchPathFixture creates three schemas, each with a table sp_probe
// holding its own name, readable by the app user. The names cover a
// lower-case one, one that must be quoted (mixed case) and one reached by
// an unquoted mixed-case spelling (Sp_Other is sp_other).
func searchPathFixture(t *testing.T) {
	t.Helper()
	su := directSuperuser(t, appDB)
	for _, s := range []string{`sp_app`, `"Sp_Mixed"`, `sp_other`} {
		sql := fmt.Sprintf(`DROP SCHEMA IF EXISTS %[1]s CASCADE; CREATE SCHEMA %[1]s;
			CREATE TABLE %[1]s.sp_probe (v text); INSERT INTO %[1]s.sp_probe VALUES (%[2]s);
			GRANT USAGE ON SCHEMA %[1]s TO %[3]s; GRANT SELECT ON %[1]s.sp_probe TO %[3]s`,
			s, "'"+strings.Trim(s, `"`)+"'", appUser)
		if _, err := su.Exec(ctxT(t, 10*time.Second), sql); err != nil {
			t.Fatalf("fixture %s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = su.Exec(ctx, `DROP SCHEMA IF EXISTS sp_app, "Sp_Mixed", sp_other CASCADE`)
	})
}

// searchPathSeen is what one session sees of its search_path: the setting,
// the schemas it resolves to, and which sp_probe (if any) a bare name finds.
type searchPathSeen struct {
	setting, schemas, probe string
}

func readSearchPath(ctx context.Context, conn *pgx.Conn) (searchPathSeen, error) {
	var s searchPathSeen
	if err := conn.QueryRow(ctx, "SELECT current_setting('search_path'), current_schemas(false)::text").Scan(&s.setting, &s.schemas); err != nil {
		return s, err
	}
	err := conn.QueryRow(ctx, "SELECT v FROM sp_probe").Scan(&s.probe)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		s.probe, err = "42P01", nil
	}
	return s, err
}

// TestStartupSearchPathPerClient (issue 32, item 1): startup values of
// search_path, a tracked parameter PostgreSQL 15 does not report, reach
// each client's session exactly as PostgreSQL applies them to a direct
// connection with the same startup packet, also when several clients with
// different values, and one with none, take turns on one server; a client
// that changes it with SET, or leaves with it set in session mode, does
// not hand its value to the next client.
func TestStartupSearchPathPerClient(t *testing.T) {
	needPG(t)
	searchPathFixture(t)

	type spec struct {
		name   string
		params map[string]string
	}
	specs := []spec{
		{"options list", map[string]string{"options": "-c search_path=sp_app,public"}},
		{"quoted mixed case", map[string]string{"search_path": `"Sp_Mixed", public`}},
		{"unquoted mixed case", map[string]string{"search_path": "Sp_Other"}},
		{"none", nil},
	}
	// The ground truth: Postgres itself, with the same startup parameters.
	want := make([]searchPathSeen, len(specs))
	for i, sp := range specs {
		cfg := pgxConfig(t, pg.directConnString(appDB, appUser, appPassword))
		for k, v := range sp.params {
			cfg.RuntimeParams[k] = v
		}
		conn, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatalf("%s: direct connect: %v", sp.name, err)
		}
		if want[i], err = readSearchPath(ctxT(t, 10*time.Second), conn); err != nil {
			t.Fatalf("%s: direct: %v", sp.name, err)
		}
	}
	if want[0].probe != "sp_app" || want[1].probe != "Sp_Mixed" || want[2].probe != "sp_other" || want[3].probe != "42P01" {
		t.Fatalf("the fixture does not separate the clients: %+v", want)
	}

	for _, mode := range []string{"transaction", "session"} {
		t.Run(mode, func(t *testing.T) {
			p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1", "pool_mode": mode}, ""), testUserlist)
			connect := func(sp spec) *pgx.Conn {
				cfg := pgxConfig(t, p.App())
				for k, v := range sp.params {
					cfg.RuntimeParams[k] = v
				}
				conn, err := tryConnectPgx(t, cfg)
				if err != nil {
					t.Fatalf("%s: connect through the pooler: %v", sp.name, err)
				}
				return conn
			}
			check := func(round int, i int, conn *pgx.Conn) {
				t.Helper()
				got, err := readSearchPath(ctxT(t, 10*time.Second), conn)
				if err != nil {
					t.Fatalf("round %d %s: %v", round, specs[i].name, err)
				}
				if got != want[i] {
					t.Errorf("round %d %s: through the pooler %+v, directly %+v", round, specs[i].name, got, want[i])
				}
			}
			if mode == "transaction" {
				conns := make([]*pgx.Conn, len(specs))
				for i, sp := range specs {
					conns[i] = connect(sp)
				}
				for round := 0; round < 3; round++ {
					for i := range specs {
						check(round, i, conns[i])
					}
					// Backwards too: each value follows its client, whoever came before.
					for i := len(specs) - 1; i >= 0; i-- {
						check(round, i, conns[i])
					}
				}
				// A client that sets search_path itself (unsafe in
				// transaction pooling, but it happens) does not hand
				// its value to the next client on the server.
				if _, err := conns[3].Exec(ctxT(t, 10*time.Second), "SET search_path = sp_other"); err != nil {
					t.Fatal(err)
				}
				for i := range specs {
					check(10, i, conns[i])
				}
				if _, err := conns[0].Exec(ctxT(t, 10*time.Second), "DISCARD ALL"); err != nil {
					t.Fatal(err)
				}
				for i := range specs {
					check(11, i, conns[i])
				}
				return
			}
			// Session mode: one client at a time on the one server, reset
			// (DISCARD ALL) between them; the same value twice in a row
			// must be applied again after the reset.
			for round, i := range []int{0, 0, 1, 3, 2, 2, 0} {
				conn := connect(specs[i])
				check(round, i, conn)
				if err := conn.Close(ctxT(t, 5*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestOnlineRestartKeepsSearchPathRecord: an idle server handed over by
// an online restart carries the pooler's record of the search_path it set
// for its last client. After the restart a client without one gets
// PostgreSQL's default on that server, not the last client's, and the
// moved client keeps its own.
func TestOnlineRestartKeepsSearchPathRecord(t *testing.T) {
	needPG(t)
	searchPathFixture(t)
	sock := t.TempDir()
	p1 := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock, "default_pool_size": "1"}, ""), testUserlist)
	cfg := pgxConfig(t, p1.App())
	cfg.RuntimeParams["search_path"] = "sp_app, public"
	withPath, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	probe := func(conn *pgx.Conn) string {
		t.Helper()
		got, err := readSearchPath(ctxT(t, 10*time.Second), conn)
		if err != nil {
			t.Fatal(err)
		}
		return got.probe
	}
	if got := probe(withPath); got != "sp_app" {
		t.Fatalf("before the restart: sp_probe from %q, want sp_app", got)
	}
	pid := queryInt(t, withPath, "SELECT pg_backend_pid()")

	p2 := rebootPooler(t, p1)
	if !p2.WaitLog("takeover: took over 1 servers", 5*time.Second) {
		t.Fatalf("the idle server was not handed over; new log:\n%s\nold log:\n%s", p2.Log(), p1.Log())
	}
	select {
	case <-p1.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the old process did not exit; its log:\n%s", p1.Log())
	}
	without := connectPgx(t, p2.App())
	if got := queryInt(t, without, "SELECT pg_backend_pid()"); got != pid {
		t.Fatalf("the new client is on backend %d, want the handed-over %d", got, pid)
	}
	if got := probe(without); got != "42P01" {
		t.Errorf("a client without a search_path after the restart finds sp_probe in %q, want none (42P01)", got)
	}
	if got := probe(withPath); got != "sp_app" {
		t.Errorf("the moved client after the restart: sp_probe from %q, want sp_app", got)
	}
	// Both leave before the new process's cleanup: SIGTERM waits for
	// clients, and these two came in before it was started.
	withPath.Close(ctxT(t, 5*time.Second))
	without.Close(ctxT(t, 5*time.Second))
}
