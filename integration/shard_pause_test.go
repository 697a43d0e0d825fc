//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PAUSE SHARD / RESUME SHARD on the router's cluster "shrt" (shard_route_test.go:
// org's logical shards 0-1 on shrt_s0, 2-3 on shrt_s1): a paused range's
// new transactions wait, keys outside it run, PAUSE SHARD waits for the
// range's running transaction, and the waiters of a range that a RELOAD
// moved while paused commit on its new database after RESUME SHARD.

// logicalOf is the logical shard of each org key, as Postgres places it.
func (rig *shardRig) logicalOf(t *testing.T, keys []string) map[string]int {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	rows, err := rig.truth.Query(ctx, "INSERT INTO truth_org SELECT unnest($1::text[])::bigint RETURNING k::text, tableoid::regclass::text", keys)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var k, part string
		if err := rows.Scan(&k, &part); err != nil {
			t.Fatal(err)
		}
		var r int
		fmt.Sscanf(part[strings.LastIndexByte(part, '_')+1:], "%d", &r)
		out[k] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rig.truth.Exec(ctx, "TRUNCATE truth_org"); err != nil {
		t.Fatal(err)
	}
	return out
}

// rowsNamed counts, directly on database db, the files rows named name.
func (rig *shardRig) rowsNamed(t *testing.T, db, name string) int {
	t.Helper()
	var n int
	if err := rig.direct[db].QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM files WHERE name = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitShardRow polls SHOW SHARDS until org's row for rng satisfies ok.
func waitShardRow(t *testing.T, admin *pgx.Conn, rng string, what string, ok func(map[string]string) bool) map[string]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows := show(t, admin, "SHOW SHARDS").where("cluster", "shrt", "colo", "org", "range", rng)
		if len(rows) == 1 && ok(rows[0]) {
			return rows[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("SHOW SHARDS: no org row %s %s: %v", rng, what, show(t, admin, "SHOW SHARDS").rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestShardPause(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 3*time.Minute)
	admin := adminConsole(t, rig.p)

	// A key in logical shard 2 (shrt_s1, the range paused) and one in 0
	// (shrt_s0, outside it).
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint(1000 + i)
	}
	logical := rig.logicalOf(t, keys)
	var in, out string
	for _, k := range keys {
		switch {
		case logical[k] == 2 && in == "":
			in = k
		case logical[k] == 0 && out == "":
			out = k
		}
	}
	if in == "" || out == "" {
		t.Fatalf("no keys in logical shards 2 and 0 among %v", logical)
	}

	// Console errors, in PgBouncer's console style (08P01).
	for _, tc := range []struct{ q, msg string }{
		{"PAUSE SHARD nosuch.org 0", "no such cluster: nosuch"},
		{"PAUSE SHARD shrt.nope 0", "no such colo: shrt.nope"},
		{"PAUSE SHARD shrt.org 3-1", "bad range 3-1: a range goes from the lower logical shard to the higher"},
		{"PAUSE SHARD shrt.org 2-4", "bad range 2-4: cluster shrt has logical shards 0-3"},
		{"PAUSE SHARD shrt 0", "PAUSE SHARD and RESUME SHARD take cluster.colo: shrt"},
		{"RESUME SHARD shrt.org 2-3", "range 2-3 of shrt.org is not paused"},
	} {
		adminExecErr(t, admin, tc.q, "08P01", tc.msg)
	}
	if got := waitShardRow(t, admin, "2-3", "running", func(r map[string]string) bool { return true }); got["state"] != "running" || got["waiting"] != "0" {
		t.Fatalf("before any pause: %v", got)
	}

	// PAUSE SHARD waits for the range's running transaction.
	inflight := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	if _, err := inflight.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := inflight.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+in+", 'inflight')"); err != nil {
		t.Fatal(err)
	}
	var committed atomic.Bool
	paused := make(chan error, 1)
	pauser := adminConsole(t, rig.p)
	go func() {
		_, err := pauser.Exec(context.Background(), "PAUSE SHARD shrt.org 2-3")
		if err == nil && !committed.Load() {
			err = fmt.Errorf("PAUSE SHARD returned while a transaction of the range ran")
		}
		paused <- err
	}()
	waitShardRow(t, admin, "2-3", "paused", func(r map[string]string) bool { return r["state"] == "paused" })
	select {
	case err := <-paused:
		t.Fatalf("PAUSE SHARD returned before the running transaction's COMMIT: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	committed.Store(true)
	if _, err := inflight.Exec(ctx, "COMMIT"); err != nil {
		t.Fatalf("the transaction running at PAUSE SHARD: %v", err)
	}
	select {
	case err := <-paused:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PAUSE SHARD did not return after the range's transaction committed")
	}
	if n := rig.rowsNamed(t, "shrt_s1", "inflight"); n != 1 {
		t.Fatalf("the transaction running at PAUSE SHARD: %d rows on shrt_s1", n)
	}
	adminExecErr(t, admin, "PAUSE SHARD shrt.org 3", "08P01", "range 3 of shrt.org overlaps paused range 2-3")

	// New transactions in the range wait (simple and extended protocol);
	// one outside it runs at once.
	type result struct {
		name string
		err  error
	}
	done := make(chan result, 2)
	for _, w := range []struct {
		name string
		mode pgx.QueryExecMode
	}{{"waiter-simple", pgx.QueryExecModeSimpleProtocol}, {"waiter-extended", pgx.QueryExecModeExec}} {
		conn := rig.connect(t, w.mode)
		go func() {
			_, err := conn.Exec(context.Background(), "INSERT INTO files (org_id, name) VALUES ($1, $2)", in, w.name)
			done <- result{w.name, err}
		}()
	}
	waitShardRow(t, admin, "2-3", "with 2 waiting", func(r map[string]string) bool { return r["state"] == "paused" && r["waiting"] == "2" })
	outside := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	if _, err := outside.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+out+", 'outside')"); err != nil {
		t.Fatalf("a key outside the paused range: %v", err)
	}
	if n := rig.rowsNamed(t, "shrt_s0", "outside"); n != 1 {
		t.Fatalf("a key outside the paused range: %d rows on shrt_s0", n)
	}
	if got := waitShardRow(t, admin, "0-1", "running", func(r map[string]string) bool { return true }); got["state"] != "running" || got["waiting"] != "0" {
		t.Fatalf("org 0-1 while 2-3 is paused: %v", got)
	}
	select {
	case r := <-done:
		t.Fatalf("%s ran while its range was paused: %v", r.name, r.err)
	default:
	}
	for _, db := range []string{"shrt_s0", "shrt_s1"} {
		for _, name := range []string{"waiter-simple", "waiter-extended"} {
			if n := rig.rowsNamed(t, db, name); n != 0 {
				t.Fatalf("%s ran on %s while its range was paused", name, db)
			}
		}
	}

	// The range moves to shrt_s0 while paused: the pause and its waiters
	// stay (SHOW SHARDS splits the new 0-3 row where the pause starts).
	rig.rewrite(t, func(s string) string {
		return strings.Replace(s, `{ range = "0-1", database = "shrt_s0" }, { range = "2-3", database = "shrt_s1" }`, `{ range = "0-3", database = "shrt_s0" }`, 1)
	})
	if got := waitShardRow(t, admin, "2-3", "paused after RELOAD", func(r map[string]string) bool { return true }); got["state"] != "paused" || got["waiting"] != "2" || got["database"] != "shrt_s0" {
		t.Fatalf("org 2-3 after RELOAD: %v", got)
	}
	if got := waitShardRow(t, admin, "0-1", "running after RELOAD", func(r map[string]string) bool { return true }); got["state"] != "running" || got["database"] != "shrt_s0" {
		t.Fatalf("org 0-1 after RELOAD: %v", got)
	}

	// A transaction that began outside the range may not enter it.
	tx := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	if _, err := tx.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+out+", 'tx-outside')"); err != nil {
		t.Fatal(err)
	}
	_, err := tx.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+in+", 'tx-entering')")
	if e := asPgError(t, err); e.Code != "0A000" {
		t.Fatalf("a transaction entering a paused range: %v", err)
	}
	if _, err := tx.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	// RESUME SHARD: the waiters commit on the range's new database.
	if tag := adminExec(t, admin, "RESUME SHARD shrt.org 2-3"); tag != "RESUME SHARD" {
		t.Fatalf("RESUME SHARD: tag %q", tag)
	}
	for range 2 {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("%s after RESUME SHARD: %v", r.name, r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter did not finish after RESUME SHARD")
		}
	}
	for _, name := range []string{"waiter-simple", "waiter-extended"} {
		if on0, on1 := rig.rowsNamed(t, "shrt_s0", name), rig.rowsNamed(t, "shrt_s1", name); on0 != 1 || on1 != 0 {
			t.Errorf("%s: %d rows on shrt_s0 (the range's new database), %d on shrt_s1, want 1 and 0", name, on0, on1)
		}
	}
	if got := waitShardRow(t, admin, "0-3", "running", func(r map[string]string) bool { return true }); got["state"] != "running" || got["waiting"] != "0" {
		t.Fatalf("after RESUME SHARD: %v", got)
	}

	// query_wait_timeout ends a wait for a paused range as it ends a wait
	// for a server.
	adminExec(t, admin, "SET query_wait_timeout = 1")
	if tag := adminExec(t, admin, "PAUSE SHARD shrt.org"); tag != "PAUSE SHARD" {
		t.Fatalf("PAUSE SHARD of the whole colo: tag %q", tag)
	}
	late := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	_, err = late.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+out+", 'late')")
	wantPgError(t, err, "FATAL", "08P01", "query_wait_timeout")
	adminExec(t, admin, "RESUME SHARD shrt.org")
	if n := rig.rowsNamed(t, "shrt_s0", "late") + rig.rowsNamed(t, "shrt_s1", "late"); n != 0 {
		t.Fatalf("a transaction that timed out waiting ran: %d rows", n)
	}
	selectOneShrt := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	if _, err := selectOneShrt.Exec(ctx, "INSERT INTO files (org_id, name) VALUES ("+out+", 'after')"); err != nil {
		t.Fatalf("after RESUME SHARD of the colo: %v", err)
	}
}
