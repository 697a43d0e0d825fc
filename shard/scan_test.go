package shard

import (
	"fmt"
	"strings"
	"testing"
)

// testTables is a shard map's tables as the scanner sees them: two
// colocations, org (bigint) and doc (text), and a uuid one.
type testTables map[string]struct {
	colo int
	key  string
	typ  KeyType
}

func (tt testTables) Lookup(schema, name []byte) (int, string, KeyType, bool) {
	if len(schema) > 0 && string(schema) != "public" {
		return 0, "", 0, false
	}
	e, ok := tt[string(name)]
	return e.colo, e.key, e.typ, ok
}

var tables = testTables{
	"files":    {0, "org_id", KeyBigint},
	"comments": {0, "org_id", KeyBigint},
	"orgs":     {0, "id", KeyBigint},
	"docs":     {1, "slug", KeyText},
	"Mixed":    {1, "Slug", KeyText},
	"sessions": {2, "sid", KeyUUID},
}

// keysString writes keys as the tests expect them: $n, null, or the
// value, 'quoted' when it was a string.
func keysString(keys []Key) string {
	var parts []string
	for _, k := range keys {
		switch {
		case k.Param > 0:
			parts = append(parts, fmt.Sprintf("$%d", k.Param))
		case k.Null:
			parts = append(parts, "null")
		case k.Number:
			parts = append(parts, string(k.Value))
		default:
			parts = append(parts, "'"+string(k.Value)+"'")
		}
	}
	return strings.Join(parts, ",")
}

func TestScanRoutes(t *testing.T) {
	cases := []struct{ sql, keys string }{
		{`SELECT * FROM files WHERE org_id = 42`, `42`},
		{`select * from FILES where ORG_ID = 42;`, `42`},
		{`SELECT * FROM public.files WHERE org_id = -7`, `-7`},
		{`SELECT name FROM files f WHERE f.org_id = $1 AND f.deleted = false`, `$1`},
		{`SELECT name FROM files AS f WHERE deleted AND f.org_id = '42'::bigint ORDER BY name LIMIT 5`, `'42'`},
		{`SELECT * FROM files WHERE (a = 1 OR b = 2) AND org_id = 3`, `3`},
		{`SELECT * FROM files WHERE x BETWEEN 1 AND 5 AND org_id = 9`, `9`},
		{`SELECT * FROM files WHERE 9 = org_id`, `9`},
		{`SELECT * FROM files WHERE org_id IN (1, 2, $3)`, `1,2,$3`},
		{`SELECT * FROM files WHERE org_id = NULL`, `null`},
		{`SELECT * FROM files WHERE org_id = $1::int8 FOR UPDATE`, `$1`},
		{`SELECT * FROM files WHERE files.org_id = 5`, `5`},
		{`SELECT * FROM files WHERE public.files.org_id = 5`, `5`},
		{`SELECT count(*) FROM files WHERE org_id = 5 GROUP BY kind HAVING count(*) > 1`, `5`},
		{`SELECT extract(year FROM created) FROM files WHERE org_id = 5`, `5`},
		{`SELECT * FROM files JOIN comments ON files.org_id = comments.org_id WHERE files.org_id = 5`, `5`},
		{`SELECT * FROM files f LEFT OUTER JOIN comments c ON c.org_id = f.org_id AND c.x = f.x WHERE c.org_id = $2`, `$2`},
		{`SELECT * FROM files JOIN comments USING (org_id) WHERE org_id = 5`, `5`},
		{`SELECT * FROM files f, comments c WHERE f.org_id = c.org_id AND f.org_id = 5`, `5`},
		{`SELECT * FROM files f JOIN orgs o ON o.id = f.org_id WHERE o.id = 11`, `11`},
		{`SELECT * FROM docs WHERE slug = 'it''s'`, `'it's'`},
		{`SELECT * FROM docs WHERE slug = E'a\'b\n'`, "'a'b\n'"},
		{`SELECT * FROM docs WHERE slug = $$x'y$$`, `'x'y'`},
		{`SELECT * FROM docs WHERE slug = $t$a$$b$t$::varchar(20)`, `'a$$b'`},
		{`SELECT * FROM docs WHERE slug = ''`, `''`},
		{`SELECT * FROM docs WHERE slug = 'héllo'::text`, `'héllo'`},
		{`SELECT * FROM "Mixed" WHERE "Slug" = 'x'`, `'x'`},
		{`SELECT * FROM sessions WHERE sid = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid`, `'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'`},
		{`/* a comment with org_id = 1 */ SELECT * FROM files -- org_id = 2
		  WHERE org_id = 3`, `3`},
		{`/* nested /* org_id = 1 */ still */ SELECT * FROM files WHERE org_id = 4`, `4`},
		{`UPDATE files SET name = 'x', size = size + 1 WHERE org_id = 5 RETURNING *`, `5`},
		{`UPDATE ONLY files AS f SET name = $1 WHERE f.org_id = $2`, `$2`},
		{`DELETE FROM files WHERE org_id = 6`, `6`},
		{`DELETE FROM files f WHERE f.org_id = 6 AND f.id = 2 RETURNING id`, `6`},
		{`INSERT INTO files (org_id, name) VALUES (7, 'a')`, `7`},
		{`INSERT INTO files (name, org_id) VALUES ('a', $2), ('b', $4) RETURNING id`, `$2,$4`},
		{`INSERT INTO files AS f (org_id, name) VALUES (7, 'a') ON CONFLICT (org_id, name) DO UPDATE SET name = EXCLUDED.name`, `7`},
		{`INSERT INTO files (org_id) VALUES (7) ON CONFLICT DO NOTHING`, `7`},
		{`INSERT INTO docs (slug, body) VALUES ('s', 'body with ) and , inside')`, `'s'`},
		{`SELECT 1; SELECT * FROM files WHERE org_id = 8`, `8`},
		{`INSERT INTO files (org_id, name) VALUES (f(1), 'x'::text)`, ``}, // key an expression: refused (below)
		// pgjdbc's preferQueryMode=simple: each parameter a parenthesised
		// literal with its type's cast.
		{`SELECT * FROM files WHERE org_id = ('42'::int8)`, `'42'`},
		{`SELECT * FROM files WHERE org_id = ('-5'::int4) AND deleted = ('f'::bool)`, `'-5'`},
		{`SELECT * FROM files WHERE ('42'::int8) = org_id`, `'42'`},
		{`SELECT * FROM files WHERE org_id = ( '7'::pg_catalog.int2 )`, `'7'`},
		{`SELECT * FROM files WHERE org_id = '7'::PG_CATALOG.BIGINT`, `'7'`},
		// After a qualifier's dot any word is a column (Postgres's
		// attr_name): f.from, f.order and f.or are columns, not clauses.
		{`SELECT f.from, f.order, f.limit FROM files f WHERE f.org_id = 1 AND f.or = 2 ORDER BY f.order`, `1`},
		{`UPDATE files f SET "where" = 1 WHERE f.org_id = 8 AND f.and IS NULL`, `8`},
		{`SELECT public.files.name FROM public.files WHERE public.files.org_id = 9`, `9`},
		{`SELECT * FROM files WHERE org_id = (-5)`, `-5`},
		{`SELECT * FROM files WHERE org_id = ($1)`, `$1`},
		{`SELECT * FROM files WHERE org_id IN (('1'::int8), ('2'::int8), ('-3'::int8))`, `'1','2','-3'`},
		{`SELECT * FROM docs WHERE slug = ('abc')`, `'abc'`},
		{`SELECT * FROM docs WHERE slug = ('it''s'::varchar)`, `'it's'`},
		{`SELECT * FROM sessions WHERE sid = ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid)`, `'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'`},
		{`INSERT INTO files (org_id, name) VALUES (('42'::int8), ('a')), (('42'::int8), ('b'))`, `'42','42'`},
		{`UPDATE files SET name = ('x') WHERE org_id = ('9'::int8)`, `'9'`},
		{`DELETE FROM files WHERE org_id = ('9'::int8)`, `'9'`},
		{`SELECT * FROM files WHERE org_id = ((42))`, ``},                 // two pairs: not the shape
		{`SELECT * FROM files WHERE org_id = ('42')::int8`, ``},           // a cast outside: not the shape
		{`SELECT * FROM files WHERE org_id = ('42'::numeric)`, ``},        // another type compares otherwise
		{`SELECT * FROM files WHERE org_id = (1) + (2)`, ``},              // an expression
		{`SELECT * FROM files WHERE org_id = ('1'::int8, '2'::int8)`, ``}, // a row
	}
	s := &Scanner{Tables: tables}
	for _, c := range cases {
		r := s.Scan([]byte(c.sql))
		if c.keys == "" {
			if r.Outcome != Refused {
				t.Errorf("%s: got %v, want refused", c.sql, r.Outcome)
			}
			continue
		}
		if r.Outcome != Keyed {
			t.Errorf("%s: got outcome %v (%s), want keyed", c.sql, r.Outcome, r.Reason)
			continue
		}
		if got := keysString(r.Keys); got != c.keys {
			t.Errorf("%s: keys %s, want %s", c.sql, got, c.keys)
		}
	}
}

func TestScanUnsharded(t *testing.T) {
	for _, sql := range []string{
		`SELECT 1`,
		`SELECT * FROM plans WHERE id = 1`,
		`SELECT 'files' FROM plans`,
		`SELECT * FROM plans WHERE note = 'SELECT * FROM files WHERE org_id = 1'`,
		`SELECT * FROM plans /* files */ -- files`,
		`SELECT $x$ files $x$`,
		`BEGIN`,
		`SET search_path = app`,
		`SELECT 'unterminated FROM files`, // Postgres's own syntax error answers it
		`SELECT * FROM plans WHERE a = 'x' || "unrelated"`,
		``,
		`;;`,
	} {
		s := &Scanner{Tables: tables}
		if r := s.Scan([]byte(sql)); r.Outcome != Unsharded {
			t.Errorf("%q: got %v (%s), want unsharded", sql, r.Outcome, r.Reason)
		}
	}
}

func TestScanRefuses(t *testing.T) {
	cases := []struct {
		sql    string
		reason Reason
		table  string
	}{
		{`SELECT * FROM files`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE name = 'x'`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE org_id = 1 OR org_id = 2`, ReasonOr, "files"},
		{`SELECT * FROM files WHERE org_id > 5`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE NOT org_id = 5`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE org_id = 5 IS NOT FALSE`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE org_id = 5.0`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE org_id = '5'::numeric`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE org_id = 5 + 0`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE org_id = ANY($1)`, ReasonNoKey, "files"},
		{`SELECT * FROM files WHERE org_id = 'a' 'b'`, ReasonNoKey, "files"},
		{"SELECT * FROM files WHERE org_id = '1'\n'2'", ReasonNoKey, "files"},
		{`SELECT * FROM docs WHERE slug = U&'\0061'`, ReasonNoKey, "docs"},
		{`SELECT * FROM docs WHERE slug = E'\u0061'`, ReasonNoKey, "docs"},
		{`SELECT * FROM docs WHERE slug = 'a' COLLATE "C"`, ReasonNoKey, "docs"},
		{`SELECT * FROM files WHERE org_id IN (SELECT id FROM orgs)`, ReasonSubquery, "files"},
		{`SELECT (SELECT 1) FROM files WHERE org_id = 1`, ReasonSubquery, "files"},
		{`WITH x AS (SELECT * FROM files WHERE org_id = 1) SELECT * FROM x`, ReasonSubquery, "files"},
		{`SELECT * FROM files WHERE org_id = 1 UNION SELECT * FROM files WHERE org_id = 2`, ReasonSubquery, "files"},
		{`SELECT * FROM files JOIN docs ON true WHERE org_id = 1`, ReasonJoin, "docs"},
		{`SELECT * FROM files JOIN plans ON plans.id = files.plan WHERE org_id = 1`, ReasonJoin, "plans"},
		{`SELECT * FROM files f JOIN comments c ON f.id = c.file_id WHERE f.org_id = 1`, ReasonJoin, "comments"},
		{`SELECT * FROM files f JOIN comments c ON f.org_id = c.org_id OR true WHERE f.org_id = 1`, ReasonJoin, "files"},
		{`SELECT * FROM files f, comments c WHERE f.org_id = 1`, ReasonJoin, "comments"},
		{`SELECT * FROM files NATURAL JOIN comments WHERE org_id = 1`, ReasonJoin, "files"},
		{`SELECT * FROM files, LATERAL f(files.x) WHERE org_id = 1`, ReasonJoin, "files"},
		{`SELECT * FROM files f(a, b) WHERE a = 1`, ReasonJoin, "files"},
		{`SELECT * INTO t FROM files WHERE org_id = 1`, ReasonShape, "files"},
		{`UPDATE files SET org_id = 2 WHERE org_id = 1`, ReasonKeyAssigned, "files"},
		{`UPDATE files SET (name, org_id) = ('a', 2) WHERE org_id = 1`, ReasonKeyAssigned, "files"},
		{`UPDATE files SET name = 'x'`, ReasonNoKey, "files"},
		{`UPDATE files SET name = o.name FROM orgs o WHERE files.org_id = o.id AND o.id = 1`, ReasonJoin, "files"},
		{`UPDATE files SET name = 'x' WHERE CURRENT OF c`, ReasonNoKey, "files"},
		{`DELETE FROM files USING orgs WHERE org_id = 1`, ReasonJoin, "files"},
		{`DELETE FROM files`, ReasonNoKey, "files"},
		{`INSERT INTO files VALUES (1, 'a')`, ReasonNoColumnList, "files"},
		{`INSERT INTO files (name) VALUES ('a')`, ReasonKeyExpression, "files"},
		{`INSERT INTO files (org_id, name) VALUES (DEFAULT, 'a')`, ReasonKeyExpression, "files"},
		{`INSERT INTO files (org_id, name) VALUES (1 + 1, 'a')`, ReasonKeyExpression, "files"},
		{`INSERT INTO files (org_id, name) SELECT org_id, name FROM comments`, ReasonShape, "files"},
		{`INSERT INTO files (org_id) VALUES (1) ON CONFLICT (org_id) DO UPDATE SET org_id = 2`, ReasonKeyAssigned, "files"},
		{`INSERT INTO files DEFAULT VALUES`, ReasonNoColumnList, "files"},
		{`COPY files FROM STDIN`, ReasonShape, "files"},
		{`TABLE files`, ReasonShape, "files"},
		{`TRUNCATE files`, ReasonShape, "files"},
		{`EXPLAIN SELECT * FROM files WHERE org_id = 1`, ReasonShape, "files"},
		{`SELECT * FROM U&"files" WHERE org_id = 1`, ReasonUnicodeIdent, ""},
		{`SELECT 1; SELECT * FROM files`, ReasonNoKey, "files"},
	}
	s := &Scanner{Tables: tables}
	for _, c := range cases {
		r := s.Scan([]byte(c.sql))
		if r.Outcome != Refused || r.Reason != c.reason || string(r.Table) != c.table {
			t.Errorf("%s: got %v %q table %q, want refused %q table %q", c.sql, r.Outcome, r.Reason, r.Table, c.reason, c.table)
		}
	}
}

func TestScanLimit(t *testing.T) {
	s := &Scanner{Tables: tables, Limit: 64}
	sql := `SELECT * FROM files WHERE org_id = 1 AND name = '` + strings.Repeat("x", 64) + `'`
	if r := s.Scan([]byte(sql)); r.Outcome != Refused || r.Reason != ReasonTooLong {
		t.Fatalf("got %v %s", r.Outcome, r.Reason)
	}
}

func TestScanStandardConformingOff(t *testing.T) {
	// With standard_conforming_strings off, '\'' is a quote inside the
	// string: the org_id = 1 after it is still inside the literal.
	sql := `SELECT * FROM files WHERE name = 'a\' AND org_id = 1 --' AND org_id = 2`
	on := &Scanner{Tables: tables}
	if r := on.Scan([]byte(sql)); r.Outcome != Keyed || keysString(r.Keys) != "1" {
		t.Fatalf("on: %v %s %s", r.Outcome, r.Reason, keysString(r.Keys))
	}
	off := &Scanner{Tables: tables, EscapeStrings: true}
	if r := off.Scan([]byte(sql)); r.Outcome != Keyed || keysString(r.Keys) != "2" {
		t.Fatalf("off: %v %s %s", r.Outcome, r.Reason, keysString(r.Keys))
	}
}

func TestScanAllocatesNothing(t *testing.T) {
	s := &Scanner{Tables: tables}
	stmts := [][]byte{
		[]byte(`SELECT id, name, size FROM files f WHERE f.org_id = $1 AND f.deleted = false ORDER BY name LIMIT 50`),
		[]byte(`INSERT INTO files (org_id, name) VALUES (7, 'a'), (7, 'b') ON CONFLICT DO NOTHING`),
		[]byte(`UPDATE Files SET name = 'It''s' WHERE ORG_ID = 42`),
	}
	for _, sql := range stmts {
		s.Scan(sql) // warm the scanner's memory
		if n := testing.AllocsPerRun(100, func() { s.Scan(sql) }); n != 0 {
			t.Errorf("%s: %v allocations per scan", sql, n)
		}
	}
}

func BenchmarkScan(b *testing.B) {
	s := &Scanner{Tables: tables}
	sql := []byte(`SELECT id, name, size, created_at, updated_at FROM files f WHERE f.org_id = $1 AND f.deleted = false ORDER BY name LIMIT 50`)
	b.SetBytes(int64(len(sql)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Scan(sql)
	}
}

// TestScanFirstLookup: tableRef reuses mentions's lookup only for the very
// token mentions looked up; a table named earlier (as a qualifier, a
// column, in another statement) or under a schema is looked up again.
func TestScanFirstLookup(t *testing.T) {
	cases := []struct {
		sql     string
		outcome Outcome
		keys    string
	}{
		{`SELECT orgs.x FROM files WHERE org_id = 1`, Keyed, `1`},
		{`SELECT docs FROM orgs WHERE id = 2`, Keyed, `2`},
		{`SELECT docs FROM orgs WHERE slug = 'a'`, Refused, ``},
		{`SELECT * FROM public.orgs WHERE id = 3`, Keyed, `3`},
		{`SELECT * FROM files.orgs WHERE id = 3`, Refused, ``},
		{`SELECT 1 FROM orgs WHERE id = 4; SELECT 1 FROM files WHERE org_id = 4`, Keyed, `4,4`},
		{`SELECT 1 FROM files WHERE org_id = 5; SELECT 1 FROM orgs WHERE org_id = 5`, Refused, ``},
		{`UPDATE docs SET slug = 'x' WHERE slug = 'y'`, Refused, ``},
		{`DELETE FROM orgs WHERE id = 6`, Keyed, `6`},
		{`INSERT INTO orgs (id) VALUES (7)`, Keyed, `7`},
	}
	s := &Scanner{Tables: tables}
	for _, c := range cases {
		r := s.Scan([]byte(c.sql))
		if r.Outcome != c.outcome || c.outcome == Keyed && keysString(r.Keys) != c.keys {
			t.Errorf("%s: %v %v keys %s, want %v %s", c.sql, r.Outcome, r.Reason, keysString(r.Keys), c.outcome, c.keys)
		}
	}
}

// TestScanLinksAfterBinding: once a key is bound, the later conjuncts are
// read for links alone (colref = colref on two keys); one whose leading
// column reference is not followed by '=' links nothing.
func TestScanLinksAfterBinding(t *testing.T) {
	cases := []struct {
		sql     string
		outcome Outcome
	}{
		{`SELECT * FROM files f, comments c WHERE f.org_id = 1 AND c.x IS NULL AND c.org_id = f.org_id`, Keyed},
		{`SELECT * FROM files f, comments c WHERE f.org_id = 1 AND public.comments.org_id = f.org_id`, Refused},
		{`SELECT * FROM files f, comments c WHERE f.org_id = 1 AND c.org_id IS NOT DISTINCT FROM f.org_id`, Refused},
		{`SELECT * FROM files f, comments c WHERE f.org_id = 1 AND c.org_id >= f.org_id`, Refused},
		{`SELECT * FROM files f, comments c WHERE f.org_id = 1 AND c.org_id IN (f.org_id)`, Refused},
		{`SELECT * FROM files f, comments c WHERE f.org_id = 1 AND c.* = f.*`, Refused},
		{`SELECT * FROM files, comments WHERE files.org_id = 1 AND comments.org_id = files.org_id`, Keyed},
		{`SELECT * FROM files, comments WHERE files.org_id = 1 AND "comments"."org_id" = files.org_id`, Keyed},
	}
	s := &Scanner{Tables: tables}
	for _, c := range cases {
		if r := s.Scan([]byte(c.sql)); r.Outcome != c.outcome {
			t.Errorf("%s: %v %v, want %v", c.sql, r.Outcome, r.Reason, c.outcome)
		}
	}
}
