//go:build linux

package integration

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnroutableCorpusIsValidSQL gives the router's refusal corpus its
// ground truth: PostgreSQL itself runs every statement of
// shard/testdata/unroutable.sql against shard/testdata/schema.sql (each
// in a transaction rolled back; VACUUM alone, as it must be). The shard
// package's TestUnroutableCorpus then holds the scanner to refusing each
// one: so a refusal is never of SQL that Postgres would call a syntax
// error (42601), and never of SQL that is not valid at all.
func TestUnroutableCorpusIsValidSQL(t *testing.T) {
	needPG(t)
	const db = "shardcorpus"
	su := directSuperuser(t, "postgres")
	ctx := ctxT(t, 3*time.Minute)
	scratchDatabase(t, ctx, su, db, "")
	conn := directSuperuser(t, db)
	schema, err := os.ReadFile("../shard/testdata/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.PgConn().Exec(ctx, string(schema)).Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("../shard/testdata/unroutable.sql")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		sql := strings.TrimSpace(sc.Text())
		if sql == "" || strings.HasPrefix(sql, "--") {
			continue
		}
		n++
		text := "BEGIN; " + sql + "; ROLLBACK"
		if strings.HasPrefix(sql, "VACUUM") {
			text = sql
		}
		if _, err := conn.PgConn().Exec(ctx, text).ReadAll(); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				t.Errorf("%s: Postgres says %s: %s", sql, pe.Code, pe.Message)
			} else {
				t.Fatalf("%s: %v", sql, err)
			}
			if _, err := conn.PgConn().Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 500 {
		t.Fatalf("corpus has %d statements, want at least 500", n)
	}
}

// readUnroutableCorpus returns the statements of
// shard/testdata/unroutable.sql: one a line, "--" lines are comments.
func readUnroutableCorpus(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("../shard/testdata/unroutable.sql")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "--") {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// corpusShardFile is a cluster over the corpus's schema
// (shard/testdata/schema.sql): its three colocations, as the shard
// package's corpus test has them, and plans unsharded.
const corpusShardFile = `
[[cluster]]
name = "corp"
default_database = "corp_main"
logical_shards = 8

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id", comments = "org_id", orgs = "id" }
shards = [ { range = "0-3", database = "corp_s0" }, { range = "4-7", database = "corp_s1" } ]

[[cluster.colo]]
name = "doc"
key_type = "text"
tables = { docs = "slug" }
shards = [ { range = "0-3", database = "corp_s0" }, { range = "4-7", database = "corp_s1" } ]

[[cluster.colo]]
name = "sess"
key_type = "uuid"
tables = { sessions = "sid" }
shards = [ { range = "0-3", database = "corp_s0" }, { range = "4-7", database = "corp_s1" } ]
`

// corpusFingerprint is what a statement that ran would change in a
// database: every table's rows, the columns, the tables' comments and
// privileges.
func corpusFingerprint(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	var b strings.Builder
	for _, table := range []string{"orgs", "files", "comments", "docs", "sessions", "plans"} {
		var sum string
		if err := conn.QueryRow(ctx, "SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM "+table+" t").Scan(&sum); err != nil {
			t.Fatal(err)
		}
		b.WriteString(table + "=" + sum + ";")
	}
	var schema string
	if err := conn.QueryRow(ctx, `SELECT string_agg(format('%s.%s:%s', c.relname, a.attname, a.atttypid::regtype), ',' ORDER BY c.relname, a.attnum)
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	var meta string
	if err := conn.QueryRow(ctx, `SELECT string_agg(format('%s:%s:%s', relname, coalesce(obj_description(oid, 'pg_class'), ''), coalesce(relacl::text, '')), ',' ORDER BY relname)
		FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&meta); err != nil {
		t.Fatal(err)
	}
	return b.String() + schema + ";" + meta
}

// TestUnroutableCorpusThroughPooler sends every statement of
// shard/testdata/unroutable.sql (valid SQL, as
// TestUnroutableCorpusIsValidSQL proves) through the pooler to a cluster
// whose colocations name the corpus's tables: each is refused with
// SQLSTATE 0A000, a DETAIL naming the table and a HINT, never 42601,
// whether it comes as a simple Query, as an unnamed Parse/Bind/Execute or
// as a named Parse/Describe (a prepare), and the connection answers a
// keyed query right after each. Inside a transaction already on a shard
// (simple protocol) the pinned server raises the same refusal, and
// ROLLBACK ends the transaction. Nothing of any of them runs: each
// database's rows, columns, comments and privileges are as before.
func TestUnroutableCorpusThroughPooler(t *testing.T) {
	main := needPG(t)
	ctx := ctxT(t, 5*time.Minute)
	su := directSuperuser(t, "postgres")
	schema, err := os.ReadFile("../shard/testdata/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	dbs := []string{"corp_main", "corp_s0", "corp_s1"}
	direct := map[string]*pgx.Conn{}
	for _, db := range dbs {
		scratchDatabase(t, ctx, su, db, appUser)
		conn := connectPgx(t, main.directConnString(db, appUser, appPassword))
		if err := conn.PgConn().Exec(ctx, string(schema)).Close(); err != nil {
			t.Fatalf("%s: %v", db, err)
		}
		// Rows for the statements to find (and a mistaken one to change).
		if err := conn.PgConn().Exec(ctx, `
			INSERT INTO orgs SELECT g, 'org' || g FROM generate_series(-10, 50) g;
			INSERT INTO files SELECT g % 7, g, 'f' || g, g, now(), g % 2 = 0, 'pdf', 1, g FROM generate_series(1, 100) g;
			INSERT INTO comments SELECT g % 7, g, g, 'c' || g, g FROM generate_series(1, 100) g;
			INSERT INTO docs SELECT 'd' || g, 'b', g FROM generate_series(1, 50) g;
			INSERT INTO docs VALUES ('z', 'zz', 1);
			INSERT INTO sessions SELECT gen_random_uuid(), g FROM generate_series(1, 50) g;
			INSERT INTO plans SELECT g, 'p' || g FROM generate_series(1, 10) g`).Close(); err != nil {
			t.Fatalf("%s: %v", db, err)
		}
		direct[db] = conn
	}
	before := map[string]string{}
	for db, conn := range direct {
		before[db] = corpusFingerprint(t, conn)
	}

	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "shards.toml")
	if err := os.WriteFile(path, []byte(corpusShardFile), 0o644); err != nil {
		t.Fatal(err)
	}
	var extra strings.Builder
	extra.WriteString("[databases]\n")
	for _, db := range dbs {
		fmt.Fprintf(&extra, "%s = host=127.0.0.1 port=%d dbname=%s\n", db, main.port, db)
	}
	p := startPooler(t, iniSettings(map[string]string{"shard_file": path}, extra.String()), testUserlist)

	stmts := readUnroutableCorpus(t)
	if len(stmts) < 500 {
		t.Fatalf("corpus has %d statements, want at least 500", len(stmts))
	}
	cfg := pgxConfig(t, p.ConnString("corp", appUser, appPassword))
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The keyed query that must work after each refusal: rows of org 3 on
	// its shard (as seeded on every database).
	probe := func(what, sql string) {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = 3").Scan(&n); err != nil || n != 14 {
			t.Fatalf("%s %q: the connection after it: %d rows, %v", what, sql, n, err)
		}
	}
	check := func(what, sql string, err error) bool {
		t.Helper()
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "0A000" || !strings.HasPrefix(pe.Detail, "table ") || pe.Hint == "" {
			code := ""
			if pe != nil {
				code = pe.Code
			}
			t.Errorf("%s %q: got %v (SQLSTATE %q, DETAIL %q, HINT %q), want 0A000 with a DETAIL naming the table and a HINT", what, sql, err, code, detailOf(err), hintOf(err))
			return false
		}
		return true
	}
	start := time.Now()
	refused := map[string]int{}
	for _, sql := range stmts {
		// A simple Query.
		_, err := conn.Exec(ctx, sql)
		if check("simple", sql, err) {
			refused["simple"]++
		}
		probe("simple", sql)
		// An unnamed Parse, Bind, Describe, Execute, Sync.
		_, err = conn.PgConn().ExecParams(ctx, sql, nil, nil, nil, nil).Close()
		if check("extended", sql, err) {
			refused["extended"]++
		}
		probe("extended", sql)
		// A named Parse, Describe, Sync: a driver preparing it.
		_, err = conn.PgConn().Prepare(ctx, "corpus_stmt", sql, nil)
		if check("prepare", sql, err) {
			refused["prepare"]++
		}
		probe("prepare", sql)
		// In a transaction already on a shard: refused there, and
		// ROLLBACK ends the transaction.
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = 3").Scan(&n); err != nil || n != 14 {
			t.Fatalf("keyed query in the transaction: %d, %v", n, err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO plans VALUES (-1, 'x')"); err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, sql)
		if check("in a transaction", sql, err) {
			refused["in a transaction"]++
		}
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatalf("ROLLBACK after %q: %v", sql, err)
		}
		probe("in a transaction", sql)
		// The same on the extended protocol: the pinned server fails
		// the Bind's stand-in, the client gets the refusal.
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM files WHERE org_id = 3").Scan(&n); err != nil || n != 14 {
			t.Fatalf("keyed query in the transaction: %d, %v", n, err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO plans VALUES (-1, 'x')"); err != nil {
			t.Fatal(err)
		}
		_, err = conn.PgConn().ExecParams(ctx, sql, nil, nil, nil, nil).Close()
		if check("extended in a transaction", sql, err) {
			refused["extended in a transaction"]++
		}
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatalf("ROLLBACK after %q: %v", sql, err)
		}
		probe("extended in a transaction", sql)
	}
	t.Logf("%d statements, refused with 0A000, DETAIL and HINT: %v, in %v", len(stmts), refused, time.Since(start).Round(time.Millisecond))
	for db, conn := range direct {
		if after := corpusFingerprint(t, conn); after != before[db] {
			t.Errorf("%s changed:\nbefore %s\nafter  %s", db, before[db], after)
		}
	}
	waitNoIdleInTx(t)
}

func hintOf(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Hint
	}
	return ""
}
