package stmtcache

import (
	"strings"
	"testing"
)

func TestRegistryRefcounts(t *testing.T) {
	r := NewRegistry()
	a := r.Acquire("SELECT 1", nil, 0)
	b := r.Acquire("SELECT 1", nil, 0)
	c := r.Acquire("SELECT 1", []byte{0, 1, 0, 0, 0, 23}, 0)
	if a != b || a == c || a.Name == c.Name {
		t.Fatal("definitions must be unique by text and types")
	}
	if r.LookupValidated("SELECT 1", nil) != nil {
		t.Fatal("unvalidated definition answered")
	}
	a.MarkValidated()
	if d := r.LookupValidated("SELECT 1", nil); d != a || !d.Validated() {
		t.Fatal("validated definition not found")
	}
	r.Release(a) // LookupValidated's reference
	r.Release(a)
	r.Release(b)
	r.Release(c)
	if r.Len() != 0 {
		t.Fatalf("registry leaks %d definitions", r.Len())
	}
	// A new definition of the same text gets a new server name: names are
	// never reused, so a stale server cache cannot alias another query.
	if d := r.Acquire("SELECT 1", nil, 0); d.Name == a.Name {
		t.Fatal("server name reused")
	}
}

// The registry counts each statement's text once, refuses a new one past
// the budget (prepared_statement_budget), still hands out one it has, and
// gives the bytes back with the last reference.
func TestRegistryBudget(t *testing.T) {
	r := NewRegistry()
	types := []byte{0, 1, 0, 0, 0, 23}
	a := r.Acquire("SELECT 1", types, 100)
	if a == nil || r.TextBytes() != int64(len("SELECT 1")+2*len(types)) || a.Size() != r.TextBytes() {
		t.Fatalf("Acquire: %v, bytes %d", a, r.TextBytes())
	}
	used := r.TextBytes()
	if d := r.Acquire("SELECT 1", types, 100); d != a || r.TextBytes() != used {
		t.Fatalf("second reference: %v, bytes %d", d, r.TextBytes())
	}
	long := strings.Repeat("x", 100)
	if d := r.Acquire(long, nil, 100); d != nil {
		t.Fatalf("over the budget: got %v", d)
	}
	if r.TextBytes() != used || r.Len() != 1 {
		t.Fatalf("a refused statement left %d bytes, %d entries", r.TextBytes(), r.Len())
	}
	if d := r.Acquire(long, nil, 0); d == nil {
		t.Fatal("no budget: refused")
	} else {
		r.Release(d)
	}
	r.Release(a)
	r.Release(a)
	if r.TextBytes() != 0 || r.Len() != 0 {
		t.Fatalf("after the last release: %d bytes, %d entries", r.TextBytes(), r.Len())
	}
	if !r.ReserveText(50, 100) || r.ReserveText(51, 100) || !r.ReserveText(50, 100) {
		t.Fatal("ReserveText: want 50 and 50 of 100, not 51 between")
	}
	r.ReleaseText(100)
	if r.TextBytes() != 0 {
		t.Fatalf("ReleaseText left %d bytes", r.TextBytes())
	}
}

// Statements a server taken over has keep their names, and the registry's
// next name comes after them.
func TestAdoptNamedKeepsNames(t *testing.T) {
	r := NewRegistry()
	d := r.AdoptNamed("PGTS_41", "SELECT 1", nil)
	if d.Name != "PGTS_41" || !d.Validated() {
		t.Fatalf("adopted %q validated=%v", d.Name, d.Validated())
	}
	if again := r.AdoptNamed("PGTS_41", "SELECT 1", nil); again != d {
		t.Error("the same statement adopted twice made two definitions")
	}
	if n := r.Acquire("SELECT 2", nil, 0); n.Name != "PGTS_42" {
		t.Errorf("next name = %q, want PGTS_42", n.Name)
	}
	if same := r.Acquire("SELECT 1", nil, 0); same != d {
		t.Error("a client's Parse of the adopted text made a new definition")
	}
	// A definition made here first keeps its own name.
	mine := r.Acquire("SELECT 3", nil, 0)
	if other := r.AdoptNamed("PGTS_7", "SELECT 3", nil); other != mine || mine.Name != "PGTS_43" {
		t.Errorf("adopted over an existing definition: %q", other.Name)
	}
}

func TestCacheLRU(t *testing.T) {
	r := NewRegistry()
	var s Cache
	if s.Oldest() != nil || s.Has(nil) || s.Len() != 0 || len(s.Defs()) != 0 {
		t.Fatal("the zero cache is not empty")
	}
	d1, d2, d3 := r.Acquire("q1", nil, 0), r.Acquire("q2", nil, 0), r.Acquire("q3", nil, 0)
	s.Add(r, d1, 0)
	s.Add(r, d2, 0)
	s.Add(r, d3, 0)
	s.Add(r, d3, 0) // already there: no second reference
	if !s.Has(d1) { // touches d1
		t.Fatal("d1 missing")
	}
	if s.Oldest() != d2 {
		t.Fatalf("LRU order wrong: oldest %s", s.Oldest().Query)
	}
	if s.Shown() != 3 || len(s.Defs()) != 3 {
		t.Fatalf("shown %d, defs %d; want 3", s.Shown(), len(s.Defs()))
	}
	s.Remove(r, d2)
	if s.Has(d2) || s.Holds(d2) || s.Len() != 2 || s.Shown() != 2 {
		t.Fatal("Remove")
	}
	s.Clear(r)
	for _, d := range []*Def{d1, d2, d3} {
		r.Release(d)
	}
	if r.Len() != 0 || s.Len() != 0 || s.Shown() != 0 {
		t.Fatalf("leak: registry %d cache %d", r.Len(), s.Len())
	}
}

// A server's refusal of a statement's plan bumps its shape epoch once:
// every server's copy parsed before is stale (prepared again at its next
// use), a second server's report of the same migration does not bump it
// again, and a client name from before is no longer current.
func TestCacheShapeEpoch(t *testing.T) {
	r := NewRegistry()
	d := r.Acquire("SELECT * FROM t", nil, 0)
	var a, b, none Cache
	a.Add(r, d, d.Epoch())
	b.Add(r, d, d.Epoch())
	name := NewClientStmt(d)
	if none.MarkStale(d) || d.Epoch() != 0 {
		t.Fatal("a server without the statement bumped its epoch")
	}
	if !a.MarkStale(d) {
		t.Fatal("the first report did not bump the epoch")
	}
	if a.Has(d) || b.Has(d) || !a.IsStale(d) || !b.IsStale(d) || !a.Holds(d) || !b.Holds(d) {
		t.Fatal("a copy from before the bump is usable")
	}
	if e, ok := b.CopyEpoch(d); !ok || e != 0 {
		t.Fatalf("b's copy: epoch %d, %v; want 0, true", e, ok)
	}
	if b.MarkStale(d) || d.Epoch() != 1 {
		t.Fatalf("a second report of the same migration bumped the epoch to %d", d.Epoch())
	}
	if name.Current() {
		t.Fatal("a name from before the bump is current")
	}
	name.Learned(0) // an older shape teaches nothing
	if name.Current() {
		t.Fatal("a name taught an older shape is current")
	}
	name.Learned(d.Epoch())
	if !name.Current() || !NewClientStmt(d).Current() {
		t.Fatal("a name brought up to date is not current")
	}
	a.Remove(r, d)
	a.Add(r, d, d.Epoch()) // prepared again
	if !a.Has(d) || b.Has(d) {
		t.Fatal("after a prepared again: only a's copy is usable")
	}
	a.Clear(r)
	b.Clear(r)
	r.Release(d)
	if r.Len() != 0 {
		t.Fatalf("leak: registry %d", r.Len())
	}
}
