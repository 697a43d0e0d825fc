//go:build linux

package integration

import (
	"fmt"
	"testing"
	"time"
)

// TestLibPQ is a lib/pq (database/sql) smoke test in transaction mode:
// simple queries, parameters, a transaction with commit and one with
// rollback, and several pooled connections at once.
func TestLibPQ(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "2"}, ""), testUserlist)
	// lib/pq's defaults: a parameterized query spans two Sync cycles
	// (Parse/Describe/Sync, then Bind/Execute/Sync).
	db := connectPq(t, p.App())
	db.SetMaxOpenConns(5)
	ctx := ctxT(t, 30*time.Second)

	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d %v", one, err)
	}
	var s string
	if err := db.QueryRowContext(ctx, "SELECT $1::text || '!'", "pq").Scan(&s); err != nil || s != "pq!" {
		t.Fatalf("param query: %q %v", s, err)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM smoke WHERE id IN (1, 2)"); err != nil {
		t.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO smoke VALUES (1, 'committed')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO smoke VALUES (2, 'rolled back')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM smoke WHERE id IN (1, 2)").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after commit+rollback: %d %v, want 1", n, err)
	}

	rows, err := db.QueryContext(ctx, "SELECT g FROM generate_series(1, 1000) g")
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for rows.Next() {
		var g int
		if err := rows.Scan(&g); err != nil {
			t.Fatal(err)
		}
		sum += g
	}
	if err := rows.Err(); err != nil || sum != 500500 {
		t.Fatalf("sum %d %v", sum, err)
	}
	rows.Close()

	// Five database/sql connections over two servers.
	errs := make(chan error, 5)
	for i := 0; i < 5; i++ {
		go func(i int) {
			var got int
			err := db.QueryRowContext(ctx, "SELECT $1::int FROM pg_sleep(0.2)", i).Scan(&got)
			if err == nil && got != i {
				err = fmt.Errorf("client %d got %d", i, got)
			}
			errs <- err
		}(i)
	}
	for i := 0; i < 5; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
