//go:build linux

package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Where a key comes from, besides the statement's own key (issue 34's
// "Build" 4 and 5, under the rig's ground truth): a leading hint, a
// trailing sqlcommenter comment, SET and SET LOCAL pgturnstile.shard_key,
// the startup options, on the simple and the extended protocol, each
// routing a statement that names no sharded table to the database
// Postgres places the key on; a hint that agrees with the statement's
// key, one that disagrees (refused); IN lists and multi-row INSERTs on one
// database (routed) and on two (refused, nothing written); NULL keys
// (where Postgres puts NULL); keys that do not decode for their type
// (Postgres' own error, the connection goes on); a shard target from a
// user who may not name one (refused). And the pool modes: statement
// mode routes each statement, session mode keeps the session on the
// database of its first statement.

// twoShards splits n bigint keys by the database Postgres places them on.
func (rig *shardRig) twoShards(t *testing.T, n int) (on map[string][]string, want map[string]string) {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint(i*7919 - 100000)
	}
	want = rig.expected(t, "org", keys)
	on = map[string][]string{}
	for _, k := range keys {
		on[want[k]] = append(on[want[k]], k)
	}
	if len(on["shrt_s0"]) < 10 || len(on["shrt_s1"]) < 10 {
		t.Fatalf("keys by database: %v", on)
	}
	return on, want
}

// plansOn reads where each plans row (by id) is, directly.
func (rig *shardRig) plansOn(t *testing.T) map[int][]string {
	t.Helper()
	got := map[int][]string{}
	for name, dc := range rig.direct {
		rows, err := dc.Query(ctxT(t, 30*time.Second), "SELECT id FROM plans")
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			got[int(id)] = append(got[int(id)], name)
		}
	}
	return got
}

func TestShardRouteKeySources(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 3*time.Minute)
	on, want := rig.twoShards(t, 60)
	simple := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	ext := rig.connect(t, pgx.QueryExecModeCacheStatement)

	// Explicit keys route statements that name no sharded table (plans)
	// to the key's database. Row id = 10*i + source.
	var sample []string
	for i := range 5 {
		sample = append(sample, on["shrt_s0"][i], on["shrt_s1"][i])
	}
	const sources = 6
	for i, k := range sample {
		id := func(src int) int { return 10*i + src }
		steps := []struct {
			what string
			run  func() error
		}{
			{"leading hint", func() error {
				_, err := simple.Exec(ctx, fmt.Sprintf("/* pgturnstile: shard_key=%s, colo=org */ INSERT INTO plans VALUES (%d, 'hint')", k, id(1)))
				return err
			}},
			{"trailing sqlcommenter comment", func() error {
				_, err := simple.Exec(ctx, fmt.Sprintf("INSERT INTO plans VALUES (%d, 'comment') /*colo='org',shard_key='%s'*/", id(2), k))
				return err
			}},
			{"SET pgturnstile.shard_key", func() error {
				for _, q := range []string{"SET pgturnstile.shard_key = '" + k + "'", "SET pgturnstile.colo = org",
					fmt.Sprintf("INSERT INTO plans VALUES (%d, 'set')", id(3)), "RESET pgturnstile.shard_key", "RESET pgturnstile.colo"} {
					if _, err := simple.Exec(ctx, q); err != nil {
						return fmt.Errorf("%s: %w", q, err)
					}
				}
				return nil
			}},
			{"SET LOCAL pgturnstile.shard_key", func() error {
				for _, q := range []string{"BEGIN", "SET LOCAL pgturnstile.shard_key = '" + k + "'", "SET LOCAL pgturnstile.colo = 'org'",
					fmt.Sprintf("INSERT INTO plans VALUES (%d, 'local')", id(4)), "COMMIT"} {
					if _, err := simple.Exec(ctx, q); err != nil {
						return fmt.Errorf("%s: %w", q, err)
					}
				}
				return nil
			}},
			{"hint on the extended protocol", func() error {
				_, err := ext.Exec(ctx, fmt.Sprintf("/* pgturnstile: shard_key=%s, colo=org */ INSERT INTO plans VALUES ($1, 'ext')", k), id(5))
				return err
			}},
			{"startup options", func() error {
				cfg := pgxConfig(t, rig.p.ConnString("shrt", appUser, appPassword))
				cfg.RuntimeParams["options"] = "-c pgturnstile.shard_key=" + k + " -c pgturnstile.colo=org"
				conn, err := tryConnectPgx(t, cfg)
				if err != nil {
					return err
				}
				defer conn.Close(ctx)
				_, err = conn.Exec(ctx, "INSERT INTO plans VALUES ($1, 'startup')", id(6))
				return err
			}},
		}
		if len(steps) != sources {
			t.Fatal("sources miscounted")
		}
		for _, s := range steps {
			if err := s.run(); err != nil {
				t.Fatalf("key %s, %s: %v", k, s.what, err)
			}
		}
	}
	got := rig.plansOn(t)
	for i, k := range sample {
		for src := 1; src <= sources; src++ {
			if dbs := got[10*i+src]; len(dbs) != 1 || dbs[0] != want[k] {
				t.Errorf("key %s, source %d: plans row on %v, Postgres places the key on %s", k, src, dbs, want[k])
			}
		}
	}
	if len(got) != len(sample)*sources {
		t.Errorf("%d plans rows, want %d", len(got), len(sample)*sources)
	}
	rig.clear(t)

	a0, b0, a1 := on["shrt_s0"][0], on["shrt_s0"][1], on["shrt_s1"][0]
	// A hint that agrees with the statement's key, and one that does not.
	if _, err := simple.Exec(ctx, "/* pgturnstile: shard_key="+b0+" */ INSERT INTO files (org_id, name) VALUES ("+a0+", 'agree')"); err != nil {
		t.Fatalf("agreeing hint: %v", err)
	}
	_, err := simple.Exec(ctx, "/* pgturnstile: shard_key="+a1+" */ INSERT INTO files (org_id, name) VALUES ("+a0+", 'disagree')")
	wantShardRefused(t, err, "")
	// IN lists and multi-row INSERTs: one database routes, two refuse.
	if _, err := simple.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+on["shrt_s1"][1]+", 'multi'), ("+on["shrt_s1"][2]+", 'multi')"); err != nil {
		t.Fatalf("multi-row INSERT on one database: %v", err)
	}
	if _, err := ext.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'multi'), ($2, 'multi')", on["shrt_s0"][2], on["shrt_s0"][3]); err != nil {
		t.Fatalf("multi-row INSERT on one database (extended): %v", err)
	}
	_, err = simple.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+on["shrt_s0"][4]+", 'split'), ("+on["shrt_s1"][4]+", 'split')")
	wantShardRefused(t, err, "")
	_, err = ext.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'split'), ($2, 'split')", on["shrt_s0"][4], on["shrt_s1"][4])
	wantShardRefused(t, err, "")
	var n int
	if err := ext.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id IN ($1, $2)", on["shrt_s1"][1], on["shrt_s1"][2]).Scan(&n); err != nil || n != 2 {
		t.Fatalf("IN on one database: %d rows, %v", n, err)
	}
	err = simple.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id IN ("+on["shrt_s0"][2]+", "+on["shrt_s1"][1]+")").Scan(&n)
	wantShardRefused(t, err, "")
	if tag, err := simple.Exec(ctx, "DELETE FROM files WHERE org_id IN ("+on["shrt_s0"][2]+", "+on["shrt_s0"][3]+")"); err != nil || tag.RowsAffected() != 2 {
		t.Fatalf("DELETE … IN on one database: %v, %v", tag, err)
	}
	// NULL keys go where Postgres puts NULL (the partition of hash 0).
	var part string
	if err := rig.truth.QueryRow(ctx, "INSERT INTO truth_org VALUES (NULL) RETURNING tableoid::regclass::text").Scan(&part); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.truth.Exec(ctx, "TRUNCATE truth_org"); err != nil {
		t.Fatal(err)
	}
	var r int
	fmt.Sscanf(part[strings.LastIndexByte(part, '_')+1:], "%d", &r)
	nullDB := rig.owner["org"][r]
	if _, err := simple.Exec(ctx, "INSERT INTO files (org_id, name) VALUES (NULL, 'null')"); err != nil {
		t.Fatal(err)
	}
	if _, err := ext.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'null')", nil); err != nil {
		t.Fatal(err)
	}
	// Keys Postgres cannot read for the type: its own error, and the
	// connection goes on.
	for _, c := range []struct {
		conn *pgx.Conn
		sql  string
		args []any
	}{
		{simple, "INSERT INTO files (org_id, name) VALUES ('abc', 'bad')", nil},
		{simple, "INSERT INTO devices (id, v) VALUES ('not-a-uuid', 1)", nil},
		{ext, "INSERT INTO files (org_id, name) VALUES ($1, 'bad')", []any{"abc"}},
		{ext, "INSERT INTO devices (id, v) VALUES ($1::uuid, 1)", []any{"not-a-uuid"}},
		{simple, "INSERT INTO files (org_id, name) VALUES (99999999999999999999, 'bad')", nil},
	} {
		_, err := c.conn.Exec(ctx, c.sql, c.args...)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "22P02" && pe.Code != "22003" {
			t.Fatalf("%s %v: got %v, want Postgres' invalid input error", c.sql, c.args, err)
		}
		if err := c.conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = "+a0).Scan(&n); err != nil || n != 1 {
			t.Fatalf("after %s: %d, %v", c.sql, n, err)
		}
	}
	// A shard target from a user who is no admin and not in target_users.
	_, err = simple.Exec(ctx, "/* pgturnstile: shard=shrt_s1 */ INSERT INTO plans VALUES (1, 'target')")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "0A000" {
		t.Fatalf("shard target by app: %v, want 0A000", err)
	}

	// What is where, read directly.
	wantRows := map[string]string{
		a0 + "/agree": "shrt_s0", on["shrt_s1"][1] + "/multi": "shrt_s1", on["shrt_s1"][2] + "/multi": "shrt_s1",
		"NULL/null": nullDB,
	}
	found := map[string][]string{}
	for name, dc := range rig.direct {
		rows, err := dc.Query(ctx, "SELECT coalesce(org_id::text, 'NULL') || '/' || name FROM files")
		if err != nil {
			t.Fatal(err)
		}
		ks, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			found[k] = append(found[k], name)
		}
	}
	for k, db := range wantRows {
		n := 1
		if k == "NULL/null" {
			n = 2
		}
		if dbs := found[k]; len(dbs) != n || dbs[0] != db || dbs[n-1] != db {
			t.Errorf("row %s on %v, want %d on %s", k, dbs, n, db)
		}
	}
	if len(found) != len(wantRows) {
		t.Errorf("rows: %v, want only %v", found, wantRows)
	}
	if got := rig.plansOn(t); len(got) != 0 {
		t.Errorf("plans rows of refused statements: %v", got)
	}
}

func TestShardRoutePoolModes(t *testing.T) {
	for _, mode := range []string{"statement", "session"} {
		t.Run(mode, func(t *testing.T) {
			rig := startShardRig(t, map[string]string{"pool_mode": mode})
			ctx := ctxT(t, 2*time.Minute)
			on, want := rig.twoShards(t, 200)
			var keys []string
			for i := range 40 {
				keys = append(keys, on["shrt_s0"][i%len(on["shrt_s0"])], on["shrt_s1"][i%len(on["shrt_s1"])])
			}
			keys = keys[:40]
			if mode == "statement" {
				// Each statement is a transaction of its own, routed by
				// its key, on either protocol.
				for _, qm := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement} {
					rig.clear(t)
					conn := rig.connect(t, qm)
					for _, k := range keys[:20] {
						if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'stmt')", k); err != nil {
							t.Fatalf("%v: %s: %v", qm, k, err)
						}
					}
					rig.checkPlacement(t, "org", "files", "org_id", keys[:20])
				}
				return
			}
			// Session mode: the session stays on the database of its
			// first statement that decides a shard; a statement for the
			// other is refused with 0A000 and the session goes on. What
			// comes before (a statement on no colo table, pgx's
			// Parse/Describe of a statement before its first Bind) runs
			// on the default database without pinning the session, and
			// the statement prepared there is prepared again on the
			// shard, ahead of the Bind that picks it.
			where := func(conn *pgx.Conn) (int, string) {
				var port int
				var db string
				if err := conn.QueryRow(ctx, "SELECT inet_server_port(), current_database()").Scan(&port, &db); err != nil {
					t.Fatal(err)
				}
				return port, db
			}
			for i, qm := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe, pgx.QueryExecModeExec} {
				rig.clear(t)
				conn := rig.connect(t, qm)
				// Before the pin: no colo table, so the default database.
				if p, db := where(conn); db != "shrt_main" {
					t.Fatalf("%v: before the first keyed statement the session ran on %s:%d, want shrt_main", qm, db, p)
				}
				ks := keys[i%2:] // sessions pinned to either shard
				first := ks[0]
				mine := 0
				for _, k := range ks {
					_, err := conn.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ($1, 'session')", k)
					if want[k] == want[first] {
						if err != nil {
							t.Fatalf("%v: %s (on the session's database %s): %v", qm, k, want[first], err)
						}
						mine++
						continue
					}
					wantShardRefused(t, err, "")
				}
				// A keyed read of the other shard is refused too; the
				// session goes on, on its shard (Postgres says where).
				other := ""
				for _, k := range ks {
					if want[k] != want[first] {
						other = k
					}
				}
				var n int
				err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = $1", other).Scan(&n)
				wantShardRefused(t, err, "")
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = $1", first).Scan(&n); err != nil || n != 1 {
					t.Fatalf("%v: read of the session's own key: %d rows, %v", qm, n, err)
				}
				gotPort, gotDB := where(conn)
				wantPort, wantDB := where(rig.direct[want[first]])
				if gotPort != wantPort || gotDB != wantDB {
					t.Errorf("%v: the pinned session runs on %s:%d, want %s:%d (%s)", qm, gotDB, gotPort, wantDB, wantPort, want[first])
				}
				got := rig.landed(t, "files", "org_id")
				if len(got) != mine {
					t.Fatalf("%v: %d keys landed, want %d", qm, len(got), mine)
				}
				for k, dbs := range got {
					if len(dbs) != 1 || dbs[0] != want[first] || want[k] != want[first] {
						t.Errorf("%v: key %s on %v", qm, k, dbs)
					}
				}
				conn.Close(ctx)
			}
		})
	}
}
