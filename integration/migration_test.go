//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Prepared statements after a migration (issue 32, item 5). After ALTER
// TABLE … ADD COLUMN, Postgres refuses a statement prepared before it
// whose result would change (0A000 cached plan must not change result
// type). Directly, a new connection or a driver that prepares the text
// again works; through a pooler that shares one server statement per text
// they used to fail for every client until the server was closed. One
// server (default_pool_size=1), so every client below shares it.

// migrationRows runs a prepared statement with pgconn's ExecPrepared
// (Bind, Describe portal, Execute, Sync) and returns its rows as strings
// joined by "|" and its column count.
func migrationRows(ctx context.Context, c *pgconn.PgConn, name string) (rows []string, cols int, err error) {
	rr := c.ExecPrepared(ctx, name, nil, nil, nil).Read()
	if rr.Err != nil {
		return nil, 0, rr.Err
	}
	for _, r := range rr.Rows {
		f := make([]string, len(r))
		for i, v := range r {
			f[i] = string(v)
		}
		rows = append(rows, strings.Join(f, "|"))
	}
	return rows, len(rr.FieldDescriptions), nil
}

func wantMigrationRows(t *testing.T, what string, rows []string, cols int, err error, wantCols int, want ...string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if cols != wantCols || strings.Join(rows, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: %d columns %q, want %d columns %q", what, cols, rows, wantCols, want)
	}
}

// migrationTable makes a fresh table of two rows owned by the app user.
func migrationTable(t *testing.T, ctx context.Context, c *pgconn.PgConn, table string) {
	t.Helper()
	sql := fmt.Sprintf("DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (a int); INSERT INTO %[1]s VALUES (1), (2)", table)
	if _, err := c.Exec(ctx, sql).ReadAll(); err != nil {
		t.Fatal(err)
	}
	dropAtEnd(t, table)
}

// dropAtEnd drops table, as the superuser, once the test is over.
func dropAtEnd(t *testing.T, table string) {
	t.Cleanup(func() {
		if c, err := pgconn.Connect(context.Background(), pg.superuserConnString(appDB)); err == nil {
			c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table).ReadAll()
			c.Close(context.Background())
		}
	})
}

// alterDirectly runs DDL straight on Postgres, as a migration tool would.
func alterDirectly(t *testing.T, ctx context.Context, sql string) {
	t.Helper()
	if _, err := directSuperuser(t, appDB).Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

// TestPreparedAfterAddColumn: the client that prepared the statement, and
// a new client preparing the same text, get the new column's rows. Both
// describe what they run in the same request (a Describe of the portal
// before its Execute; Parse and Describe of the statement), which the
// pooler may therefore send again, re-prepared, once.
func TestPreparedAfterAddColumn(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 60*time.Second)

	a := connectPgconn(t, p.App())
	migrationTable(t, ctx, a, "mig_add")
	const sel = "SELECT * FROM mig_add ORDER BY a"
	if _, err := a.Prepare(ctx, "s1", sel, nil); err != nil {
		t.Fatal(err)
	}
	rows, cols, err := migrationRows(ctx, a, "s1")
	wantMigrationRows(t, "before the migration", rows, cols, err, 1, "1", "2")

	alterDirectly(t, ctx, "ALTER TABLE mig_add ADD COLUMN b text DEFAULT 'new'")

	rows, cols, err = migrationRows(ctx, a, "s1")
	wantMigrationRows(t, "client A after ADD COLUMN", rows, cols, err, 2, "1|new", "2|new")
	rows, cols, err = migrationRows(ctx, a, "s1")
	wantMigrationRows(t, "client A again", rows, cols, err, 2, "1|new", "2|new")

	b := connectPgconn(t, p.App())
	sd, err := b.Prepare(ctx, "s1", sel, nil)
	if err != nil {
		t.Fatalf("client B prepares the same text: %v", err)
	}
	if len(sd.Fields) != 2 {
		t.Fatalf("client B's description: %d columns, want 2", len(sd.Fields))
	}
	rows, cols, err = migrationRows(ctx, b, "s1")
	wantMigrationRows(t, "client B", rows, cols, err, 2, "1|new", "2|new")

	// A second migration, met first by a new client's Prepare (Parse
	// answered by the pooler, Describe of the statement on the server).
	alterDirectly(t, ctx, "ALTER TABLE mig_add ADD COLUMN c int DEFAULT 3")
	c := connectPgconn(t, p.App())
	sd, err = c.Prepare(ctx, "mine", sel, nil)
	if err != nil {
		t.Fatalf("client C prepares after the second migration: %v", err)
	}
	if len(sd.Fields) != 3 {
		t.Fatalf("client C's description: %d columns, want 3", len(sd.Fields))
	}
	rows, cols, err = migrationRows(ctx, c, "mine")
	wantMigrationRows(t, "client C", rows, cols, err, 3, "1|new|3", "2|new|3")
	// A's description is of the first migration's shape, and C's
	// Describe made the pooler's statement of the second's: A gets 0A000,
	// as its own statement would directly, not rows it did not describe
	// (shape epochs), and heals as directly by preparing the text again.
	_, _, err = migrationRows(ctx, a, "s1")
	wantSQLState(t, "client A after the second migration", err, "0A000")
	migrationPrepareAgain(t, ctx, a, "s1", sel)
	rows, cols, err = migrationRows(ctx, a, "s1")
	wantMigrationRows(t, "client A prepared again", rows, cols, err, 3, "1|new|3", "2|new|3")
}

// migrationPrepareAgain closes the client's statement name and prepares
// the text again under it, as pgx's statement cache does after 0A000.
func migrationPrepareAgain(t *testing.T, ctx context.Context, c *pgconn.PgConn, name, sql string) {
	t.Helper()
	if err := c.Deallocate(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(ctx, name, sql, nil); err != nil {
		t.Fatalf("prepare %s again: %v", name, err)
	}
}

// TestPreparedAfterAddColumnWithoutDescribe: a client that executes with
// the description it already has (Bind, Execute, Sync: pgx's statement
// cache, pgjdbc) gets Postgres's 0A000 once, as it would directly — its
// description no longer fits the rows, so the pooler must not retry for it
// — and then heals as it would directly: pgx's cache prepares the text
// again under the same name, pgjdbc's recovery under a new one.
func TestPreparedAfterAddColumnWithoutDescribe(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 60*time.Second)

	a := connectPgconn(t, p.App())
	migrationTable(t, ctx, a, "mig_nodesc")
	// One text for pgx, one for the pgjdbc-like client: each meets the
	// stale statement first (see the report of issue 32 on a client whose
	// cached description goes stale after another client re-prepared).
	const sel = "SELECT * FROM mig_nodesc WHERE a >= $1 ORDER BY a"
	const jsel = "SELECT * FROM mig_nodesc WHERE a >= $1 ORDER BY a DESC"
	sd, err := a.Prepare(ctx, "S_1", jsel, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(p.App()) // default mode: pgx's statement cache
	if err != nil {
		t.Fatal(err)
	}
	px, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pgxRows := func() ([]string, error) {
		rows, err := px.Query(ctx, sel, 0)
		if err != nil {
			return nil, err
		}
		var out []string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, fmt.Sprint(vals...))
		}
		return out, rows.Err()
	}
	if got, err := pgxRows(); err != nil || strings.Join(got, ",") != "1,2" {
		t.Fatalf("pgx before the migration: %q %v", got, err)
	}

	alterDirectly(t, ctx, "ALTER TABLE mig_nodesc ADD COLUMN b int DEFAULT 7")

	// pgjdbc's way: Bind, Execute, Sync with the description it has.
	rr := a.ExecStatement(ctx, sd, [][]byte{[]byte("0")}, nil, nil).Read()
	wantSQLState(t, "Bind of the old statement without a Describe", rr.Err, "0A000")
	// Its recovery: the same text under a new name.
	if _, err := a.Prepare(ctx, "S_2", jsel, nil); err != nil {
		t.Fatalf("prepare under a new name: %v", err)
	}
	rr = a.ExecPrepared(ctx, "S_2", [][]byte{[]byte("0")}, nil, nil).Read()
	if rr.Err != nil || len(rr.FieldDescriptions) != 2 || len(rr.Rows) != 2 || string(rr.Rows[1][0]) != "1" || string(rr.Rows[1][1]) != "7" {
		t.Fatalf("S_2 after the migration: %d columns, %d rows, %v", len(rr.FieldDescriptions), len(rr.Rows), rr.Err)
	}

	// pgx: the first query fails as it does directly (its cached
	// description has one column), its cache drops the statement and the
	// next prepares it again.
	got0, err := pgxRows()
	if err == nil {
		t.Fatalf("pgx first query after the migration succeeded: %q", got0)
	}
	wantSQLState(t, "pgx's first query after the migration", err, "0A000")
	got, err := pgxRows()
	if err != nil || strings.Join(got, ",") != "1 7,2 7" {
		t.Fatalf("pgx after its cache healed: %q %v", got, err)
	}
	if _, err := px.Exec(ctx, "SELECT 1"); err != nil { // still usable
		t.Fatal(err)
	}
}

// TestPreparedAfterAddColumnInTransaction: in a transaction block the
// failing execution's error reaches the client as Postgres sends it (the
// block is aborted: nothing may be retried). After ROLLBACK the client's
// statement still has the old description, and fails as it would
// directly, until the client prepares the text again; then it runs (the
// server's statement was marked stale, and is prepared again).
func TestPreparedAfterAddColumnInTransaction(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 60*time.Second)

	a := connectPgconn(t, p.App())
	migrationTable(t, ctx, a, "mig_tx")
	if _, err := a.Prepare(ctx, "s1", "SELECT * FROM mig_tx ORDER BY a", nil); err != nil {
		t.Fatal(err)
	}
	rows, cols, err := migrationRows(ctx, a, "s1")
	wantMigrationRows(t, "before the migration", rows, cols, err, 1, "1", "2")

	alterDirectly(t, ctx, "ALTER TABLE mig_tx ADD COLUMN b int DEFAULT 5")

	if _, err := a.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	_, _, err = migrationRows(ctx, a, "s1")
	wantSQLState(t, "first execution in the block", err, "0A000")
	_, err = a.Exec(ctx, "SELECT 1").ReadAll()
	wantSQLState(t, "the aborted block", err, "25P02")
	if _, err := a.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		t.Fatal(err)
	}
	_, _, err = migrationRows(ctx, a, "s1")
	wantSQLState(t, "after ROLLBACK", err, "0A000")
	migrationPrepareAgain(t, ctx, a, "s1", "SELECT * FROM mig_tx ORDER BY a")
	rows, cols, err = migrationRows(ctx, a, "s1")
	wantMigrationRows(t, "after ROLLBACK, prepared again", rows, cols, err, 2, "1|5", "2|5")

	// Inside a block again, after the statement was prepared anew: it runs.
	if _, err := a.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	rows, cols, err = migrationRows(ctx, a, "s1")
	wantMigrationRows(t, "in a block after the re-prepare", rows, cols, err, 2, "1|5", "2|5")
	if _, err := a.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		t.Fatal(err)
	}
}
