package shard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The router's tests compose decisions; where a key lands (the hash and
// the ranges) is proven against Postgres by the integration test
// TestShardPlacementMatchesPostgres, so expected databases come from Place.

func exampleCluster(t testing.TB, edit func(string) string) *Cluster {
	t.Helper()
	data, err := readFile("testdata/shards.toml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if edit != nil {
		text = edit(text)
	}
	m, err := Parse([]byte(text), "shards.toml", exampleDatabases)
	if err != nil {
		t.Fatal(err)
	}
	return m.Cluster("app")
}

// orgDB is where org key v lives.
func orgDB(c *Cluster, v int64) string {
	_, db := c.Colo("org").Place(HashInt64(v))
	return db
}

// twoOrgs returns two org keys on different databases.
func twoOrgs(c *Cluster) (a, b int64) {
	a = 1
	for b = 2; orgDB(c, b) == orgDB(c, a); b++ {
	}
	return a, b
}

type params []struct {
	v      []byte
	binary bool
}

func (p params) Param(i int) ([]byte, bool, bool, bool) {
	if i >= len(p) {
		return nil, false, false, false
	}
	return p[i].v, p[i].binary, p[i].v == nil, true
}

func TestRoute(t *testing.T) {
	c := exampleCluster(t, nil)
	r := NewRouter(c)
	a, b := twoOrgs(c)
	as, bs := strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)
	cases := []struct {
		sql       string
		pin       Pin
		mayTarget bool
		src       Source
		db        string
		reason    Reason
	}{
		{sql: `SELECT * FROM files WHERE org_id = ` + as, src: SourceLiteral, db: orgDB(c, a)},
		{sql: `SELECT * FROM files WHERE org_id = ` + bs, src: SourceLiteral, db: orgDB(c, b)},
		{sql: `SELECT * FROM files WHERE org_id IN (` + as + `, ` + bs + `)`, src: SourceRefused, reason: ReasonKeysSplit},
		{sql: `SELECT * FROM files WHERE org_id IN (` + as + `, ` + as + `)`, src: SourceLiteral, db: orgDB(c, a)},
		{sql: `INSERT INTO orgs (id, name) VALUES (` + as + `, 'x'), (` + bs + `, 'y')`, src: SourceRefused, reason: ReasonKeysSplit},
		{sql: `SELECT * FROM billing.invoices WHERE org_id = ` + as, src: SourceLiteral, db: orgDB(c, a)},
		{sql: `SELECT * FROM public.files WHERE org_id = ` + as, src: SourceLiteral, db: orgDB(c, a)},
		{sql: `SELECT * FROM other.files WHERE org_id = ` + as, src: SourceDefault, db: "app_main"},
		{sql: `SELECT * FROM files WHERE org_id = 'abc'`, src: SourceLiteral, db: "app_s0"},
		{sql: `SELECT * FROM plans`, src: SourceDefault, db: "app_main"},
		{sql: `SELECT 1`, src: SourceDefault, db: "app_main"},
		{sql: `SELECT * FROM files`, src: SourceRefused, reason: ReasonNoKey},
		{sql: `SELECT * FROM files WHERE org_id = $1`, src: SourceParam},
		{sql: `/* pgturnstile: shard_key=` + bs + ` */ SELECT * FROM files`, src: SourceHint, db: orgDB(c, b)},
		{sql: `/* pgturnstile: shard_key=` + bs + `, colo=org */ SELECT now()`, src: SourceHint, db: orgDB(c, b)},
		{sql: `/* pgturnstile: shard_key=` + bs + ` */ SELECT now()`, src: SourceRefused, reason: ReasonNoColo},
		{sql: `/* pgturnstile: shard_key=1, colo=nope */ SELECT 1`, src: SourceRefused, reason: ReasonUnknownColo},
		{sql: `/* pgturnstile: shard_key=` + bs + ` */ SELECT * FROM files WHERE org_id = ` + as, src: SourceRefused, reason: ReasonHintMismatch},
		{sql: `/* pgturnstile: shard_key=` + as + ` */ SELECT * FROM files WHERE org_id = ` + as, src: SourceHint, db: orgDB(c, a)},
		{sql: `SELECT * FROM files`, pin: Pin{Key: []byte(bs), Colo: "org"}, src: SourceOption, db: orgDB(c, b)},
		{sql: `/* pgturnstile: shard_key=` + as + ` */ SELECT * FROM files`, pin: Pin{Key: []byte(bs), Colo: "org"}, src: SourceHint, db: orgDB(c, a)},
		{sql: `/* pgturnstile: shard=app_s1 */ SELECT * FROM files`, mayTarget: true, src: SourceTarget, db: "app_s1"},
		{sql: `/* pgturnstile: shard=app_s1 */ SELECT * FROM files`, src: SourceRefused, reason: ReasonNotTarget},
		{sql: `/* pgturnstile: shard=elsewhere */ SELECT 1`, mayTarget: true, src: SourceRefused, reason: ReasonUnknownShard},
		{sql: `/* pgturnstile: shard=all */ SELECT count(*) FROM files`, mayTarget: true, src: SourceScatter},
		{sql: `SELECT 1`, pin: Pin{Shard: "app_s0"}, mayTarget: true, src: SourceTarget, db: "app_s0"},
		{sql: `/* pgturnstile: priority=high */ SELECT 1`, src: SourceRefused, reason: ReasonBadHint},
		{sql: `SELECT * FROM files /*route='%2Fx',shard_key='` + bs + `'*/;`, src: SourceHint, db: orgDB(c, b)},
		{sql: `SELECT * FROM files WHERE name = '/*shard_key=` + bs + `*/'`, src: SourceRefused, reason: ReasonNoKey},
		{sql: `SELECT * FROM files /* a /* nested */ shard_key=` + bs + ` */`, src: SourceRefused, reason: ReasonNoKey},
		{sql: `SELECT * FROM files /*shard=app_s1*/`, mayTarget: true, src: SourceTarget, db: "app_s1"},
		{sql: `SELECT * FROM documents WHERE id = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'`, src: SourceLiteral,
			db: func() string {
				var u [16]byte
				_ = ParseUUID([]byte("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), &u)
				_, db := c.Colo("doc").Place(HashUUID(&u))
				return db
			}()},
		{sql: `SELECT * FROM documents WHERE id = 5`, src: SourceLiteral, db: "app_s0"},
	}
	for _, tc := range cases {
		d := r.Route([]byte(tc.sql), tc.pin, tc.mayTarget)
		if d.Source != tc.src || d.Database != tc.db || d.Reason != tc.reason {
			t.Errorf("%s (pin %+v): got %v %q %q, want %v %q %q", tc.sql, tc.pin, d.Source, d.Database, d.Reason.Text(), tc.src, tc.db, tc.reason.Text())
		}
	}
}

func TestRouteMissingKeyPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy string
		src    Source
		db     string
	}{
		{"error", SourceRefused, ""},
		{"default", SourceDefault, "app_main"},
		{"scatter", SourceScatter, ""},
	} {
		c := exampleCluster(t, func(s string) string {
			return strings.Replace(s, `on_missing_key = "error"`, `on_missing_key = "`+tc.policy+`"`, 1)
		})
		d := NewRouter(c).Route([]byte(`SELECT * FROM files WHERE org_id > 5`), Pin{}, false)
		if d.Source != tc.src || d.Database != tc.db {
			t.Errorf("%s: got %v %q", tc.policy, d.Source, d.Database)
		}
		if tc.policy != "default" && (d.Reason != ReasonNoKey || string(d.Table) != "files" || d.Column != "org_id") {
			t.Errorf("%s: reason %q table %q column %q", tc.policy, d.Reason.Text(), d.Table, d.Column)
		}
	}
}

func TestPrepareBind(t *testing.T) {
	c := exampleCluster(t, nil)
	r := NewRouter(c)
	a, b := twoOrgs(c)
	be := func(v int64, size int) []byte {
		out := make([]byte, size)
		switch size {
		case 2:
			binary.BigEndian.PutUint16(out, uint16(v))
		case 4:
			binary.BigEndian.PutUint32(out, uint32(v))
		default:
			binary.BigEndian.PutUint64(out, uint64(v))
		}
		return out
	}
	d, p := r.Prepare([]byte(`SELECT * FROM files WHERE org_id = $2 AND name = $1`), Pin{}, false)
	if !d.Pending || p == nil {
		t.Fatalf("prepare: %+v %v", d, p)
	}
	for _, tc := range []struct {
		ps params
		db string
	}{
		{params{{[]byte("x"), false}, {[]byte(strconv.FormatInt(a, 10)), false}}, orgDB(c, a)},
		{params{{[]byte("x"), false}, {be(b, 8), true}}, orgDB(c, b)},
		{params{{[]byte("x"), false}, {be(b, 4), true}}, orgDB(c, b)},
		{params{{[]byte("x"), false}, {be(a, 2), true}}, orgDB(c, a)},
		{params{{[]byte("x"), false}, {nil, false}}, func() string { _, db := c.Colo("org").Place(NullHash); return db }()},
		{params{{[]byte("x"), false}, {[]byte("not a number"), false}}, "app_s0"},
		{params{{[]byte("x"), false}, {[]byte{1, 2, 3}, true}}, "app_s0"},
	} {
		got, err := p.Bind(tc.ps)
		if err != nil || got.Database != tc.db || got.Source != SourceParam {
			t.Errorf("%v: got %+v %v, want %s", tc.ps, got, err, tc.db)
		}
	}
	if _, err := p.Bind(params{{[]byte("x"), false}}); err != ErrNoParam {
		t.Errorf("short Bind: %v", err)
	}

	// Several rows: all on one database, or refused.
	_, p = r.Prepare([]byte(`INSERT INTO files (org_id, name) VALUES ($1, 'a'), ($2, 'b')`), Pin{}, false)
	if d, _ := p.Bind(params{{[]byte(strconv.FormatInt(a, 10)), false}, {[]byte(strconv.FormatInt(b, 10)), false}}); d.Source != SourceRefused || d.Reason != ReasonKeysSplit {
		t.Errorf("split rows: %+v", d)
	}
	if d, _ := p.Bind(params{{[]byte(strconv.FormatInt(a, 10)), false}, {be(a, 8), true}}); d.Database != orgDB(c, a) {
		t.Errorf("one-shard rows: %+v", d)
	}
	// A literal and a parameter.
	_, p = r.Prepare([]byte(`INSERT INTO files (org_id, name) VALUES (`+strconv.FormatInt(a, 10)+`, 'a'), ($1, 'b')`), Pin{}, false)
	if d, _ := p.Bind(params{{[]byte(strconv.FormatInt(b, 10)), false}}); d.Reason != ReasonKeysSplit {
		t.Errorf("literal and param split: %+v", d)
	}
	// Decided at Parse: no Prepared.
	if d, p := r.Prepare([]byte(`SELECT * FROM files WHERE org_id = 7`), Pin{}, false); d.Pending || p != nil || d.Database != orgDB(c, 7) {
		t.Errorf("literal parse: %+v %v", d, p)
	}
}

func TestRouteAllocatesNothing(t *testing.T) {
	c := exampleCluster(t, nil)
	r := NewRouter(c)
	for _, sql := range [][]byte{
		[]byte(`SELECT id, name FROM files f WHERE f.org_id = 42 AND f.deleted = false ORDER BY name LIMIT 50`),
		[]byte(`/* pgturnstile: shard_key=42 */ SELECT * FROM files`),
		[]byte(`SELECT * FROM billing.invoices WHERE org_id = 42`),
		[]byte(`SELECT * FROM plans`),
		[]byte(`SELECT * FROM files`),
	} {
		r.Route(sql, Pin{}, false)
		if n := testing.AllocsPerRun(100, func() { r.Route(sql, Pin{}, false) }); n != 0 && !raceEnabled {
			t.Errorf("%s: %v allocations", sql, n)
		}
	}
	_, p := r.Prepare([]byte(`SELECT * FROM files WHERE org_id = $1`), Pin{}, false)
	var ps BindParams = params{{[]byte("12345"), false}} // boxed once, as the pooler's reader is
	if n := testing.AllocsPerRun(100, func() { _, _ = p.Bind(ps) }); n != 0 {
		t.Errorf("Bind: %v allocations", n)
	}
}

// BenchmarkRoute: a statement of the fast path, about 500 bytes, from text
// to database by a scan (issue 34: ≤ 1 µs, 0 allocations); the same text
// again would be decided by the router's memo (BenchmarkRouteMemo).
func BenchmarkRoute(b *testing.B) {
	c := exampleCluster(b, nil)
	r := NewRouter(c)
	sql := []byte(`SELECT f.id, f.name, f.size, f.created_at, f.updated_at, f.owner_id, f.kind, f.mime_type,
       f.checksum, f.version, f.parent_id, f.path, f.deleted_at, f.locked_by, f.locked_at
  FROM files f
 WHERE f.org_id = 1234567890
   AND f.deleted_at IS NULL
   AND f.kind = 'document'
   AND f.parent_id = 987654321
   AND f.path LIKE '/projects/alpha/%'
 ORDER BY f.updated_at DESC, f.id
 LIMIT 100 OFFSET 0 /* app=web, route=/files/list */`)
	b.SetBytes(int64(len(sql)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if d := r.scan(sql, Pin{}, false); d.Source != SourceLiteral {
			b.Fatal(d)
		}
	}
}

// BenchmarkBind: the Bind-time part (issue 34: ≤ 0.1 µs).
func BenchmarkBind(b *testing.B) {
	c := exampleCluster(b, nil)
	_, p := NewRouter(c).Prepare([]byte(`SELECT * FROM files WHERE org_id = $1`), Pin{}, false)
	var ps BindParams = params{{binary.BigEndian.AppendUint64(nil, 1234567890), true}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if d, _ := p.Bind(ps); d.Database == "" {
			b.Fatal(d)
		}
	}
}

// routeShapes are realistic statements of the fast path, each at most
// 512 bytes (issue 34's bound), one per shape the scanner routes.
var routeShapes = []struct {
	name string
	sql  string
	src  Source
}{
	{"join", `SELECT f.id, f.name, f.size, v.version, v.created_at, v.author_id, o.name AS org_name
  FROM files f
  JOIN file_versions v ON v.org_id = f.org_id AND v.file_id = f.id
  JOIN orgs o ON o.id = f.org_id
 WHERE f.org_id = 1234567890
   AND f.deleted_at IS NULL
   AND v.version BETWEEN 3 AND 12
   AND f.kind IN ('document', 'sheet')
   AND o.plan <> 'free'
 ORDER BY v.created_at DESC
 LIMIT 20`, SourceLiteral},
	{"insert10", `INSERT INTO files (org_id, id, parent_id, name, kind, mime_type, size, checksum, created_at, owner_id)
VALUES (1234567890, 9876543210, 55501, 'quarterly report.pdf', 'document', 'application/pdf', 482133,
        'sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', now(), 77)
ON CONFLICT (org_id, id) DO UPDATE SET size = excluded.size, checksum = excluded.checksum
RETURNING id, created_at`, SourceLiteral},
	{"update", `UPDATE files AS f
   SET name = 'renamed.txt', updated_at = now(), version = f.version + 1, locked_by = NULL
 WHERE f.org_id = '1234567890'::bigint
   AND f.id = 9876543210
   AND f.version = 41
   AND f.locked_by IS NULL
RETURNING f.id, f.version, f.updated_at /* controller='files',action='rename' */`, SourceLiteral},
	{"param", `SELECT id, name, size, created_at, updated_at FROM files f WHERE f.org_id = $1 AND f.deleted = false ORDER BY name LIMIT 50`, SourceParam},
}

// BenchmarkRouteShapes: each realistic statement from text to database
// (issue 34: ≤ 1 µs and 0 allocations for ≤ 512 bytes).
func BenchmarkRouteShapes(b *testing.B) {
	c := exampleCluster(b, nil)
	r := NewRouter(c)
	for _, sh := range routeShapes {
		sql := []byte(sh.sql)
		if len(sql) > 512 {
			b.Fatalf("%s: %d bytes", sh.name, len(sql))
		}
		if d := r.Route(sql, Pin{}, false); d.Source != sh.src {
			b.Fatalf("%s: %+v", sh.name, d)
		}
		b.Run(sh.name, func(b *testing.B) {
			b.SetBytes(int64(len(sql)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r.scan(sql, Pin{}, false) // the memo's comparison would decide a text repeated
			}
		})
		if sh.src != SourceLiteral {
			continue
		}
		// The same shape again with its key's literal changed, as a
		// client of the simple protocol sends it: the router's memo.
		lit := []byte("1234567890")
		at := bytes.Index(sql, lit)
		texts := make([][]byte, 16)
		for j := range texts {
			texts[j] = slices.Concat(sql[:at], []byte(strconv.Itoa(1234567000+j*37)), sql[at+len(lit):])
		}
		r.Route(texts[0], Pin{}, false)
		b.Run(sh.name+"-again", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if d := r.Route(texts[i%len(texts)], Pin{}, false); d.Source != SourceLiteral {
					b.Fatal(d)
				}
			}
		})
		if _, ok := r.memoRoute(texts[1], Pin{}); !ok {
			b.Fatalf("%s: the memo does not decide it again", sh.name)
		}
	}
}

// TestDecisionSpan: a decision by several keys spans the lowest to the
// highest of their logical shards, whichever way the keys come (literals,
// a hint beside them, a literal beside a $n), so PAUSE SHARD can hold a
// statement any of whose keys is in a paused range.
func TestDecisionSpan(t *testing.T) {
	c := exampleCluster(t, nil)
	r := NewRouter(c)
	org := c.Colo("org")
	logical := func(v int64) uint32 { l, _ := org.Place(HashInt64(v)); return l }
	// Two keys on one database in different logical shards.
	a := int64(1)
	b := a + 1
	for orgDB(c, b) != orgDB(c, a) || logical(b) == logical(a) {
		b++
	}
	lo, hi := min(logical(a), logical(b)), max(logical(a), logical(b))
	as, bs := strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)
	check := func(what string, d Decision) {
		t.Helper()
		if d.Database != orgDB(c, a) || d.Colo != org || d.Logical != lo || d.LogicalMax != hi || d.ManyColos {
			t.Errorf("%s: got %+v, want %s %d-%d", what, d, orgDB(c, a), lo, hi)
		}
	}
	check("IN list", r.Route([]byte(`SELECT * FROM files WHERE org_id IN (`+as+`, `+bs+`)`), Pin{}, false))
	check("hint and literal", r.Route([]byte(`/* pgturnstile: shard_key=`+as+` */ SELECT * FROM files WHERE org_id = `+bs), Pin{}, false))
	_, p := r.Prepare([]byte(`INSERT INTO files (org_id, name) VALUES (`+as+`, 'a'), ($1, 'b')`), Pin{}, false)
	d, err := p.Bind(params{{[]byte(bs), false}})
	if err != nil {
		t.Fatal(err)
	}
	check("literal and param", d)
	_, p = r.Prepare([]byte(`INSERT INTO files (org_id, name) VALUES ($1, 'a'), ($2, 'b')`), Pin{}, false)
	d, _ = p.Bind(params{{[]byte(bs), false}, {[]byte(as), false}})
	check("two params", d)
	one := r.Route([]byte(`SELECT * FROM files WHERE org_id = `+as), Pin{}, false)
	if one.Logical != logical(a) || one.LogicalMax != logical(a) {
		t.Errorf("one key: %+v", one)
	}
	// Keys of two colocations on one database.
	doc := c.Colo("doc")
	found := false
	for i := 0; i < 10 && !found; i++ {
		u := strings.Replace("00000000-0000-0000-0000-000000000000", "0", strconv.Itoa(i%10), 32)
		h, err := KeyUUID.HashText([]byte(u))
		if err != nil {
			t.Fatal(err)
		}
		if _, db := doc.Place(h); db != orgDB(c, a) {
			continue
		}
		d := r.Route([]byte(`SELECT * FROM files WHERE org_id = `+as+`; SELECT * FROM documents WHERE id = '`+u+`'`), Pin{}, false)
		if d.Refused() || !d.ManyColos {
			t.Errorf("two colocations: %+v", d)
		}
		found = true
	}
	if !found {
		t.Fatal("no uuid of ten on the org key's database")
	}
}

// TestRouterScannersLent: routers share their cluster's scanners, one
// lent per statement, so a decision must not keep the scanner's memory:
// a refusal's table folded into scratch reads the same after others have
// used the scanner, and many routers of one cluster routing at once
// (under -race) each get their own statement's decision.
func TestRouterScannersLent(t *testing.T) {
	c := exampleCluster(t, nil)
	r := NewRouter(c)
	d := r.Route([]byte(`SELECT * FROM FILES WHERE name = 'x'`), Pin{}, false)
	if d.Source != SourceRefused || string(d.Table) != "files" {
		t.Fatalf("refusal: %+v", d)
	}
	for range 10 {
		r.Route([]byte(`SELECT * FROM "FILEZZZZ" WHERE "ORG_ID" = 1`), Pin{}, false)
	}
	if string(d.Table) != "files" {
		t.Fatalf("the refusal's table changed to %q when the scanner was used again", d.Table)
	}

	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := NewRouter(c)
			r.SetEscapeStrings(g%2 == 1)
			for i := range 2000 {
				v := int64(g*100000 + i)
				sql := []byte(`SELECT * FROM files WHERE org_id = ` + strconv.FormatInt(v, 10))
				if d := r.Route(sql, Pin{}, false); d.Database != orgDB(c, v) {
					errs <- fmt.Sprintf("%s: %+v, want %s", sql, d, orgDB(c, v))
					return
				}
				if d := r.Route([]byte(`SELECT * FROM FILES`), Pin{}, false); string(d.Table) != "files" {
					errs <- fmt.Sprintf("refusal: %+v", d)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
