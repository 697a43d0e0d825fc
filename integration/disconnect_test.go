//go:build linux

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestClientDropsMidTransaction: a client sends BEGIN; INSERT and then drops
// its socket without a Terminate message. The insert is never visible, and
// the next client on the (only) server starts outside any transaction.
func TestClientDropsMidTransaction(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{
		"default_pool_size":  "1",
		"query_wait_timeout": "5",
	}, ""), testUserlist)
	su := directSuperuser(t, appDB)

	for round := 0; round < 3; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pc, err := pgconn.Connect(ctx, p.App())
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		// One simple Query message holding both statements; the backend
		// answers ReadyForQuery 'T'.
		if _, err := pc.Exec(ctx, "BEGIN; INSERT INTO dropped_tx VALUES ('ghost')").ReadAll(); err != nil {
			cancel()
			t.Fatalf("BEGIN; INSERT: %v", err)
		}
		if st := pc.TxStatus(); st != 'T' {
			t.Fatalf("client transaction status after BEGIN; INSERT = %q, want 'T'", st)
		}
		var dirtyPID int64
		if r := pc.ExecParams(ctx, "SELECT pg_backend_pid()", nil, nil, nil, nil).Read(); r.Err != nil {
			t.Fatal(r.Err)
		} else {
			dirtyPID = parseInt(t, string(r.Rows[0][0]))
		}
		cancel()
		// Drop the TCP connection: no Terminate, no ROLLBACK.
		if err := pc.Conn().Close(); err != nil {
			t.Fatal(err)
		}

		// The next client gets the pool's only server.
		next := connectPgx(t, p.App())
		var n int64
		var pid int64
		if err := next.QueryRow(ctxT(t, 10*time.Second), "SELECT count(*), pg_backend_pid() FROM dropped_tx WHERE v = 'ghost'").Scan(&n, &pid); err != nil {
			t.Fatalf("round %d: next client: %v", round, err)
		}
		if n != 0 {
			t.Errorf("round %d: next client sees %d 'ghost' rows, want 0", round, n)
		}
		t.Logf("round %d: dropped client ran on pid %d, next client on pid %d", round, dirtyPID, pid)
		_, err = next.Exec(ctxT(t, 10*time.Second), "SAVEPOINT x")
		wantPgError(t, err, "ERROR", "25P01", "SAVEPOINT can only be used in transaction blocks")
		var txid *int64
		if err := next.QueryRow(ctxT(t, 10*time.Second), "SELECT txid_current_if_assigned()").Scan(&txid); err != nil || txid != nil {
			t.Errorf("round %d: txid_current_if_assigned() = %v, %v; want NULL (no transaction carried over)", round, txid, err)
		}
		_ = next.Close(context.Background())

		// Nobody sees the row, and no backend is left idle in transaction.
		if n := queryInt(t, su, "SELECT count(*) FROM dropped_tx"); n != 0 {
			t.Errorf("round %d: superuser sees %d rows in dropped_tx, want 0", round, n)
		}
		waitIdleInTx := time.Now().Add(5 * time.Second)
		for {
			n := queryInt(t, su, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND usename = $2 AND state LIKE 'idle in transaction%'`, appDB, appUser)
			if n == 0 {
				break
			}
			if time.Now().After(waitIdleInTx) {
				t.Errorf("round %d: %d backends idle in transaction 5 s after the client left", round, n)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	selectOne(t, p.App())
}
