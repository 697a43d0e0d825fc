//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pinned transactions (issue 34's "Done when"): many transactions with
// random keys on several connections at once, each statement of each
// transaction keyed on the database of its first one (keys of all three
// colos, keyless statements, reads of its own writes, savepoints), and
// some ending in ROLLBACK or in a refused reach for the other database.
// The ground truth is Postgres': every row records the transaction that
// wrote it (a column defaulting to pg_current_xact_id()), so "every
// statement of a transaction ran in one transaction on one database" is
// read on each database directly, as is where Postgres places each key
// (rig.expected) and that nothing of a rolled back transaction is left.

// pinKey is a key and its colo.
type pinKey struct{ colo, key string }

// pinInsert is the insert of k tagged with transaction n, and its
// argument for a connection in mode.
func pinInsert(k pinKey, n int, mode pgx.QueryExecMode) (string, []any) {
	switch k.colo {
	case "org":
		v, _ := strconv.ParseInt(k.key, 10, 64)
		return "INSERT INTO files (org_id, name, v) VALUES ($1, 'pin', $2)", []any{v, n}
	case "tenant":
		return "INSERT INTO tenants (name, v) VALUES ($1, $2)", []any{k.key, n}
	}
	if mode == pgx.QueryExecModeExec {
		return "INSERT INTO devices (id, v) VALUES ($1::uuid, $2)", []any{k.key, n}
	}
	return "INSERT INTO devices (id, v) VALUES ($1, $2)", []any{k.key, n}
}

// pinCount counts k's rows (its own transaction's included).
func pinCount(k pinKey, mode pgx.QueryExecMode) (string, []any) {
	switch k.colo {
	case "org":
		v, _ := strconv.ParseInt(k.key, 10, 64)
		return "SELECT count(*) FROM files WHERE org_id = $1", []any{v}
	case "tenant":
		return "SELECT count(*) FROM tenants WHERE name = $1", []any{k.key}
	}
	if mode == pgx.QueryExecModeExec {
		return "SELECT count(*) FROM devices WHERE id = $1::uuid", []any{k.key}
	}
	return "SELECT count(*) FROM devices WHERE id = $1", []any{k.key}
}

// pinTx is what the test expects of one transaction.
type pinTx struct {
	db        string   // where its first key is, by Postgres
	keys      []pinKey // committed with it (when committed)
	dropped   []pinKey // inserted, then undone by ROLLBACK TO SAVEPOINT
	plans     int      // keyless rows (table plans, no colo)
	committed bool
}

// pinRow is a row read directly: its database and transaction.
type pinRow struct{ db, xid string }

func TestShardRoutePinnedTransactions(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 5*time.Minute)
	// Each row records the transaction that wrote it.
	for name, dc := range rig.direct {
		for _, table := range []string{"files", "tenants", "devices", "plans"} {
			if _, err := dc.Exec(ctx, "ALTER TABLE "+table+" ADD COLUMN x xid8 DEFAULT pg_current_xact_id()"); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	r := rand.New(rand.NewPCG(34, 6))
	const perColo = 3000
	keys := map[string][]string{
		"org":    orgScaleKeys(r, perColo),
		"tenant": tenantScaleKeys(r, perColo),
		"dev":    devScaleKeys(r, perColo),
	}
	want := map[pinKey]string{}
	pool := map[string][]pinKey{} // by database, each key used once
	for colo, ks := range keys {
		placed := rig.expected(t, colo, ks)
		for _, k := range ks {
			pk := pinKey{colo, k}
			want[pk] = placed[k]
			pool[placed[k]] = append(pool[placed[k]], pk)
		}
	}
	for _, db := range []string{"shrt_s0", "shrt_s1"} {
		r.Shuffle(len(pool[db]), func(i, j int) { pool[db][i], pool[db][j] = pool[db][j], pool[db][i] })
	}
	var mu sync.Mutex
	take := func(db string) (pinKey, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(pool[db]) == 0 {
			return pinKey{}, false
		}
		k := pool[db][0]
		pool[db] = pool[db][1:]
		return k, true
	}
	other := map[string]string{"shrt_s0": "shrt_s1", "shrt_s1": "shrt_s0"}

	const workers, perWorker = 6, 120
	modes := []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec}
	txs := make([]pinTx, workers*perWorker)
	var refusedReach int
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		mode := modes[w%len(modes)]
		conn := rig.connect(t, mode)
		rw := rand.New(rand.NewPCG(uint64(w), 34))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				n := w*perWorker + i
				if err := runPinTx(ctx, conn, mode, rw, n, &txs[n], take, other, &mu, &refusedReach); err != nil {
					errs <- fmt.Errorf("worker %d (%v), transaction %d: %w", w, mode, n, err)
					return
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
		t.FailNow()
	}
	elapsed := time.Since(start)

	// What each database holds, read directly: rows by the v (files,
	// tenants, devices) or id (plans) that names their transaction.
	rows := map[int][]pinRow{}
	byKey := map[pinKey][]string{}
	for name, dc := range rig.direct {
		for _, q := range []struct{ colo, sql string }{
			{"org", "SELECT org_id::text, v, x::text FROM files"},
			{"tenant", "SELECT name, v, x::text FROM tenants"},
			{"dev", "SELECT id::text, v, x::text FROM devices"},
			{"", "SELECT '', id, x::text FROM plans"},
		} {
			rs, err := dc.Query(ctx, q.sql)
			if err != nil {
				t.Fatal(err)
			}
			for rs.Next() {
				var k, xid string
				var n int
				if err := rs.Scan(&k, &n, &xid); err != nil {
					t.Fatal(err)
				}
				rows[n] = append(rows[n], pinRow{name, xid})
				if q.colo != "" {
					byKey[pinKey{q.colo, k}] = append(byKey[pinKey{q.colo, k}], name)
				}
			}
			if err := rs.Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	committed, statements, bad := 0, 0, 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for n, tx := range txs {
		got := rows[n]
		if !tx.committed {
			if len(got) > 0 {
				report("transaction %d was not committed, yet %d of its rows are there: %v", n, len(got), got)
			}
			for _, k := range tx.keys {
				if len(byKey[k]) > 0 {
					report("transaction %d (not committed): key %v on %v", n, k, byKey[k])
				}
			}
			continue
		}
		committed++
		statements += len(tx.keys) + tx.plans
		if len(got) != len(tx.keys)+tx.plans {
			report("transaction %d: %d rows, want %d (%d keyed, %d keyless)", n, len(got), len(tx.keys)+tx.plans, len(tx.keys), tx.plans)
		}
		for _, row := range got {
			if row != got[0] || row.db != tx.db {
				report("transaction %d (on %s by its first key): rows in several transactions or databases: %v", n, tx.db, got)
				break
			}
		}
		for _, k := range tx.keys {
			if dbs := byKey[k]; len(dbs) != 1 || dbs[0] != want[k] {
				report("transaction %d: key %v on %v, Postgres places it on %s", n, k, dbs, want[k])
			}
		}
		for _, k := range tx.dropped {
			if len(byKey[k]) > 0 {
				report("transaction %d: key %v rolled back to a savepoint, yet on %v", n, k, byKey[k])
			}
		}
	}
	t.Logf("%d transactions (%d committed, %d rows in them; %d reached for the other shard and were refused) on %d connections in %v; %d wrong",
		len(txs), committed, statements, refusedReach, workers, elapsed.Round(time.Millisecond), bad)
	if committed < len(txs)/2 {
		t.Errorf("only %d transactions committed", committed)
	}
	rig.waitNoIdleInTxBoth(t)

	// A client idle after BEGIN holds no server: the BEGIN waits in the
	// pooler for the transaction's first statement.
	conn := rig.connect(t, pgx.QueryExecModeSimpleProtocol)
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	rig.waitNoIdleInTxBoth(t)
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}

// runPinTx runs transaction n on conn and records what it expects in tx.
func runPinTx(ctx context.Context, conn *pgx.Conn, mode pgx.QueryExecMode, r *rand.Rand, n int, tx *pinTx,
	take func(string) (pinKey, bool), other map[string]string, mu *sync.Mutex, refusedReach *int) error {
	db := []string{"shrt_s0", "shrt_s1"}[r.IntN(2)]
	tx.db = db
	first, ok := take(db)
	if !ok {
		return errors.New("out of keys")
	}
	ptx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	var stmts []string
	fail := func(what string, err error) error {
		_ = ptx.Rollback(ctx)
		return fmt.Errorf("%s: %w (statements: %q)", what, err, stmts)
	}
	insert := func(k pinKey) error {
		sql, args := pinInsert(k, n, mode)
		stmts = append(stmts, fmt.Sprint(sql, args))
		tag, err := ptx.Exec(ctx, sql, args...)
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("%s", tag)
		}
		return err
	}
	// The first statement: an insert, or a read of the key (none yet).
	if r.IntN(4) == 0 {
		sql, args := pinCount(first, mode)
		var c int
		if err := ptx.QueryRow(ctx, sql, args...).Scan(&c); err != nil || c != 0 {
			return fail(fmt.Sprintf("first read of %v: %d rows", first, c), err)
		}
	}
	if err := insert(first); err != nil {
		return fail(fmt.Sprintf("insert %v", first), err)
	}
	tx.keys = append(tx.keys, first)
	steps := 2 + r.IntN(6)
	for range steps {
		switch c := r.IntN(10); {
		case c < 5: // another key on the same database, of any colo
			k, ok := take(db)
			if !ok {
				return fail("", errors.New("out of keys"))
			}
			if err := insert(k); err != nil {
				return fail(fmt.Sprintf("insert %v", k), err)
			}
			tx.keys = append(tx.keys, k)
		case c < 7: // read one of its own writes
			k := tx.keys[r.IntN(len(tx.keys))]
			sql, args := pinCount(k, mode)
			stmts = append(stmts, fmt.Sprint(sql, args))
			var got int
			if err := ptx.QueryRow(ctx, sql, args...).Scan(&got); err != nil || got != 1 {
				return fail(fmt.Sprintf("read own write %v: %d rows", k, got), err)
			}
		case c < 8: // a statement that names no colo: the pinned shard
			stmts = append(stmts, "plans")
			if _, err := ptx.Exec(ctx, "INSERT INTO plans (id, name) VALUES ($1, 'pin')", n); err != nil {
				return fail("keyless insert", err)
			}
			tx.plans++
		case c < 9: // a savepoint, an insert undone by ROLLBACK TO
			k, ok := take(db)
			if !ok {
				return fail("", errors.New("out of keys"))
			}
			stmts = append(stmts, "savepoint")
			if _, err := ptx.Exec(ctx, "SAVEPOINT s"); err != nil {
				return fail("SAVEPOINT", err)
			}
			if err := insert(k); err != nil {
				return fail(fmt.Sprintf("insert %v after a savepoint", k), err)
			}
			stmts = append(stmts, "rollback to")
			if _, err := ptx.Exec(ctx, "ROLLBACK TO SAVEPOINT s"); err != nil {
				return fail("ROLLBACK TO SAVEPOINT", err)
			}
			tx.dropped = append(tx.dropped, k)
		default: // an update by key
			k := tx.keys[r.IntN(len(tx.keys))]
			if k.colo != "org" {
				continue
			}
			v, _ := strconv.ParseInt(k.key, 10, 64)
			stmts = append(stmts, "update")
			tag, err := ptx.Exec(ctx, "UPDATE files SET name = 'pin2' WHERE org_id = $1 AND v = $2", v, n)
			if err != nil || tag.RowsAffected() != 1 {
				return fail(fmt.Sprintf("update %v: %s", k, tag), err)
			}
		}
	}
	// On the simple protocol, now and then a statement for the other
	// database: refused by the pinned server (0A000), the transaction
	// fails on both sides, ROLLBACK ends it.
	if mode == pgx.QueryExecModeSimpleProtocol && r.IntN(8) == 0 {
		k, ok := take(other[db])
		if !ok {
			return fail("", errors.New("out of keys"))
		}
		err := insert(k)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "0A000" || pe.Detail == "" || pe.Hint == "" {
			return fail(fmt.Sprintf("insert %v for %s in a transaction on %s: got %v, want 0A000 with DETAIL and HINT", k, other[db], db, err), errors.New("not refused"))
		}
		tx.keys = append(tx.keys, k) // must not be anywhere
		if err := ptx.Rollback(ctx); err != nil {
			return fmt.Errorf("ROLLBACK after the refusal: %w", err)
		}
		mu.Lock()
		*refusedReach++
		mu.Unlock()
		return nil
	}
	if r.IntN(7) == 0 {
		stmts = append(stmts, "ROLLBACK")
		return ptx.Rollback(ctx)
	}
	stmts = append(stmts, "COMMIT")
	if err := ptx.Commit(ctx); err != nil {
		return err
	}
	tx.committed = true
	return nil
}

// waitNoIdleInTxBoth waits until no backend of the app user on either
// server is idle in a transaction.
func (rig *shardRig) waitNoIdleInTxBoth(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, db := range []string{"shrt_main", "shrt_s1"} {
			var k int
			if err := rig.direct[db].QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM pg_stat_activity WHERE usename = current_user AND state LIKE 'idle in transaction%'").Scan(&k); err != nil {
				t.Fatal(err)
			}
			n += k
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
