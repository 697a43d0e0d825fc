//go:build linux

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/shard"
)

// TestRouterAgreesWithPartitionPruning holds the router's decisions to
// PostgreSQL's own: every table of the shard file is also a table
// PARTITION BY HASH on its key with MODULUS = logical_shards, and each
// routed statement is planned by Postgres (EXPLAIN, values bound as the
// router saw them): the partitions the plan keeps after pruning are the
// ones whose rows the statement can touch. The router's logical shard must
// be the only one, for every table the statement reads or writes; an
// INSERT's rows must land (tableoid) in that partition. A statement
// Postgres cannot prune to one partition must not be routed.
func TestRouterAgreesWithPartitionPruning(t *testing.T) {
	needPG(t)
	const db = "shardprune"
	const modulus = 8
	su := directSuperuser(t, "postgres")
	ctx := ctxT(t, 5*time.Minute)
	scratchDatabase(t, ctx, su, db, "")
	conn := directSuperuser(t, db)
	var ddl strings.Builder
	for _, tb := range []struct{ name, cols, key string }{
		{"orgs", "id bigint, name text", "id"},
		{"files", "org_id bigint, id bigint, name text, size int, deleted bool", "org_id"},
		{"comments", "org_id bigint, id bigint, file_id bigint, body text", "org_id"},
		{"docs", "slug text, body text", "slug"},
		{"sessions", "sid uuid, user_id bigint", "sid"},
	} {
		fmt.Fprintf(&ddl, "CREATE TABLE %s (%s) PARTITION BY HASH (%s);\n", tb.name, tb.cols, tb.key)
		for r := 0; r < modulus; r++ {
			fmt.Fprintf(&ddl, "CREATE TABLE %s_p%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d);\n", tb.name, r, tb.name, modulus, r)
		}
	}
	ddl.WriteString("CREATE TABLE plans (id int, name text);\n")
	if _, err := conn.Exec(ctx, ddl.String()); err != nil {
		t.Fatal(err)
	}
	// Plans with the values in them, so that pruning happens at plan time
	// for EXPLAIN EXECUTE too.
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_custom_plan"); err != nil {
		t.Fatal(err)
	}

	// The shard file: logical shard r on database db<r>.
	var file strings.Builder
	file.WriteString("[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\nlogical_shards = " + strconv.Itoa(modulus) + "\n")
	dbs := []string{"main"}
	shards := func() string {
		var parts []string
		for r := 0; r < modulus; r++ {
			parts = append(parts, fmt.Sprintf(`{ range = "%d", database = "db%d" }`, r, r))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}()
	for r := 0; r < modulus; r++ {
		dbs = append(dbs, "db"+strconv.Itoa(r))
	}
	file.WriteString("[[cluster.colo]]\nname = \"org\"\nkey_type = \"bigint\"\ntables = { orgs = \"id\", files = \"org_id\", comments = \"org_id\" }\nshards = " + shards + "\n")
	file.WriteString("[[cluster.colo]]\nname = \"doc\"\nkey_type = \"text\"\ntables = { docs = \"slug\" }\nshards = " + shards + "\n")
	file.WriteString("[[cluster.colo]]\nname = \"sess\"\nkey_type = \"uuid\"\ntables = { sessions = \"sid\" }\nshards = " + shards + "\n")
	m, err := shard.Parse([]byte(file.String()), "prune.toml", dbs)
	if err != nil {
		t.Fatal(err)
	}
	router := shard.NewRouter(m.Cluster("app"))

	r := rand.New(rand.NewPCG(34, 8))
	var ints []string
	for _, v := range []int64{0, 1, -1, 42, 1 << 40, -(1 << 62), 9223372036854775807, -9223372036854775808} {
		ints = append(ints, strconv.FormatInt(v, 10))
	}
	for len(ints) < 60 {
		ints = append(ints, strconv.FormatInt(r.Int64()>>uint(r.IntN(60)), 10))
	}
	texts := []string{"", "a", "it's", "héllo wörld", "日本語", strings.Repeat("x", 300), `back\slash`}
	for len(texts) < 40 {
		texts = append(texts, fmt.Sprintf("slug-%d", r.IntN(1_000_000)))
	}
	var uuids []string
	for len(uuids) < 30 {
		uuids = append(uuids, fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<16), r.IntN(1<<16), r.Int64()&(1<<48-1)))
	}
	sqlText := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

	type stmt struct {
		sql    string
		tables []string
	}
	var stmts []stmt
	for _, k := range ints {
		stmts = append(stmts,
			stmt{"SELECT * FROM files WHERE org_id = " + k, []string{"files"}},
			stmt{"SELECT name FROM files f WHERE f.deleted = false AND f.org_id = '" + k + "'::bigint ORDER BY name LIMIT 5", []string{"files"}},
			stmt{"SELECT * FROM files WHERE size > 3 AND org_id IN (" + k + ", " + k + ")", []string{"files"}},
			stmt{"SELECT * FROM files JOIN comments ON files.org_id = comments.org_id WHERE files.org_id = " + k, []string{"files", "comments"}},
			stmt{"SELECT * FROM files f JOIN comments c USING (org_id) WHERE org_id = " + k, []string{"files", "comments"}},
			stmt{"SELECT * FROM files f JOIN orgs o ON o.id = f.org_id WHERE o.id = " + k, []string{"files", "orgs"}},
			stmt{"UPDATE files SET size = size + 1 WHERE org_id = " + k + " AND id = 3", []string{"files"}},
			stmt{"DELETE FROM comments WHERE org_id = " + k, []string{"comments"}},
			stmt{"INSERT INTO files (org_id, id, name) VALUES (" + k + ", 1, 'a'), (" + k + ", 2, 'b') RETURNING tableoid::regclass", []string{"files"}},
			// pgjdbc's preferQueryMode=simple: parameters inlined as
			// parenthesised literals with their type's cast.
			stmt{"SELECT * FROM files WHERE org_id = ('" + k + "'::int8) AND deleted = ('f'::bool)", []string{"files"}},
			stmt{"SELECT * FROM files WHERE org_id IN (('" + k + "'::int8), ('" + k + "'::int8))", []string{"files"}},
			stmt{"UPDATE files SET name = ('x') WHERE org_id = ('" + k + "'::int8)", []string{"files"}},
			stmt{"INSERT INTO files (org_id, id, name) VALUES (('" + k + "'::int8), ('1'::int8), ('a')) RETURNING tableoid::regclass", []string{"files"}},
		)
		if v, err := strconv.ParseInt(k, 10, 32); err == nil {
			stmts = append(stmts, stmt{"DELETE FROM comments WHERE org_id = ('" + strconv.FormatInt(v, 10) + "'::int4)", []string{"comments"}})
		}
	}
	for _, s := range texts {
		q := sqlText(s)
		stmts = append(stmts,
			stmt{"SELECT * FROM docs WHERE slug = " + q, []string{"docs"}},
			stmt{"SELECT * FROM docs WHERE " + q + "::text = slug", []string{"docs"}},
			stmt{"UPDATE docs SET body = 'x' WHERE slug = " + q, []string{"docs"}},
			stmt{"INSERT INTO docs (slug, body) VALUES (" + q + ", 'b') RETURNING tableoid::regclass", []string{"docs"}},
			stmt{"SELECT * FROM docs WHERE slug = (" + q + ")", []string{"docs"}},
			stmt{"SELECT * FROM docs WHERE slug = (" + q + "::varchar)", []string{"docs"}},
			stmt{"INSERT INTO docs (slug, body) VALUES ((" + q + "), ('b')) RETURNING tableoid::regclass", []string{"docs"}},
		)
		if !strings.Contains(s, "$") {
			stmts = append(stmts, stmt{"SELECT * FROM docs WHERE slug = $q$" + s + "$q$", []string{"docs"}})
		}
		if !strings.ContainsAny(s, `\'`) {
			stmts = append(stmts, stmt{"SELECT * FROM docs WHERE slug = E'" + s + "'", []string{"docs"}})
		}
	}
	for _, u := range uuids {
		stmts = append(stmts,
			stmt{"SELECT * FROM sessions WHERE sid = '" + u + "'", []string{"sessions"}},
			stmt{"SELECT * FROM sessions WHERE sid = '" + strings.ToUpper(u) + "'::uuid", []string{"sessions"}},
			stmt{"DELETE FROM sessions WHERE sid = '{" + strings.ReplaceAll(u, "-", "") + "}'", []string{"sessions"}},
			stmt{"SELECT * FROM sessions WHERE sid = ('" + u + "'::uuid)", []string{"sessions"}},
		)
	}
	stmts = append(stmts, stmt{"SELECT * FROM files WHERE org_id = NULL", []string{"files"}})

	partRe := regexp.MustCompile(`\b(orgs|files|comments|docs|sessions)_p(\d+)\b`)
	checked := 0
	for _, st := range stmts {
		d := router.Route([]byte(st.sql), shard.Pin{}, false)
		if d.Source != shard.SourceLiteral || d.Colo == nil {
			t.Errorf("%s: not routed by its key: %v (%s)", st.sql, d.Source, d.Reason.Text())
			continue
		}
		want := int(d.Logical)
		if strings.HasPrefix(st.sql, "INSERT") {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := tx.Query(ctx, st.sql, pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				t.Fatalf("%s: %v", st.sql, err)
			}
			parts, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("%s: %v", st.sql, err)
			}
			_ = tx.Rollback(ctx)
			for _, p := range parts {
				if p != fmt.Sprintf("%s_p%d", st.tables[0], want) {
					t.Errorf("%s: the router chose logical shard %d; Postgres put the row in %s", st.sql, want, p)
				}
			}
			checked++
			continue
		}
		plan, err := explain(ctx, conn, st.sql)
		if err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
		got := map[string]map[int]bool{}
		for _, mm := range partRe.FindAllStringSubmatch(plan, -1) {
			n, _ := strconv.Atoi(mm[2])
			if got[mm[1]] == nil {
				got[mm[1]] = map[int]bool{}
			}
			got[mm[1]][n] = true
		}
		for _, tb := range st.tables {
			ps := got[tb]
			if len(ps) == 0 && strings.Contains(st.sql, "NULL") {
				continue // no partition: the plan knows no row matches
			}
			if len(ps) != 1 || !ps[want] {
				t.Errorf("%s: the router chose logical shard %d; Postgres's plan reads %s partitions %v\n%s", st.sql, want, tb, keys(ps), plan)
			}
		}
		checked++
	}
	if checked < 500 {
		t.Errorf("checked %d statements, want at least 500", checked)
	}

	// Parameters: the Parse is routed when its Bind comes; Postgres plans
	// EXECUTE with the same value.
	_, p := router.Prepare([]byte("SELECT * FROM files WHERE org_id = $1 AND deleted = false"), shard.Pin{}, false)
	if p == nil {
		t.Fatal("a Parse keyed by $1 is not pending")
	}
	if _, err := conn.Exec(ctx, "PREPARE byorg(bigint) AS SELECT * FROM files WHERE org_id = $1 AND deleted = false"); err != nil {
		t.Fatal(err)
	}
	for _, k := range ints {
		d, err := p.Bind(textParams{k})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := explain(ctx, conn, "EXECUTE byorg("+k+")")
		if err != nil {
			t.Fatal(err)
		}
		ps := partRe.FindAllStringSubmatch(plan, -1)
		if len(ps) != 1 || ps[0][2] != strconv.Itoa(int(d.Logical)) {
			t.Errorf("$1 = %s: the router chose logical shard %d; Postgres's plan reads %v", k, d.Logical, ps)
		}
	}
}

func explain(ctx context.Context, conn *pgx.Conn, sql string) (string, error) {
	rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) "+sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// textParams is a Bind's parameters in text format.
type textParams []string

func (p textParams) Param(i int) ([]byte, bool, bool, bool) {
	if i >= len(p) {
		return nil, false, false, false
	}
	return []byte(p[i]), false, false, true
}
