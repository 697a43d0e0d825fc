//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Shape epochs (issue 32, item 5). Every client's name for one text maps
// to one server statement, so once client X's use prepares it again after
// a migration, client Y — which still has the old description and runs
// Bind, Execute without a Describe (pgx's statement cache) — would get rows
// of the new shape and decode them with the old one. Directly, Y's own
// statement would fail with 0A000 until Y prepares it again; through the
// pooler it must fail the same way, never give Y the new rows. The
// migration drops a bigint column and adds a double precision one under
// the same name: eight bytes either way, so the old description would
// decode the new values without complaint, and wrongly.

const epochSelect = "SELECT * FROM %s WHERE a >= $1 ORDER BY a"

// epochTable makes a fresh table (a int, b bigint) of two rows.
func epochTable(t *testing.T, ctx context.Context, table string) {
	t.Helper()
	alterDirectly(t, ctx, fmt.Sprintf("DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (a int, b bigint); INSERT INTO %[1]s VALUES (1, 10), (2, 20); GRANT ALL ON %[1]s TO %[2]s", table, appUser))
	dropAtEnd(t, table)
}

// epochMigrate gives b another type under the same name.
func epochMigrate(t *testing.T, ctx context.Context, table string) {
	t.Helper()
	alterDirectly(t, ctx, fmt.Sprintf("ALTER TABLE %[1]s DROP COLUMN b; ALTER TABLE %[1]s ADD COLUMN b double precision DEFAULT 1.5", table))
}

// epochClient connects with pgx's statement cache: the first query of a
// text prepares it (Parse, Describe), later ones run Bind, Execute, Sync
// with the cached description.
func epochClient(t *testing.T, p *Pooler) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(p.App())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	c, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// epochRows runs the table's select on c and returns its rows as "a b",
// decoded with the description pgx has.
func epochRows(ctx context.Context, c *pgx.Conn, table string) (string, error) {
	rows, err := c.Query(ctx, fmt.Sprintf(epochSelect, table), 0)
	if err != nil {
		return "", err
	}
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return "", err
		}
		out = append(out, fmt.Sprint(vals...))
	}
	return strings.Join(out, ","), rows.Err()
}

func wantEpochRows(t *testing.T, what string, got string, err error, want string) {
	t.Helper()
	if err != nil || got != want {
		t.Fatalf("%s: %q %v, want %q", what, got, err, want)
	}
}

func wantEpochStale(t *testing.T, what string, got string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: rows %q, want SQLSTATE 0A000", what, got)
	}
	wantSQLState(t, what, err, "0A000")
}

const (
	epochOld = "1 10,2 20"
	epochNew = "1 1.5,2 1.5"
)

// TestPreparedEpochOtherClient: one server. X meets the stale plan first
// (0A000 from Postgres, as directly) and its pgx prepares the text again;
// then Y, whose cached description is the old one, gets 0A000 too rather
// than the rows of the new shape, and its next query gets them rightly.
func TestPreparedEpochOtherClient(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 60*time.Second)
	const table = "mig_epoch1"
	epochTable(t, ctx, table)

	x, y := epochClient(t, p), epochClient(t, p)
	for i, c := range []*pgx.Conn{x, y, x, y} { // prepared, then cached
		got, err := epochRows(ctx, c, table)
		wantEpochRows(t, fmt.Sprintf("before the migration (%d)", i), got, err, epochOld)
	}

	epochMigrate(t, ctx, table)

	got, err := epochRows(ctx, x, table)
	wantEpochStale(t, "X first after the migration", got, err)
	got, err = epochRows(ctx, x, table)
	wantEpochRows(t, "X prepared again", got, err, epochNew)

	got, err = epochRows(ctx, y, table)
	wantEpochStale(t, "Y with the old description", got, err)
	got, err = epochRows(ctx, y, table)
	wantEpochRows(t, "Y prepared again", got, err, epochNew)
	got, err = epochRows(ctx, x, table)
	wantEpochRows(t, "X again", got, err, epochNew)
}

// TestPreparedEpochOtherServer: two servers, A and B, both with the
// statement prepared before the migration. X meets the stale plan on B and
// prepares the text again there; its next use lands on A, whose copy has
// the old plan: the pooler prepares it again there first, so X gets its
// rows and no second 0A000. Y, with the old description, then gets 0A000 on
// A, and its next query the new rows.
func TestPreparedEpochOtherServer(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "2"}, ""), testUserlist)
	ctx := ctxT(t, 60*time.Second)
	const table = "mig_epoch2"
	epochTable(t, ctx, table)

	x, y := epochClient(t, p), epochClient(t, p)
	// Both servers prepare the statement: X and Y each hold one in a block.
	for _, c := range []*pgx.Conn{x, y} {
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []*pgx.Conn{x, y, x, y} {
		got, err := epochRows(ctx, c, table)
		wantEpochRows(t, fmt.Sprintf("before the migration (%d)", i), got, err, epochOld)
	}
	pidX, pidY := queryInt(t, x, "SELECT pg_backend_pid()"), queryInt(t, y, "SELECT pg_backend_pid()")
	if pidX == pidY {
		t.Fatalf("X and Y share server %d in their blocks", pidX)
	}
	for _, c := range []*pgx.Conn{x, y} {
		if _, err := c.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
	}

	epochMigrate(t, ctx, table)

	// hold links a client to one server in a block; the other is free.
	hold := func() (*pgx.Conn, int64) {
		h := connectPgx(t, p.App())
		if _, err := h.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		return h, queryInt(t, h, "SELECT pg_backend_pid()")
	}
	h1, serverA := hold()
	got, err := epochRows(ctx, x, table) // on B
	wantEpochStale(t, "X first after the migration", got, err)
	got, err = epochRows(ctx, x, table) // on B, prepared again
	wantEpochRows(t, "X prepared again", got, err, epochNew)
	h2, serverB := hold()
	if serverA == serverB {
		t.Fatalf("both holders on server %d", serverA)
	}
	if _, err := h1.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	got, err = epochRows(ctx, x, table) // on A, whose copy has the old plan
	wantEpochRows(t, "X on the other server", got, err, epochNew)
	got, err = epochRows(ctx, y, table) // on A
	wantEpochStale(t, "Y with the old description", got, err)
	got, err = epochRows(ctx, y, table)
	wantEpochRows(t, "Y prepared again", got, err, epochNew)
	if _, err := h2.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*pgx.Conn{x, y, x, y} {
		got, err = epochRows(ctx, c, table)
		wantEpochRows(t, "after", got, err, epochNew)
	}
}
