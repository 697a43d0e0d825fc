//go:build linux

package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestDeallocateInAbortedTransaction: a client's SQL DEALLOCATE of a
// protocol-level statement (PHP's PDO sends one when a statement object is
// destroyed, often after a catch-and-rollback) gets Postgres's own answer
// in every transaction state, keeps the statement when Postgres would, and
// leaves nothing behind on the server that would break its next user. One
// server, so every client below shares it.
func TestDeallocateInAbortedTransaction(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 30*time.Second)

	a := connectPgconn(t, p.App())
	if _, err := a.Prepare(ctx, "s1", "SELECT $1::int + 1", nil); err != nil {
		t.Fatal(err)
	}
	exec := func(c *pgconn.PgConn, sql string) ([]*pgconn.Result, error) {
		t.Helper()
		return c.Exec(ctx, sql).ReadAll()
	}
	mustExec := func(c *pgconn.PgConn, sql string) []*pgconn.Result {
		t.Helper()
		res, err := exec(c, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return res
	}
	wantCode := func(err error, code string) {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != code {
			t.Fatalf("got %v, want SQLSTATE %s", err, code)
		}
	}

	// Twice: the first round would leave a statement on the server that
	// breaks the second.
	for round := 0; round < 2; round++ {
		mustExec(a, "BEGIN")
		_, err := exec(a, "SELECT 1/0")
		wantCode(err, "22012")
		_, err = exec(a, "DEALLOCATE s1")
		wantCode(err, "25P02") // Postgres: commands ignored until end of transaction block
		mustExec(a, "ROLLBACK")
		// Postgres kept s1 through the failed DEALLOCATE, so does the pooler.
		if got := execPrepared(t, ctx, a, "s1", "41"); got != "42" {
			t.Fatalf("round %d: s1 after failed DEALLOCATE = %q, want 42", round, got)
		}
		// Another client between, on the same server.
		b := connectPgconn(t, p.App())
		if got := mustExec(b, "SELECT 7"); len(got) != 1 || string(got[0].Rows[0][0]) != "7" {
			t.Fatalf("other client: %v", got)
		}
		b.Close(ctx)
		if round == 0 {
			if _, err := a.Prepare(ctx, "s2", "SELECT $1::int + 2", nil); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Outside a transaction and inside one, DEALLOCATE succeeds with its
	// own tag, and the name is gone afterwards, as in Postgres.
	res := mustExec(a, "DEALLOCATE s1")
	if len(res) != 1 || res[0].CommandTag.String() != "DEALLOCATE" {
		t.Fatalf("DEALLOCATE s1: %+v", res)
	}
	_, err := exec(a, "DEALLOCATE s1")
	wantCode(err, "26000") // Postgres's "prepared statement does not exist"
	mustExec(a, "BEGIN")
	res = mustExec(a, "DEALLOCATE PREPARE s2")
	if len(res) != 1 || res[0].CommandTag.String() != "DEALLOCATE" {
		t.Fatalf("DEALLOCATE PREPARE s2 in a block: %+v", res)
	}
	mustExec(a, "COMMIT")
	rr := a.ExecPrepared(ctx, "s2", [][]byte{[]byte("1")}, nil, nil).Read()
	// PgBouncer's "prepared statement did not exist" for a Bind of a name
	// the client does not hold (issue 18).
	wantCode(rr.Err, "08P01")

	// The server holds only the pooler's shared statements: nothing the
	// rewrite injected was left behind.
	c := connectPgconn(t, p.App())
	defer c.Close(ctx)
	for _, r := range mustExec(c, "SELECT name FROM pg_prepared_statements WHERE name NOT LIKE 'PGTS\\_%'") {
		if len(r.Rows) != 0 {
			t.Fatalf("left on the server: %q", r.Rows)
		}
	}
	a.Close(ctx)
}

func connectPgconn(t testing.TB, connstr string) *pgconn.PgConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, connstr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func execPrepared(t testing.TB, ctx context.Context, c *pgconn.PgConn, name string, arg string) string {
	t.Helper()
	rr := c.ExecPrepared(ctx, name, [][]byte{[]byte(arg)}, nil, nil).Read()
	if rr.Err != nil {
		t.Fatalf("ExecPrepared %s: %v", name, rr.Err)
	}
	if len(rr.Rows) != 1 {
		t.Fatalf("ExecPrepared %s: %d rows", name, len(rr.Rows))
	}
	return string(rr.Rows[0][0])
}

// TestPreparedNamesAfterDiscardAndDeallocateAll: after a client's DISCARD
// ALL or DEALLOCATE ALL its old statement names are gone, as in Postgres:
// a Bind of one gets 26000 (prepared statement does not exist), not
// PgBouncer's 08P01 for a name never prepared, and nothing runs.
func TestPreparedNamesAfterDiscardAndDeallocateAll(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 60*time.Second)

	for _, reset := range []string{"DISCARD ALL", "DEALLOCATE ALL", "DEALLOCATE PREPARE ALL"} {
		t.Run(reset, func(t *testing.T) {
			a := connectPgconn(t, p.App())
			if _, err := a.Prepare(ctx, "old", "SELECT $1::int + 1", nil); err != nil {
				t.Fatal(err)
			}
			if got := execPrepared(t, ctx, a, "old", "41"); got != "42" {
				t.Fatalf("before %s: %q", reset, got)
			}
			if _, err := a.Exec(ctx, reset).ReadAll(); err != nil {
				t.Fatalf("%s: %v", reset, err)
			}
			rr := a.ExecPrepared(ctx, "old", [][]byte{[]byte("1")}, nil, nil).Read()
			wantSQLState(t, "Bind of a name after "+reset, rr.Err, "26000")
			if len(rr.Rows) != 0 {
				t.Fatalf("after %s the old name ran: %q", reset, rr.Rows)
			}
			// Another client on the same server keeps its own statement.
			b := connectPgconn(t, p.App())
			if _, err := b.Prepare(ctx, "theirs", "SELECT $1::int + 1", nil); err != nil {
				t.Fatal(err)
			}
			if got := execPrepared(t, ctx, b, "theirs", "1"); got != "2" {
				t.Fatalf("other client: %q", got)
			}
			// The name can be prepared again and runs.
			if _, err := a.Prepare(ctx, "old", "SELECT $1::int + 2", nil); err != nil {
				t.Fatal(err)
			}
			if got := execPrepared(t, ctx, a, "old", "40"); got != "42" {
				t.Fatalf("prepared again after %s: %q", reset, got)
			}
		})
	}
}

func wantSQLState(t *testing.T, what string, err error, code string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("%s: got %v, want SQLSTATE %s", what, err, code)
	}
}
