//go:build linux

package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The router inside the pooler (shard_file): a cluster "shrt" over three
// databases on two PostgreSQL servers — shrt_main (the default database)
// and shrt_s0 on the main server, shrt_s1 on a second one — with
// logical_shards = 4: logical shards 0-1 on shrt_s0, 2-3 on shrt_s1. Where
// each key belongs is Postgres' own answer: the partition a table
// PARTITION BY HASH (k) WITH MODULUS 4 puts it in; where each row landed
// is read on each database directly.

const shrtFile = `
[[cluster]]
name = "shrt"
default_database = "shrt_main"
logical_shards = 4

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [ { range = "0-1", database = "shrt_s0" }, { range = "2-3", database = "shrt_s1" } ]

[[cluster.colo]]
name = "tenant"
key_type = "text"
tables = { tenants = "name" }
shards = [ { range = "0-1", database = "shrt_s0" }, { range = "2-3", database = "shrt_s1" } ]

[[cluster.colo]]
name = "dev"
key_type = "uuid"
tables = { devices = "id" }
shards = [ { range = "0", database = "shrt_s0" }, { range = "1-3", database = "shrt_s1" } ]
`

// shardRig is the cluster: the pooler, and a direct connection to each
// database.
type shardRig struct {
	p      *Pooler
	direct map[string]*pgx.Conn // by [databases] name
	truth  *pgx.Conn            // where the ground-truth partitioned tables live
	// owner maps a logical shard (by colo) to its database, as the file
	// says.
	owner map[string][]string
	path  string // the shard file
}

func startShardRig(t *testing.T, settings map[string]string) *shardRig {
	t.Helper()
	main := needPG(t)
	second := startSecondCluster(t)
	ctx := ctxT(t, 2*time.Minute)
	su := directSuperuser(t, "postgres")
	for _, db := range []string{"shrt_main", "shrt_s0"} {
		scratchDatabase(t, ctx, su, db, appUser)
	}
	rig := &shardRig{direct: map[string]*pgx.Conn{}, owner: map[string][]string{
		"org":    {"shrt_s0", "shrt_s0", "shrt_s1", "shrt_s1"},
		"tenant": {"shrt_s0", "shrt_s0", "shrt_s1", "shrt_s1"},
		"dev":    {"shrt_s0", "shrt_s1", "shrt_s1", "shrt_s1"},
	}}
	conns := map[string]string{
		"shrt_main": main.directConnString("shrt_main", appUser, appPassword),
		"shrt_s0":   main.directConnString("shrt_s0", appUser, appPassword),
		"shrt_s1":   second.directConnString(appDB, appUser, appPassword),
	}
	for name, cs := range conns {
		conn := connectPgx(t, cs)
		for _, ddl := range []string{
			"CREATE TABLE files (org_id bigint, name text, v int)",
			"CREATE TABLE tenants (name text, v int)",
			"CREATE TABLE devices (id uuid, v int)",
			"CREATE TABLE plans (id int, name text)",
		} {
			if _, err := conn.Exec(ctx, ddl); err != nil {
				t.Fatalf("%s: %s: %v", name, ddl, err)
			}
		}
		rig.direct[name] = conn
	}
	rig.truth = directSuperuser(t, "shrt_main")
	for _, ddl := range []string{
		"CREATE TABLE truth_org (k bigint) PARTITION BY HASH (k)",
		"CREATE TABLE truth_tenant (k text) PARTITION BY HASH (k)",
		"CREATE TABLE truth_dev (k uuid) PARTITION BY HASH (k)",
	} {
		if _, err := rig.truth.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	for _, colo := range []string{"org", "tenant", "dev"} {
		for r := 0; r < 4; r++ {
			if _, err := rig.truth.Exec(ctx, fmt.Sprintf("CREATE TABLE truth_%s_%d PARTITION OF truth_%s FOR VALUES WITH (MODULUS 4, REMAINDER %d)", colo, r, colo, r)); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "shards.toml")
	if err := os.WriteFile(path, []byte(shrtFile), 0o644); err != nil {
		t.Fatal(err)
	}
	rig.path = path
	s := withConsoleUsers(map[string]string{"shard_file": path})
	for k, v := range settings {
		s[k] = v
	}
	extra := fmt.Sprintf("[databases]\nshrt_main = host=127.0.0.1 port=%d dbname=shrt_main\nshrt_s0 = host=127.0.0.1 port=%d dbname=shrt_s0\nshrt_s1 = host=127.0.0.1 port=%d dbname=%s\n",
		main.port, main.port, second.port, appDB)
	rig.p = startPooler(t, iniSettings(s, extra), opsUserlist)
	return rig
}

// expected asks Postgres which database owns each key of colo: the
// partition of truth_<colo> its row goes to.
func (rig *shardRig) expected(t *testing.T, colo string, keys []string) map[string]string {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	want := map[string]string{}
	rows, err := rig.truth.Query(ctx, fmt.Sprintf(
		"INSERT INTO truth_%s SELECT unnest($1::text[])::%s RETURNING k::text, tableoid::regclass::text", colo, map[string]string{"org": "bigint", "tenant": "text", "dev": "uuid"}[colo]), keys)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, part string
		if err := rows.Scan(&k, &part); err != nil {
			t.Fatal(err)
		}
		var r int
		fmt.Sscanf(part[strings.LastIndexByte(part, '_')+1:], "%d", &r)
		want[k] = rig.owner[colo][r]
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.truth.Exec(ctx, "TRUNCATE truth_"+colo); err != nil {
		t.Fatal(err)
	}
	return want
}

// landed reads, on each database directly, where each key's rows are.
func (rig *shardRig) landed(t *testing.T, table, column string) map[string][]string {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	got := map[string][]string{}
	for name, conn := range rig.direct {
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT %s::text FROM %s", column, table))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			got[k] = append(got[k], name)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// checkPlacement compares where rows landed with where Postgres places
// their keys: every key once, on its own database.
func (rig *shardRig) checkPlacement(t *testing.T, colo, table, column string, keys []string) {
	t.Helper()
	want := rig.expected(t, colo, keys)
	got := rig.landed(t, table, column)
	wrong := 0
	for _, k := range keys {
		if dbs := got[k]; len(dbs) != 1 || dbs[0] != want[k] {
			if wrong < 5 {
				t.Errorf("key %s: rows on %v, want one on %s", k, dbs, want[k])
			}
			wrong++
		}
	}
	if len(got) != len(keys) || wrong > 0 {
		t.Fatalf("%d keys inserted, %d keys found, %d misplaced", len(keys), len(got), wrong)
	}
}

func (rig *shardRig) clear(t *testing.T) {
	t.Helper()
	for name, conn := range rig.direct {
		if _, err := conn.Exec(ctxT(t, 30*time.Second), "TRUNCATE files, tenants, devices, plans"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func (rig *shardRig) connect(t *testing.T, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg := pgxConfig(t, rig.p.ConnString("shrt", appUser, appPassword))
	cfg.DefaultQueryExecMode = mode
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestShardRouteInserts(t *testing.T) {
	rig := startShardRig(t, nil)
	r := rand.New(rand.NewPCG(25, 34))
	orgKeys := make([]string, 400)
	for i := range orgKeys {
		orgKeys[i] = fmt.Sprint(r.Int64() - r.Int64())
	}
	tenantKeys := make([]string, 200)
	for i := range tenantKeys {
		tenantKeys[i] = fmt.Sprintf("tenant-%d-é", r.Uint32())
	}
	devKeys := make([]string, 200)
	for i := range devKeys {
		devKeys[i] = fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)
	}
	for _, tc := range []struct {
		name string
		mode pgx.QueryExecMode
	}{
		{"simple", pgx.QueryExecModeSimpleProtocol},
		{"extended-binary", pgx.QueryExecModeCacheStatement},
		{"extended-text", pgx.QueryExecModeExec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig.clear(t)
			ctx := ctxT(t, 2*time.Minute)
			conn := rig.connect(t, tc.mode)
			for _, k := range orgKeys {
				if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'f')", k); err != nil {
					t.Fatalf("insert org %s: %v", k, err)
				}
			}
			for _, k := range tenantKeys {
				if _, err := conn.Exec(ctx, "INSERT INTO tenants (name, v) VALUES ($1, 1)", k); err != nil {
					t.Fatalf("insert tenant %s: %v", k, err)
				}
			}
			for _, k := range devKeys {
				if _, err := conn.Exec(ctx, "INSERT INTO devices (id, v) VALUES ($1::uuid, 1)", k); err != nil {
					t.Fatalf("insert device %s: %v", k, err)
				}
			}
			rig.checkPlacement(t, "org", "files", "org_id", orgKeys)
			rig.checkPlacement(t, "tenant", "tenants", "name", tenantKeys)
			rig.checkPlacement(t, "dev", "devices", "id", devKeys)
			// Every row reads back through the router.
			for _, k := range orgKeys[:50] {
				var n int
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = $1", k).Scan(&n); err != nil || n != 1 {
					t.Fatalf("read back org %s: %d rows, %v", k, n, err)
				}
			}
			// A table in no colo goes to the default database.
			if _, err := conn.Exec(ctx, "INSERT INTO plans VALUES (1, 'p')"); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := rig.direct["shrt_main"].QueryRow(ctx, "SELECT count(*) FROM plans").Scan(&n); err != nil || n != 1 {
				t.Fatalf("plans on shrt_main: %d, %v", n, err)
			}
		})
	}
}

// pipelinedPrepare sends a named statement's Parse and Describe and its
// Bind, Describe and Execute (with param) in one batch, as pgx's pipeline
// and pgjdbc past prepareThreshold do, and returns the rows' first column
// and the first error.
func pipelinedPrepare(ctx context.Context, pc *pgconn.PgConn, name, sql, param string) (rows []string, err error) {
	pl := pc.StartPipeline(ctx)
	defer func() {
		if cerr := pl.Close(); err == nil {
			err = cerr
		}
	}()
	pl.SendPrepare(name, sql, nil)
	pl.SendQueryPrepared(name, [][]byte{[]byte(param)}, nil, nil)
	if err := pl.Sync(); err != nil {
		return nil, err
	}
	for {
		res, err := pl.GetResults()
		if err != nil {
			return rows, err
		}
		switch r := res.(type) {
		case *pgconn.ResultReader:
			rr := r.Read()
			if rr.Err != nil {
				return rows, rr.Err
			}
			for _, row := range rr.Rows {
				rows = append(rows, string(row[0]))
			}
		case *pgconn.PipelineSync:
			return rows, nil
		}
	}
}

// wantShardRefused checks a 0A000 refusal with a DETAIL and a HINT.
func wantShardRefused(t *testing.T, err error, detail string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.Contains(pe.Detail, detail) || pe.Hint == "" {
		t.Fatalf("got %v (detail %q), want 0A000 with DETAIL containing %q and a HINT", err, detailOf(err), detail)
	}
}

func detailOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Detail
	}
	return ""
}

func TestShardRouteTransactions(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 2*time.Minute)
	// Two keys on each database, by Postgres' placement.
	cands := make([]string, 40)
	for i := range cands {
		cands[i] = fmt.Sprint(i * 7919)
	}
	want := rig.expected(t, "org", cands)
	var on0, on1 []string
	for _, k := range cands {
		if want[k] == "shrt_s0" {
			on0 = append(on0, k)
		} else {
			on1 = append(on1, k)
		}
	}
	if len(on0) < 2 || len(on1) < 2 {
		t.Fatalf("keys: %v on s0, %v on s1", on0, on1)
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			rig.clear(t)
			conn := rig.connect(t, mode)
			// A transaction on one shard: BEGIN is held until its first
			// statement, then everything runs there.
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{on1[0], on1[1]} {
				if _, err := tx.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'tx')", k); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := rig.landed(t, "files", "org_id")
			if len(got) != 2 || got[on1[0]][0] != "shrt_s1" || got[on1[1]][0] != "shrt_s1" {
				t.Fatalf("rows after a one-shard transaction: %v", got)
			}
			// A transaction that reaches for a second shard fails; nothing
			// of it is committed, and no backend stays in a transaction.
			tx, err = conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'x')", on0[0]); err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'x')", on1[0])
			// In both protocols: ERROR 0A000, the transaction failed on
			// both sides, and ROLLBACK ends it.
			wantShardRefused(t, err, "")
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			var n int
			for name, dc := range rig.direct {
				if err := dc.QueryRow(ctx, "SELECT count(*) FROM files WHERE name = 'x'").Scan(&n); err != nil || n != 0 {
					t.Fatalf("%s: %d rows of the failed transaction, %v", name, n, err)
				}
			}
			waitNoIdleInTx(t)
			if mode != pgx.QueryExecModeSimpleProtocol {
				// A pipeline (one implicit transaction up to its Sync)
				// with keys on two shards: refused, nothing committed,
				// and the connection goes on.
				b := &pgx.Batch{}
				b.Queue("INSERT INTO files (org_id, name) VALUES ($1, 'pipe')", on0[1])
				b.Queue("INSERT INTO files (org_id, name) VALUES ($1, 'pipe')", on1[1])
				wantShardRefused(t, conn.SendBatch(ctx, b).Close(), "")
				for name, dc := range rig.direct {
					if err := dc.QueryRow(ctx, "SELECT count(*) FROM files WHERE name = 'pipe'").Scan(&n); err != nil || n != 0 {
						t.Fatalf("%s: %d rows of the refused pipeline, %v", name, n, err)
					}
				}
				waitNoIdleInTx(t)
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = $1", on1[0]).Scan(&n); err != nil || n != 1 {
					t.Fatalf("after the refused pipeline: %d, %v", n, err)
				}
				return
			}
			// The connection goes on: BEGIN; COMMIT with nothing in between,
			// and a refused statement outside a transaction.
			if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
			_, err = conn.Exec(ctx, "SELECT * FROM files")
			wantShardRefused(t, err, "files")
			_, err = conn.Exec(ctx, "UPDATE files SET v = 1 WHERE org_id = 1 OR org_id = 2")
			wantShardRefused(t, err, "OR")
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = "+on1[0]).Scan(&n); err != nil || n != 1 {
				t.Fatalf("after refusals: %d, %v", n, err)
			}
			// A pinned session key routes what names no key.
			if _, err := conn.Exec(ctx, "SET pgturnstile.shard_key = '"+on0[1]+"'"); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM files").Scan(&n); err != nil || n != 0 {
				t.Fatalf("count on %s's shard: %d, %v", on0[1], n, err)
			}
			if _, err := conn.Exec(ctx, "RESET pgturnstile.shard_key"); err != nil {
				t.Fatal(err)
			}
			// A hint names the key.
			if err := conn.QueryRow(ctx, "/* pgturnstile: shard_key="+on1[0]+" */ SELECT count(*) FROM files").Scan(&n); err != nil || n != 2 {
				t.Fatalf("count by hint on %s's shard: %d, %v", on1[0], n, err)
			}
		})
	}
}

// waitNoIdleInTx waits until no backend of the app user on the main
// server is idle in a transaction (a drain may still be rolling back).
func waitNoIdleInTx(t *testing.T) {
	t.Helper()
	su := directSuperuser(t, "postgres")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := su.QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND state LIKE 'idle in transaction%'", appUser).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends idle in transaction", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rewrite writes a new shard file (edit of the original) and reloads.
func (rig *shardRig) rewrite(t *testing.T, edit func(string) string) {
	t.Helper()
	if err := os.WriteFile(rig.path, []byte(edit(shrtFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := adminConsole(t, rig.p).Exec(ctxT(t, 10*time.Second), "RELOAD"); err != nil {
		t.Fatal(err)
	}
}

// routeCount is SHOW ROUTES' count for cluster shrt, colo and source.
func routeCount(t *testing.T, admin *pgx.Conn, colo, source string) int {
	t.Helper()
	n := 0
	for _, row := range show(t, admin, "SHOW ROUTES").where("cluster", "shrt", "colo", colo, "source", source) {
		var k int
		fmt.Sscan(row["count"], &k)
		n += k
	}
	return n
}

func TestShardRouteOperations(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 3*time.Minute)
	admin := adminConsole(t, rig.p)

	// SHOW SHARDS is the file's map.
	sh := show(t, admin, "SHOW SHARDS")
	if len(sh.rows) != 6 {
		t.Fatalf("SHOW SHARDS: %d rows, want 6: %v", len(sh.rows), sh.rows)
	}
	for _, want := range [][]string{
		{"org", "bigint", "0-1", "shrt_s0"}, {"org", "bigint", "2-3", "shrt_s1"},
		{"tenant", "text", "0-1", "shrt_s0"}, {"dev", "uuid", "1-3", "shrt_s1"},
	} {
		if len(sh.where("cluster", "shrt", "colo", want[0], "key_type", want[1], "range", want[2], "database", want[3])) != 1 {
			t.Errorf("SHOW SHARDS has no row %v: %v", want, sh.rows)
		}
	}

	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprint(i*104729 - 5000)
	}
	want := rig.expected(t, "org", keys)

	// Shadow mode: every decision counted, everything on the default
	// database.
	rig.rewrite(t, func(s string) string {
		return strings.Replace(s, "logical_shards = 4\n", "logical_shards = 4\nshadow = true\n", 1)
	})
	conn := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	before := routeCount(t, admin, "org", "literal")
	for _, k := range keys[:50] {
		if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+k+", 'shadow')"); err != nil {
			t.Fatal(err)
		}
	}
	if got := routeCount(t, admin, "org", "literal") - before; got != 50 {
		t.Errorf("shadow mode counted %d literal decisions, want 50", got)
	}
	var n int
	if err := rig.direct["shrt_main"].QueryRow(ctx, "SELECT count(*) FROM files WHERE name = 'shadow'").Scan(&n); err != nil || n != 50 {
		t.Fatalf("shadow mode: %d rows on the default database, want 50 (%v)", n, err)
	}
	conn.Close(ctx)
	rig.rewrite(t, func(s string) string { return s })
	rig.clear(t)

	// RELOAD under 50 looping clients: the org colo's ranges 2-3 move
	// from shrt_s1 to shrt_s0 while they insert; no client sees an error,
	// and rows inserted after the reload are on the new map's database.
	var stop atomic.Bool
	errs := make(chan error, 50)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rig.connect(t, pgx.QueryExecModeCacheStatement)
			defer c.Close(context.Background())
			for j := 0; !stop.Load(); j++ {
				k := keys[(i*7+j)%len(keys)]
				if _, err := c.Exec(ctx, "INSERT INTO files (org_id, name, v) VALUES ($1, 'loop', $2)", k, j); err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
			}
		}()
	}
	time.Sleep(time.Second)
	rig.rewrite(t, func(s string) string {
		return strings.Replace(s, `{ range = "0-1", database = "shrt_s0" }, { range = "2-3", database = "shrt_s1" } ]

[[cluster.colo]]
name = "tenant"`, `{ range = "0-3", database = "shrt_s0" } ]

[[cluster.colo]]
name = "tenant"`, 1)
	})
	if got := show(t, admin, "SHOW SHARDS").where("colo", "org"); len(got) != 1 || got[0]["database"] != "shrt_s0" {
		t.Fatalf("SHOW SHARDS after RELOAD: %v", got)
	}
	time.Sleep(time.Second) // the new map is in force for new transactions at once
	var onS1Before int
	if err := rig.direct["shrt_s1"].QueryRow(ctx, "SELECT count(*) FROM files").Scan(&onS1Before); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var onS1After int
	if err := rig.direct["shrt_s1"].QueryRow(ctx, "SELECT count(*) FROM files").Scan(&onS1After); err != nil {
		t.Fatal(err)
	}
	if onS1After != onS1Before {
		t.Errorf("rows kept landing on shrt_s1 after the map moved its ranges away: %d then %d", onS1Before, onS1After)
	}
	var total int
	for _, dc := range rig.direct {
		var k int
		if err := dc.QueryRow(ctx, "SELECT count(*) FROM files WHERE name = 'loop'").Scan(&k); err != nil {
			t.Fatal(err)
		}
		total += k
	}
	if total == 0 {
		t.Fatal("the looping clients inserted nothing")
	}
	_ = want

	// Cancel reaches the shard that runs the query.
	rig.rewrite(t, func(s string) string { return s })
	conn = rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	var k1 string
	for _, k := range keys {
		if want[k] == "shrt_s1" {
			k1 = k
			break
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+k1+", 'sleep')"); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = conn.PgConn().CancelRequest(ctx)
	}()
	start := time.Now()
	_, err := conn.Exec(ctx, "SELECT pg_sleep(20) FROM files WHERE org_id = "+k1+" AND name = 'sleep'")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("cancelled query: %v, want 57014", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the cancel took %v: it did not reach shrt_s1", time.Since(start))
	}
}

func TestShardRouteScatter(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 2*time.Minute)
	rig.rewrite(t, func(s string) string {
		return strings.Replace(s, "logical_shards = 4\n", "logical_shards = 4\ntarget_users = [\"app\"]\non_missing_key = \"scatter\"\n", 1)
	})
	conn := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	for i := range 60 {
		if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO files (org_id, name, v) VALUES (%d, 'n%d', %d)", i*31, i%5, i)); err != nil {
			t.Fatal(err)
		}
	}
	// The truth: each database's rows, read directly.
	truth := func(where string) []string {
		var all []string
		for _, dc := range rig.direct {
			rows, err := dc.Query(ctx, "SELECT org_id::text || '/' || name FROM files "+where)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s string
				rows.Scan(&s)
				all = append(all, s)
			}
			rows.Close()
		}
		slices.Sort(all)
		return all
	}
	gotOn := func(conn *pgx.Conn, q string, args ...any) ([]string, string) {
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		slices.Sort(out)
		return out, rows.CommandTag().String()
	}
	got := func(q string) ([]string, string) { return gotOn(conn, q) }
	// on_missing_key = scatter: a SELECT without a key reads every shard.
	want := truth("WHERE name = 'n1'")
	rows, tag := got("SELECT org_id::text || '/' || name FROM files WHERE name = 'n1'")
	if !slices.Equal(rows, want) || tag != fmt.Sprintf("SELECT %d", len(want)) || len(want) != 12 {
		t.Fatalf("scatter: %d rows (%s), want %d: %v vs %v", len(rows), tag, len(want), rows, want)
	}
	// Plain columns: each database describes them with its own table OID
	// (a RowDescription field), which the scatter takes as the same
	// columns.
	for _, c := range []*pgx.Conn{conn, rig.connect(t, pgx.QueryExecModeExec)} {
		rows, err := c.Query(ctx, "SELECT org_id, name FROM files WHERE name = 'n1'")
		if err != nil {
			t.Fatal(err)
		}
		var plain []string
		for rows.Next() {
			var k int64
			var n string
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			plain = append(plain, fmt.Sprintf("%d/%s", k, n))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("a scatter of plain columns: %v (%s)", err, detailOf(err))
		}
		slices.Sort(plain)
		if want := truth("WHERE name = 'n1'"); !slices.Equal(plain, want) {
			t.Fatalf("a scatter of plain columns: %v, want %v", plain, want)
		}
	}
	// COPY … TO STDOUT: every database's lines, COPY n summed.
	for _, q := range []string{
		"/* pgturnstile: shard=all */ COPY files (org_id, name) TO STDOUT",
		"/* pgturnstile: shard=all */ COPY (SELECT org_id, name FROM files WHERE name = 'n3') TO STDOUT WITH (FORMAT csv)",
	} {
		var buf bytes.Buffer
		tag, err := conn.PgConn().CopyTo(ctx, &buf, q)
		if err != nil {
			t.Fatalf("%s: %v (%s)", q, err, detailOf(err))
		}
		var direct bytes.Buffer
		for _, dc := range rig.direct {
			if _, err := dc.PgConn().CopyTo(ctx, &direct, strings.TrimPrefix(q, "/* pgturnstile: shard=all */ ")); err != nil {
				t.Fatal(err)
			}
		}
		lines := func(b []byte) []string {
			l := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			slices.Sort(l)
			return l
		}
		got, want := lines(buf.Bytes()), lines(direct.Bytes())
		if !slices.Equal(got, want) || tag.String() != fmt.Sprintf("COPY %d", len(want)) || len(want) < 12 {
			t.Fatalf("%s: %d lines (%s), want %d", q, len(got), tag, len(want))
		}
	}
	// A column of a type made in each database (an enum): its type OID is
	// each database's own, and the scatter reads it as the same column.
	for name, dc := range rig.direct {
		for _, ddl := range []string{"CREATE TYPE mood AS ENUM ('ok', 'sad')", "CREATE TABLE moods (org_id bigint, m mood)",
			"INSERT INTO moods SELECT org_id, 'sad' FROM files WHERE name = 'n1'"} {
			if _, err := dc.Exec(ctx, ddl); err != nil {
				t.Fatalf("%s: %s: %v", name, ddl, err)
			}
		}
	}
	rig.rewrite(t, func(s string) string {
		s = strings.Replace(s, "logical_shards = 4\n", "logical_shards = 4\ntarget_users = [\"app\"]\non_missing_key = \"scatter\"\n", 1)
		return strings.Replace(s, `tables = { files = "org_id" }`, `tables = { files = "org_id", moods = "org_id" }`, 1)
	})
	var moods int
	mrows, merr := conn.Query(ctx, "SELECT org_id, m FROM moods WHERE m = 'sad'")
	if merr != nil {
		t.Fatal(merr)
	}
	for mrows.Next() {
		moods++
	}
	mrows.Close()
	if err := mrows.Err(); err != nil || moods != 12 {
		t.Fatalf("a scatter of an enum column: %d rows, %v (%s), want 12", moods, err, detailOf(err))
	}
	// shard=all names every database.
	want = truth("")
	rows, tag = got("/* pgturnstile: shard=all */ SELECT org_id::text || '/' || name FROM files")
	if !slices.Equal(rows, want) || len(want) != 60 || tag != "SELECT 60" {
		t.Fatalf("shard=all: %d rows (%s), want 60", len(rows), tag)
	}
	// What a scatter would answer wrongly is refused.
	for _, q := range []string{
		"SELECT count(*) FROM files",
		"SELECT org_id FROM files ORDER BY org_id LIMIT 3",
		"/* pgturnstile: shard=all */ SELECT DISTINCT name FROM files",
		"UPDATE files SET v = 0 WHERE name = 'n1'",
		// Rows a write returns would be one database's: refused, not run.
		"/* pgturnstile: shard=all */ UPDATE files SET v = -1 WHERE name = 'n1' RETURNING org_id",
	} {
		_, err := conn.Exec(ctx, q)
		wantShardRefused(t, err, "")
	}
	for name, dc := range rig.direct {
		var n int
		if err := dc.QueryRow(ctx, "SELECT count(*) FROM files WHERE v = -1").Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s: %d rows written by a refused statement (%v)", name, n, err)
		}
	}
	// shard=all runs DDL on each database in turn; a failure is reported
	// with each database's outcome.
	if _, err := conn.Exec(ctx, "/* pgturnstile: shard=all */ CREATE INDEX files_name ON files (name)"); err != nil {
		t.Fatal(err)
	}
	for name, dc := range rig.direct {
		var n int
		if err := dc.QueryRow(ctx, "SELECT count(*) FROM pg_indexes WHERE indexname = 'files_name'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: index %d, %v", name, n, err)
		}
	}
	_, err := conn.Exec(ctx, "/* pgturnstile: shard=all */ CREATE INDEX files_name ON files (name)")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "failed on 3 of 3") || !strings.Contains(pe.Detail, "already exists") {
		t.Fatalf("a failing shard=all: %v (%s)", err, detailOf(err))
	}
	// The connection goes on.
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = 31").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after the scatters: %d, %v", n, err)
	}

	// The extended protocol: the unnamed statement (pgx's exec mode:
	// Parse, Bind, Describe, Execute, Sync in one batch; its describe-exec
	// mode: Parse, Describe, Sync, then Bind, Describe, Execute, Sync)
	// scatters the same way, parameters included; its rows are the simple
	// protocol's and the union of each database's, read directly.
	var xconns []*pgx.Conn
	for _, qm := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeDescribeExec} {
		xconn := rig.connect(t, qm)
		xconns = append(xconns, xconn)
		want = truth("WHERE name = 'n2'")
		simple, _ := got("SELECT org_id::text || '/' || name FROM files WHERE name = 'n2'")
		rows, tag = gotOn(xconn, "SELECT org_id::text || '/' || name FROM files WHERE name = $1", "n2")
		if !slices.Equal(rows, want) || !slices.Equal(rows, simple) || tag != fmt.Sprintf("SELECT %d", len(want)) || len(want) != 12 {
			t.Fatalf("%v: extended scatter: %d rows (%s), want %d: %v vs %v", qm, len(rows), tag, len(want), rows, want)
		}
		want = truth("")
		rows, tag = gotOn(xconn, "/* pgturnstile: shard=all */ SELECT org_id::text || '/' || name FROM files WHERE v >= $1", 0)
		if !slices.Equal(rows, want) || len(want) != 60 || tag != "SELECT 60" {
			t.Fatalf("%v: extended shard=all: %d rows (%s), want 60", qm, len(rows), tag)
		}
		// The same refusals.
		for _, q := range []string{
			"SELECT count(*) FROM files WHERE name = $1",
			"SELECT org_id FROM files WHERE name = $1 ORDER BY org_id LIMIT 3",
			"/* pgturnstile: shard=all */ SELECT DISTINCT name FROM files WHERE name = $1",
			"UPDATE files SET v = 0 WHERE name = $1",
		} {
			_, err := xconn.Exec(ctx, q, "n1")
			wantShardRefused(t, err, "")
		}
		// The first error wins (every database fails it here).
		_, err = xconn.Exec(ctx, "SELECT org_id FROM files WHERE name = $1 AND 1 / (v - v) = 1", "n1")
		if !errors.As(err, &pe) || pe.Code != "22012" {
			t.Fatalf("%v: a failing extended scatter: %v", qm, err)
		}
		// Inside a transaction: refused, and the transaction goes on.
		tx, err := xconn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, "SELECT org_id FROM files WHERE name = $1", "n1")
		wantShardRefused(t, err, "transaction")
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A named statement (pgx's default mode: Parse and Describe of
	// stmtcache_…, then a batch of Bind, Describe, Execute and Sync for each
	// run) scatters at each Bind, with its Parse sent ahead, unnamed, on
	// every database; the same refusals hold for it.
	nconn := rig.connect(t, pgx.QueryExecModeCacheStatement)
	for _, v := range []string{"n1", "n3", "n1", "n4"} {
		want = truth("WHERE name = '" + v + "'")
		rows, tag = gotOn(nconn, "SELECT org_id::text || '/' || name FROM files WHERE name = $1", v)
		if !slices.Equal(rows, want) || tag != fmt.Sprintf("SELECT %d", len(want)) || len(want) != 12 {
			t.Fatalf("named scatter of %s: %d rows (%s), want %d: %v vs %v", v, len(rows), tag, len(want), rows, want)
		}
	}
	_, err = nconn.Exec(ctx, "SELECT count(*) FROM files WHERE name = $1", "n1")
	wantShardRefused(t, err, "")
	_, err = nconn.Exec(ctx, "SELECT org_id FROM files WHERE name = $1 AND 1 / (v - v) = 1", "n1")
	if !errors.As(err, &pe) || pe.Code != "22012" {
		t.Fatalf("a failing named scatter: %v", err)
	}
	// pgjdbc's named statement past prepareThreshold: Parse, Bind,
	// Describe, Execute and Sync in one batch; then Binds of the name
	// alone.
	pc := nconn.PgConn()
	piped, err := pipelinedPrepare(ctx, pc, "S_1", "SELECT org_id::text || '/' || name FROM files WHERE name = $1", "n2")
	if err != nil {
		t.Fatalf("Parse and Bind of S_1 in one batch: %v (%s)", err, detailOf(err))
	}
	slices.Sort(piped)
	if want = truth("WHERE name = 'n2'"); !slices.Equal(piped, want) {
		t.Fatalf("Parse and Bind of S_1 in one batch: %d rows, want %d", len(piped), len(want))
	}
	for _, v := range []string{"n0", "n2"} {
		res := pc.ExecPrepared(ctx, "S_1", [][]byte{[]byte(v)}, nil, nil).Read()
		var got []string
		for _, row := range res.Rows {
			got = append(got, string(row[0]))
		}
		slices.Sort(got)
		if want = truth("WHERE name = '" + v + "'"); res.Err != nil || !slices.Equal(got, want) || res.CommandTag.String() != fmt.Sprintf("SELECT %d", len(want)) {
			t.Fatalf("a later Bind of S_1 (%s): %d rows (%s), %v; want %d", v, len(got), res.CommandTag, res.Err, len(want))
		}
	}
	// A named statement whose Parse ran and whose execution failed exists
	// for the client, as after a Parse Postgres ran: its next Bind fails
	// the same way, not as a name never prepared.
	_, divErr := pipelinedPrepare(ctx, pc, "S_div", "SELECT org_id FROM files WHERE name = $1 AND 1 / (v - v) = 1", "n1")
	if !errors.As(divErr, &pe) || pe.Code != "22012" {
		t.Fatalf("Parse and Bind of S_div: %v, want 22012", divErr)
	}
	if res := pc.ExecPrepared(ctx, "S_div", [][]byte{[]byte("n1")}, nil, nil).Read(); !errors.As(res.Err, &pe) || pe.Code != "22012" {
		t.Fatalf("a later Bind of S_div: %v, want 22012 again", res.Err)
	}
	// A name in use gets the mapping's answer, PgBouncer's 08P01, alone
	// (Parse and Describe) or with a Bind (a scatter's batch).
	if _, err := pc.Prepare(ctx, "S_1", "SELECT org_id FROM files WHERE name = $1", nil); !errors.As(err, &pe) || pe.Code != "08P01" {
		t.Fatalf("a second Parse of S_1: %v, want 08P01", err)
	}
	_, inUse := pipelinedPrepare(ctx, pc, "S_1", "SELECT org_id::text || '/' || name FROM files WHERE name = $1", "n2")
	if !errors.As(inUse, &pe) || pe.Code != "08P01" {
		t.Fatalf("a second Parse of S_1 with its Bind: %v, want 08P01", inUse)
	}
	if res := pc.ExecPrepared(ctx, "S_1", [][]byte{[]byte("n2")}, nil, nil).Read(); res.Err != nil || len(res.Rows) != 12 {
		t.Fatalf("S_1 after the refused Parse: %d rows, %v", len(res.Rows), res.Err)
	}
	// shard=all DDL through the extended protocol (pgjdbc's
	// Statement.execute, a migration tool's): each database in turn, as
	// for a Query, with the batch's answers; a failure reports each
	// database's outcome. Parse, Bind, Describe, Execute and Sync in one
	// batch, then Parse and Describe before a Bind alone, then a named
	// statement.
	xpc := xconns[0].PgConn()
	ddl := "/* pgturnstile: shard=all */ CREATE INDEX files_v ON files (v)"
	if res := xpc.ExecParams(ctx, ddl, nil, nil, nil, nil).Read(); res.Err != nil || res.CommandTag.String() != "CREATE INDEX" {
		t.Fatalf("extended shard=all DDL: %q, %v (%s)", res.CommandTag, res.Err, detailOf(res.Err))
	}
	if res := xpc.ExecParams(ctx, ddl, nil, nil, nil, nil).Read(); !errors.As(res.Err, &pe) || !strings.Contains(pe.Message, "failed on 3 of 3") || !strings.Contains(pe.Detail, "already exists") {
		t.Fatalf("a failing extended shard=all: %v (%s)", res.Err, detailOf(res.Err))
	}
	ddl2 := "/* pgturnstile: shard=all */ CREATE INDEX files_v_name ON files (v, name)"
	if _, err := xpc.Prepare(ctx, "", ddl2, nil); err != nil {
		t.Fatal(err)
	}
	if res := xpc.ExecPrepared(ctx, "", nil, nil, nil).Read(); res.Err != nil || res.CommandTag.String() != "CREATE INDEX" {
		t.Fatalf("extended shard=all DDL, Bind after Parse and Describe: %q, %v (%s)", res.CommandTag, res.Err, detailOf(res.Err))
	}
	if _, err := pc.Prepare(ctx, "ddl_1", "/* pgturnstile: shard=all */ DROP INDEX files_v", nil); err != nil {
		t.Fatal(err)
	}
	if res := pc.ExecPrepared(ctx, "ddl_1", nil, nil, nil).Read(); res.Err != nil || res.CommandTag.String() != "DROP INDEX" {
		t.Fatalf("named shard=all DDL: %q, %v (%s)", res.CommandTag, res.Err, detailOf(res.Err))
	}
	for name, dc := range rig.direct {
		var idx []string
		rows, err := dc.Query(ctx, "SELECT indexname::text FROM pg_indexes WHERE tablename = 'files' ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var i string
			rows.Scan(&i)
			idx = append(idx, i)
		}
		rows.Close()
		if !slices.Equal(idx, []string{"files_name", "files_v_name"}) {
			t.Fatalf("%s: indexes %v, want files_name, files_v_name", name, idx)
		}
	}
	// Both connections go on.
	for _, c := range append(xconns, nconn) {
		if err := c.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = $1", 31).Scan(&n); err != nil || n != 1 {
			t.Fatalf("after the extended scatters: %d, %v", n, err)
		}
	}
}

// TestShardRouteHeldStatements: what a transaction says before its first
// statement (SAVEPOINT, SET LOCAL, RELEASE, ROLLBACK TO) is held with its
// BEGIN and runs ahead of that statement on its shard; a held statement
// that fails there is the error the client's statement gets.
func TestShardRouteHeldStatements(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, time.Minute)
	want := rig.expected(t, "org", []string{"1", "2", "3", "4", "5", "6", "7", "8"})
	var k0, k1 string
	for _, k := range []string{"1", "2", "3", "4", "5", "6", "7", "8"} {
		if want[k] == "shrt_s0" && k0 == "" {
			k0 = k
		}
		if want[k] == "shrt_s1" && k1 == "" {
			k1 = k
		}
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		t.Run(mode.String(), func(t *testing.T) {
			rig.clear(t)
			conn := rig.connect(t, mode)
			for _, q := range []string{"BEGIN", "SAVEPOINT a", "SET LOCAL statement_timeout = '7s'", "RELEASE SAVEPOINT a", "SAVEPOINT b"} {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			var timeout string
			if err := conn.QueryRow(ctx, "SELECT current_setting('statement_timeout') || '/' || count(*) FROM files WHERE org_id = "+k1).Scan(&timeout); err != nil || timeout != "7s/0" {
				t.Fatalf("the held SET LOCAL on the transaction's shard: %q, %v", timeout, err)
			}
			if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+k1+", 'held')"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT b"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+k1+", 'kept')"); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
			got := rig.landed(t, "files", "name")
			if len(got) != 1 || len(got["kept"]) != 1 || got["kept"][0] != "shrt_s1" {
				t.Fatalf("after ROLLBACK TO the held savepoint: %v", got)
			}
			// A held statement that fails on the shard: its error is the
			// statement's, the transaction is aborted, ROLLBACK works.
			for _, q := range []string{"BEGIN", "SET LOCAL no_such_setting_at_all = 1"} {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			_, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+k0+", 'never')")
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "42704" {
				t.Fatalf("the statement after a failed held SET LOCAL: %v, want 42704", err)
			}
			if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
			if got := rig.landed(t, "files", "name"); len(got["never"]) != 0 {
				t.Fatalf("rows of the failed transaction: %v", got)
			}
			waitNoIdleInTx(t)
		})
	}
}

// TestShardRouteOnlineRestart: a sharded cluster's client handed over by
// pgturnstile -R keeps being routed: its statement prepared on the old
// process, executed on the new one for keys of either shard, lands where
// Postgres places the keys.
func TestShardRouteOnlineRestart(t *testing.T) {
	rig := startShardRig(t, map[string]string{"unix_socket_dir": t.TempDir()})
	ctx := ctxT(t, time.Minute)
	keys := []string{"11", "12", "13", "14", "15", "16", "17", "18"}
	want := rig.expected(t, "org", keys)
	conn := rig.connect(t, pgx.QueryExecModeCacheStatement)
	const ins = "INSERT INTO files (org_id, name) VALUES ($1, 'moved')"
	for _, k := range keys[:4] {
		if _, err := conn.Exec(ctx, ins, k); err != nil {
			t.Fatal(err)
		}
	}
	p2 := rebootPooler(t, rig.p)
	if !p2.WaitLog("took over 1 clients", 10*time.Second) {
		t.Fatalf("the cluster's client was not taken over; new log:\n%s", p2.Log())
	}
	for _, k := range keys[4:] {
		if _, err := conn.Exec(ctx, ins, k); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx) // before the new process stops, which waits for its clients
	got := rig.landed(t, "files", "org_id")
	for _, k := range keys {
		if dbs := got[k]; len(dbs) != 1 || dbs[0] != want[k] {
			t.Errorf("key %s on %v, want %s", k, dbs, want[k])
		}
	}
}

// TestShardRouteTransactionLoop: transactions sent back to back, the way
// pgbench sends them (each BEGIN the moment the last COMMIT's
// ReadyForQuery arrives), in the simple, extended and prepared protocols:
// every BEGIN is held until its transaction's first statement, so no
// transaction is pinned to the default database before its key is known.
// Also a driver's batch of BEGIN and an INSERT in one Sync (pgjdbc's), which
// goes whole to the INSERT's shard.
func TestShardRouteTransactionLoop(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 2*time.Minute)
	script := filepath.Join(t.TempDir(), "tx.sql")
	if err := os.WriteFile(script, []byte(`\set k random(1, 100000)
BEGIN;
INSERT INTO files (org_id, name, v) VALUES (:k, 'loop', 1);
UPDATE files SET v = v + 1 WHERE org_id = :k;
SELECT v FROM files WHERE org_id = :k;
END;
`), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(script), 0o755)
	for _, mode := range []string{"simple", "extended", "prepared"} {
		t.Run(mode, func(t *testing.T) {
			rig.clear(t)
			out, err := pgbench(t, appPassword, "-h", "127.0.0.1", "-p", fmt.Sprint(rig.p.Port), "-U", appUser,
				"-n", "-c", "8", "-j", "2", "-T", "3", "-M", mode, "-f", script, "shrt")
			if err != nil || !strings.Contains(out, "number of failed transactions: 0") {
				t.Fatalf("pgbench -M %s: %v\n%s", mode, err, out)
			}
			var n int
			for _, dc := range rig.direct {
				var k int
				if err := dc.QueryRow(ctx, "SELECT count(*) FROM files WHERE v = 2").Scan(&k); err != nil {
					t.Fatal(err)
				}
				n += k
			}
			if n == 0 {
				t.Fatal("no transaction committed")
			}
		})
	}
	// Every row is on its key's shard.
	keys := []string{}
	for k, dbs := range rig.landed(t, "files", "org_id") {
		if len(dbs) > 0 {
			keys = append(keys, k)
		}
	}
	want := rig.expected(t, "org", keys)
	for k, dbs := range rig.landed(t, "files", "org_id") {
		for _, db := range dbs {
			if db != want[k] {
				t.Fatalf("key %s has a row on %s, want %s", k, db, want[k])
			}
		}
	}

	// BEGIN and an INSERT in one batch (one Sync), then COMMIT.
	rig.clear(t)
	conn := rig.connect(t, pgx.QueryExecModeCacheStatement)
	cands := []string{"101", "102", "103", "104", "105", "106", "107", "108"}
	place := rig.expected(t, "org", cands)
	for _, k := range cands {
		pl := conn.PgConn().StartPipeline(ctx)
		pl.SendQueryParams("BEGIN", nil, nil, nil, nil)
		pl.SendQueryParams("INSERT INTO files (org_id, name) VALUES ($1, 'batch')", [][]byte{[]byte(k)}, nil, nil, nil)
		if err := pl.Sync(); err != nil {
			t.Fatal(err)
		}
		for {
			res, err := pl.GetResults()
			if err != nil {
				t.Fatalf("batch for key %s: %v", k, err)
			}
			if res == nil {
				break
			}
			if rr, ok := res.(*pgconn.ResultReader); ok {
				if _, err := rr.Close(); err != nil {
					t.Fatalf("batch for key %s: %v", k, err)
				}
			}
			if _, ok := res.(*pgconn.PipelineSync); ok {
				break
			}
		}
		if err := pl.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.PgConn().ExecParams(ctx, "COMMIT", nil, nil, nil, nil).Close(); err != nil {
			t.Fatalf("COMMIT after the batch for key %s: %v", k, err)
		}
	}
	got := rig.landed(t, "files", "org_id")
	for _, k := range cands {
		if dbs := got[k]; len(dbs) != 1 || dbs[0] != place[k] {
			t.Errorf("batched key %s on %v, want %s", k, dbs, place[k])
		}
	}
	waitNoIdleInTx(t)
}

// TestShardRouteBeginAfterRelease: a BEGIN that arrives while the pump is
// still handing back the server of the client's last transaction (it has
// flushed the COMMIT's ReadyForQuery, and the client answered at once) is
// held like any other, so the next transaction goes to the shard of its
// first statement. The pooler used to take such a BEGIN for a statement
// of the linked transaction: it went to the default database, which then
// held the transaction, and its first keyed statement was refused as one
// for another shard. The window is between the pump's flush and its
// release of the server; after an explicit transaction the pump
// goroutine relays the COMMIT's replies while serve reads the next
// message, and a few clients looping make the race near certain (before
// the fix, each run failed within its first rounds).
func TestShardRouteBeginAfterRelease(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 3*time.Minute)
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprint(i*104729 - 1000000)
	}
	want := rig.expected(t, "org", keys)
	var on [2][]int64
	for _, k := range keys {
		v, _ := strconv.ParseInt(k, 10, 64)
		if want[k] == "shrt_s0" {
			on[0] = append(on[0], v)
		} else {
			on[1] = append(on[1], v)
		}
	}
	const clients, rounds = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		conn := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				a, b := on[i%2][(c*rounds+i)%len(on[i%2])], on[1-i%2][(c*rounds+i)%len(on[1-i%2])]
				// A transaction on one shard, then at once one on the
				// other: the BEGIN comes right after the COMMIT's reply.
				for j, k := range []int64{a, b} {
					if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
						errs <- fmt.Errorf("client %d round %d/%d: BEGIN: %w", c, i, j, err)
						return
					}
					if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'release')", k); err != nil {
						_, _ = conn.Exec(ctx, "ROLLBACK")
						errs <- fmt.Errorf("client %d round %d/%d: the transaction's first statement: %w", c, i, j, err)
						return
					}
					if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
						errs <- fmt.Errorf("client %d round %d/%d: COMMIT: %w", c, i, j, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	var n int
	if err := rig.direct["shrt_main"].QueryRow(ctx, "SELECT count(*) FROM files").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows on the default database (%v)", n, err)
	}
	total := 0
	for _, db := range []string{"shrt_s0", "shrt_s1"} {
		if err := rig.direct[db].QueryRow(ctx, "SELECT count(*) FROM files").Scan(&n); err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != clients*rounds*2 {
		t.Fatalf("%d rows on the shards, want %d", total, clients*rounds*2)
	}
}

// TestShardRouteStandardConformingStringsOff: a client whose session has
// standard_conforming_strings = off writes quotes and backslashes in
// string literals as backslash escapes ('O\'Reilly', 'a\\b'), which
// Postgres then reads as such; the router must read them the same way.
// It used to read them as standard strings whatever the session said (the
// pooler never told the router), so 'a\\b' was hashed as a\\b and
// 'O\'Reilly' did not lex at all (the statement went to the default
// database as one naming no sharded table): rows on the wrong database.
func TestShardRouteStandardConformingStringsOff(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 2*time.Minute)
	keys := make([]string, 0, 300)
	for i := range 100 {
		keys = append(keys, fmt.Sprintf("O'Reilly-%d", i), fmt.Sprintf(`back\slash-%d`, i), fmt.Sprintf(`both\'-%d`, i))
	}
	for _, startup := range []bool{false, true} {
		name := "SET"
		if startup {
			name = "startup"
		}
		t.Run(name, func(t *testing.T) {
			rig.clear(t)
			cfg := pgxConfig(t, rig.p.ConnString("shrt", appUser, appPassword))
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			if startup {
				cfg.RuntimeParams["standard_conforming_strings"] = "off"
			}
			conn, err := tryConnectPgx(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !startup {
				if _, err := conn.Exec(ctx, "SET standard_conforming_strings = off"); err != nil {
					t.Fatal(err)
				}
			}
			for i, k := range keys {
				lit := "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(k) + "'"
				// The literal without arguments: pgx sends the text as it is.
				if _, err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO tenants (name, v) VALUES (%s, %d)", lit, i)); err != nil {
					t.Fatalf("insert %s: %v", lit, err)
				}
			}
			rig.checkPlacement(t, "tenant", "tenants", "name", keys)
		})
	}
}

// TestShardRouteQualifiedKeywordColumns: after a qualifier's dot any word
// is a column to Postgres (f.order, f.from), so such a statement routes by
// its key like any other rather than being read as ORDER BY or FROM and
// refused; each row is read and updated on the database that holds it.
func TestShardRouteQualifiedKeywordColumns(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 2*time.Minute)
	for name, conn := range rig.direct {
		if _, err := conn.Exec(ctx, `ALTER TABLE files ADD COLUMN "order" int, ADD COLUMN "from" text`); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	keys := make([]string, 120)
	for i := range keys {
		keys[i] = fmt.Sprint(r.Int64() - r.Int64())
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			rig.clear(t)
			conn := rig.connect(t, mode)
			for i, k := range keys {
				if _, err := conn.Exec(ctx, `INSERT INTO files (org_id, "order", "from", v) VALUES ($1, $2, 'x', 0)`, k, i); err != nil {
					t.Fatalf("insert %s: %v", k, err)
				}
			}
			rig.checkPlacement(t, "org", "files", "org_id", keys)
			for i, k := range keys {
				var order int
				var from string
				err := conn.QueryRow(ctx, `SELECT f.order, f.from FROM files f WHERE f.org_id = $1 AND f.order >= 0 ORDER BY f.order LIMIT 1`, k).Scan(&order, &from)
				if err != nil || order != i || from != "x" {
					t.Fatalf("key %s: %d %q %v, want %d \"x\"", k, order, from, err, i)
				}
				tag, err := conn.Exec(ctx, `UPDATE files AS f SET v = f.order + 1 WHERE f.org_id = $1 AND f.from = 'x'`, k)
				if err != nil || tag.RowsAffected() != 1 {
					t.Fatalf("update %s: %v %v", k, tag, err)
				}
			}
			// Every row was updated where it lies: v = order + 1 on each
			// database, read directly.
			total := 0
			for name, direct := range rig.direct {
				var n, bad int
				if err := direct.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE v <> "order" + 1) FROM files`).Scan(&n, &bad); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if bad != 0 {
					t.Errorf("%s: %d rows not updated", name, bad)
				}
				total += n
			}
			if total != len(keys) {
				t.Fatalf("%d rows in all, want %d", total, len(keys))
			}
		})
	}
}

// TestShardRoutePipelinedPrepare: a named statement parsed, described and
// bound in one batch (pgx's pipeline, psycopg's pipeline mode) whose text
// the prepared-statement mapping already knows. The mapping may answer
// such a Parse without a server; the Describe after it then linked the
// home pool's server (the default database) and the Bind, keyed for
// another shard, was refused as a statement for another shard in a
// transaction on the default database. The batch goes where its Bind's
// key does, rows and all, as Postgres' own placement says.
func TestShardRoutePipelinedPrepare(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, time.Minute)
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprint(i*7919 + 11)
	}
	want := rig.expected(t, "org", keys)
	const insert = "INSERT INTO files (org_id, name, v) VALUES ($1, 'piped', $2)"
	conn := rig.connect(t, pgx.QueryExecModeCacheStatement)
	// The text, prepared and run once the usual way: the mapping knows it.
	if _, err := conn.Exec(ctx, insert, keys[0], 0); err != nil {
		t.Fatal(err)
	}
	pc := conn.PgConn()
	for i, k := range keys[1:] {
		name := fmt.Sprintf("piped_%d", i)
		pl := pc.StartPipeline(ctx)
		pl.SendPrepare(name, insert, nil)
		pl.SendQueryPrepared(name, [][]byte{[]byte(k), []byte(fmt.Sprint(i + 1))}, nil, nil)
		if err := pl.Sync(); err != nil {
			t.Fatal(err)
		}
		for {
			res, err := pl.GetResults()
			if err != nil {
				t.Fatalf("key %s (on %s): %v (%s)", k, want[k], err, detailOf(err))
			}
			if rr, ok := res.(*pgconn.ResultReader); ok {
				if r := rr.Read(); r.Err != nil {
					t.Fatalf("key %s (on %s): %v (%s)", k, want[k], r.Err, detailOf(r.Err))
				}
			}
			if _, ok := res.(*pgconn.PipelineSync); ok {
				break
			}
		}
		if err := pl.Close(); err != nil {
			t.Fatal(err)
		}
	}
	landed := rig.landed(t, "files", "org_id")
	for _, k := range keys {
		if got := landed[k]; len(got) != 1 || got[0] != want[k] {
			t.Errorf("key %s: rows on %v, want one on %s", k, got, want[k])
		}
	}
}
