//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPgxDefaultModePreparedStatements: pgx's default query mode prepares
// named statements and caches them per connection. In transaction mode the
// pooler must make that work although every query may run on another
// server (DESIGN.md, "Behaviours users depend on"). Six unmodified pgx
// clients share two servers, each with its own set of cached statements.
func TestPgxDefaultModePreparedStatements(t *testing.T) {
	needPG(t)
	// Backends of an earlier test's pooler may still be exiting.
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "2"}, ""), testUserlist)

	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for c := 0; c < 6; c++ {
		cfg, err := pgx.ParseConfig(p.App()) // default exec mode: cache_statement
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for round := 0; round < 10; round++ {
				for k := 0; k < 4; k++ {
					// A different statement text per (client, k).
					sql := fmt.Sprintf("SELECT $1::int + %d /* client %d */", k, c)
					var got int
					if err := conn.QueryRow(ctx, sql, round).Scan(&got); err != nil {
						errs <- fmt.Errorf("client %d round %d k %d: %w", c, round, k, err)
						return
					}
					if got != round+k {
						errs <- fmt.Errorf("client %d round %d k %d: got %d, want %d", c, round, k, got, round+k)
						return
					}
				}
				b := &pgx.Batch{}
				for i := 0; i < 5; i++ {
					b.Queue(fmt.Sprintf("SELECT $1::int * %d /* batch client %d */", i, c), round)
				}
				br := conn.SendBatch(ctx, b)
				for i := 0; i < 5; i++ {
					var got int
					if err := br.QueryRow().Scan(&got); err != nil || got != round*i {
						errs <- fmt.Errorf("client %d round %d batch %d: got %d, %v", c, round, i, got, err)
						br.Close()
						return
					}
				}
				if err := br.Close(); err != nil {
					errs <- fmt.Errorf("client %d batch close: %w", c, err)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := countBackends(t, appDB, appUser); n > 2 {
		t.Errorf("%d backends, want <= 2", n)
	}
}

// TestStatsCountNamedStatements: SHOW STATS' parse and bind counts are of
// the named statements the pooler maps, as PgBouncer's: none with
// max_prepared_statements = 0, and unnamed Parse/Bind never (issue 18,
// cause 13: every Parse and Bind was counted).
func TestStatsCountNamedStatements(t *testing.T) {
	for _, tc := range []struct {
		name          string
		maxPrepared   string
		parses, binds string
	}{
		{"not mapped", "0", "0", "0"},
		{"mapped", "100", "1", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{"max_prepared_statements": tc.maxPrepared}), ""), opsUserlist)
			admin := adminConsole(t, p)
			cfg := pgxConfig(t, p.App())
			cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
			conn, err := tryConnectPgx(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				// pgx's statement cache: one named statement, bound three
				// times.
				if got := queryInt(t, conn, "SELECT $1::int + 1", i); got != int64(i+1) {
					t.Fatalf("named: %d, want %d", got, i+1)
				}
				// Unnamed Parse and Bind: not counted.
				var v int
				if err := conn.QueryRow(ctxT(t, 10*time.Second), "SELECT $1::int", pgx.QueryExecModeDescribeExec, i).Scan(&v); err != nil || v != i {
					t.Fatalf("unnamed: %d, %v", v, err)
				}
			}
			row := show(t, admin, "SHOW STATS").one(t, "database", appDB)
			if row["total_client_parse_count"] != tc.parses || row["total_bind_count"] != tc.binds {
				t.Errorf("total_client_parse_count %s, total_bind_count %s; want %s, %s",
					row["total_client_parse_count"], row["total_bind_count"], tc.parses, tc.binds)
			}
		})
	}
}

// TestStatsCountClientTransactions: SHOW STATS counts the clients'
// transactions and queries, not the server_reset_query the pooler runs
// when a session-mode client leaves (issue 18, cause 13).
func TestStatsCountClientTransactions(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{
		"pool_mode": "session", "server_reset_query": "DISCARD ALL",
	}), ""), opsUserlist)
	admin := adminConsole(t, p)
	for range 3 {
		conn := connectPgx(t, p.App())
		if got := queryInt(t, conn, "SELECT 1"); got != 1 {
			t.Fatalf("SELECT 1: %d", got)
		}
		if err := conn.Close(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	// The last reset runs after the client has gone: wait for the server
	// to be idle again.
	deadline := time.Now().Add(5 * time.Second)
	for show(t, admin, "SHOW POOLS").one(t, "database", appDB, "user", appUser)["sv_active"] != "0" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	row := show(t, admin, "SHOW STATS").one(t, "database", appDB)
	if row["total_xact_count"] != "3" || row["total_query_count"] != "3" {
		t.Errorf("total_xact_count %s, total_query_count %s; want 3, 3 (the resets are not client transactions)",
			row["total_xact_count"], row["total_query_count"])
	}
}

// TestLongStatementNames: a statement name longer than Postgres's limit
// for a Describe (10,000 bytes) works while the pooler maps names, as in
// PgBouncer: the server only sees the pooler's short name (issue 18,
// cause 15). A Describe that long of a name the pooler does not map
// would reach Postgres as it is, and is refused as Postgres refuses it
// (FATAL 08P01, relayDescribe's errUnmappedTooLong).
func TestLongStatementNames(t *testing.T) {
	p := startPooler(t, iniSettings(map[string]string{"max_prepared_statements": "100"}, ""), testUserlist)
	conn := connectPgx(t, p.App())
	pc := conn.PgConn()
	name := strings.Repeat("a", 16384)
	ctx := ctxT(t, 10*time.Second)
	sd, err := pc.Prepare(ctx, name, "SELECT $1::text", nil) // Parse, Describe, Sync
	if err != nil {
		t.Fatalf("prepare a 16 KiB name: %v", err)
	}
	if len(sd.Fields) != 1 {
		t.Fatalf("description: %d fields, want 1", len(sd.Fields))
	}
	res := pc.ExecPrepared(ctx, name, [][]byte{[]byte("abc")}, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != "abc" {
		t.Fatalf("execute it: rows %q, err %v", res.Rows, res.Err)
	}
	if _, err := pc.Prepare(ctx, "b", "SELECT 1", nil); err != nil {
		t.Fatalf("a short name after the long one: %v", err)
	}
	// Close of the long name (pgconn's Deallocate), then it is gone.
	if err := pc.Deallocate(ctx, name); err != nil {
		t.Fatalf("close the 16 KiB name: %v", err)
	}
	res = pc.ExecPrepared(ctx, name, [][]byte{[]byte("abc")}, nil, nil).Read()
	if pe := asPgError(t, res.Err); pe.Code != "08P01" || pe.Message != "prepared statement did not exist" {
		t.Errorf("execute after its Close: %s %s, want PgBouncer's 08P01 prepared statement did not exist", pe.Code, pe.Message)
	}
}
