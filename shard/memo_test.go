package shard

import (
	"strconv"
	"strings"
	"testing"
)

// sameDecision compares every field of a decision a caller reads.
func sameDecision(a, b Decision) bool {
	return a.Source == b.Source && a.Database == b.Database && a.Colo == b.Colo &&
		a.Logical == b.Logical && a.LogicalMax == b.LogicalMax && a.ManyColos == b.ManyColos &&
		a.Reason == b.Reason && string(a.Table) == string(b.Table) && a.Column == b.Column && a.Pending == b.Pending
}

// memoTemplates are statements with one place (%s) a literal goes; some
// are routed by it, some by a hint, some refused or left to a Bind.
var memoTemplates = []string{
	`SELECT abalance FROM files WHERE org_id = %s;`,
	`SELECT * FROM files WHERE org_id=%s`,
	`SELECT * FROM files WHERE org_id = -%s`,
	`SELECT * FROM files WHERE org_id = - %s`,
	`SELECT * FROM files WHERE org_id = +%s`,
	`SELECT * FROM files f WHERE f.org_id = %s AND f.deleted_at IS NULL ORDER BY id LIMIT 10`,
	`UPDATE files SET name = 'x' WHERE org_id = %s`,
	`DELETE FROM files WHERE org_id = %s RETURNING id`,
	`INSERT INTO files (org_id, name) VALUES (%s, 'a') RETURNING id`,
	`INSERT INTO files (name, org_id) VALUES ('a',%s)`,
	`SELECT * FROM tenants WHERE name = %s`,
	`SELECT * FROM documents WHERE id = %s`,
	`SELECT * FROM files WHERE org_id = %s::bigint`,
	`SELECT * FROM files WHERE org_id = %s::text`,
	`SELECT * FROM files WHERE org_id = (%s)`,
	`SELECT * FROM files WHERE org_id = %s /* shard_key='5' */`,
	`/* pgturnstile: shard_key=7 */ SELECT * FROM files WHERE org_id = %s`,
	`/* pgturnstile: shard=app_s0 */ SELECT * FROM files WHERE org_id = %s`,
	`SELECT * FROM files WHERE org_id = %s OR org_id = 1`,
	`SELECT * FROM files WHERE org_id IN (%s, 5)`,
	`SELECT * FROM files WHERE org_id IN (%s)`,
	`SELECT * FROM files WHERE org_id = E%s`,
	`SELECT * FROM files WHERE org_id = U&%s`,
	`SELECT * FROM files WHERE org_id = %s.5`,
	`SELECT * FROM files WHERE org_id = %se3`,
	`SELECT * FROM files WHERE org_id = %s$x$`,
	"SELECT * FROM files WHERE org_id = %s\n'continued'",
	`SELECT * FROM settings WHERE tenant = %s AND name = 'x'`,
	`SELECT * FROM files WHERE name = %s AND org_id = 3`,
	`SELECT * FROM files WHERE org_id = %s; SELECT 1`,
	`SELECT * FROM files WHERE org_id = %s--`,
	`SELECT * FROM files WHERE org_id = 1%s`,
	`SELECT * FROM files WHERE org_id = x%s`,
	`SELECT * FROM files WHERE org_id = '%s'`,
	`SELECT '%s' FROM files WHERE org_id = 5`,
	`SELECT %s`,
	`%s`,
}

// memoLiterals go into the templates: numbers, strings, and texts that
// are not one literal at all.
var memoLiterals = []string{
	"1", "42", "0", "007", "2749013", "9223372036854775807", "9223372036854775808", "99999999999999999999999",
	"'42'", "'-5'", "''", "'abc'", "'ünï'", "'it''s'", `'a\b'`, `'a\'`, "'1e5'",
	"'00000000-0000-0000-0000-000000000001'", "'c0ffee00-1234-5678-9abc-def012345678'",
	"NULL", "$1", "1.5", "-3", "'x' OR org_id = 2", "5 OR org_id = 6", "abc", "'a'/*", "2 --", "2/*x*/",
	"'", "1'", "5) OR (org_id = 7", "$$", "e'5'", "5 AND org_id = 9",
}

// TestRouteMemo: a router that routed one statement routes the next as a
// router that never saw the first does, for every pair of literals in
// every template, with standard_conforming_strings on and off, and with
// and without a pin; and the memo does decide the ones it should.
func TestRouteMemo(t *testing.T) {
	c := exampleCluster(t, nil)
	pins := []Pin{{}, {Key: []byte("5"), Colo: "org"}, {Shard: "app_s1"}}
	hits := 0
	for _, tmpl := range memoTemplates {
		for _, esc := range []bool{false, true} {
			for _, a := range memoLiterals {
				for _, b := range memoLiterals {
					for pi, pin := range pins {
						first := strings.Replace(tmpl, "%s", a, 1)
						next := strings.Replace(tmpl, "%s", b, 1)
						r := NewRouter(c)
						r.SetEscapeStrings(esc)
						r.Route([]byte(first), Pin{}, true)
						if _, ok := r.memoRoute([]byte(next), pin); ok {
							hits++
						}
						got := r.Route([]byte(next), pin, pi == 2)
						fresh := NewRouter(c)
						fresh.SetEscapeStrings(esc)
						want := fresh.Route([]byte(next), pin, pi == 2)
						if !sameDecision(got, want) {
							t.Fatalf("esc %v, pin %+v: after %q, %q routes to %+v; a fresh router: %+v", esc, pin, first, next, got, want)
						}
					}
				}
			}
		}
	}
	// The templates a literal alone decides, times numbers or strings.
	t.Logf("memo hits: %d", hits)
	if hits < 1000 {
		t.Errorf("the memo decided %d statements", hits)
	}

	// Decided by the memo, without an allocation.
	r := NewRouter(c)
	r.Route([]byte(`SELECT abalance FROM files WHERE org_id = 1;`), Pin{}, false)
	next := []byte(`SELECT abalance FROM files WHERE org_id = 2749013;`)
	if _, ok := r.memoRoute(next, Pin{}); !ok {
		t.Fatal("the memo does not decide pgbench's statement")
	}
	if n := testing.AllocsPerRun(100, func() { r.Route(next, Pin{}, false) }); n != 0 {
		t.Errorf("Route by the memo: %v allocations", n)
	}
}

// FuzzRouteMemo: whatever two statements a router routes one after the
// other, the second's decision is a fresh router's.
func FuzzRouteMemo(f *testing.F) {
	f.Add("SELECT * FROM files WHERE org_id = ", "1", "2", ";", false)
	f.Add("SELECT * FROM documents WHERE id = ", "'00000000-0000-0000-0000-000000000001'", "'c0ffee00-1234-5678-9abc-def012345678'", "", false)
	f.Add("SELECT * FROM tenants WHERE name = ", "'a'", "'b'", " AND x = 1", true)
	f.Add("SELECT * FROM files WHERE org_id = -", "1", "2", "::bigint", false)
	f.Add("SELECT * FROM files WHERE org_id = ", "'1'", "'2' OR org_id = '3'", "", false)
	c := exampleCluster(f, nil)
	f.Fuzz(func(t *testing.T, prefix, a, b, suffix string, esc bool) {
		first, next := []byte(prefix+a+suffix), []byte(prefix+b+suffix)
		r := NewRouter(c)
		r.SetEscapeStrings(esc)
		r.Route(first, Pin{}, false)
		got := r.Route(next, Pin{}, false)
		fresh := NewRouter(c)
		fresh.SetEscapeStrings(esc)
		if want := fresh.Route(next, Pin{}, false); !sameDecision(got, want) {
			t.Fatalf("after %q, %q routes to %+v; a fresh router: %+v", first, next, got, want)
		}
	})
}

// BenchmarkRouteMemo: pgbench's select-only statement, its literal
// changed each time, decided by the memo.
func BenchmarkRouteMemo(b *testing.B) {
	c := exampleCluster(b, nil)
	r := NewRouter(c)
	texts := make([][]byte, 64)
	for i := range texts {
		texts[i] = []byte("SELECT abalance FROM files WHERE org_id = " + strconv.Itoa(i*7919+1) + ";")
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if d := r.Route(texts[i%len(texts)], Pin{}, false); d.Source != SourceLiteral {
			b.Fatal(d)
		}
	}
}
