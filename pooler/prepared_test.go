package pooler

import (
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/takeover"
	"github.com/pgturnstile/pgturnstile/wire"
)

func TestDeallocateTarget(t *testing.T) {
	cases := []struct {
		in   string
		name string
		ok   bool
	}{
		{"DEALLOCATE s1", "s1", true},
		{"  deallocate   S1 ;\x00", "s1", true},
		{"DEALLOCATE PREPARE stmt_7", "stmt_7", true},
		{`DEALLOCATE "MiXed"`, "MiXed", true},
		{`DEALLOCATE "a""b"`, `a"b`, true},
		{"DEALLOCATE ALL", "", false},
		{"DEALLOCATE PREPARE ALL", "", false},
		{"DEALLOCATE s1; SELECT 1", "", false},
		{"SELECT 'DEALLOCATE s1'", "", false},
		{"DEALLOCATE", "", false},
		{"\t\nDEALLOCATE\ts2", "s2", true},
		{"DEALLOCAT s1", "", false},
		{`DEALLOCATE ""`, "", false},
		{"", "", false},
	}
	for _, c := range cases {
		name, ok := deallocateTarget([]byte(c.in))
		if name != c.name || ok != c.ok {
			t.Errorf("%q: got (%q, %v) want (%q, %v)", c.in, name, ok, c.name, c.ok)
		}
	}
}

func TestStmtRegistryRefcounts(t *testing.T) {
	r := newStmtRegistry()
	a := r.acquire("SELECT 1", nil, 0)
	b := r.acquire("SELECT 1", nil, 0)
	c := r.acquire("SELECT 1", []byte{0, 1, 0, 0, 0, 23}, 0)
	if a != b || a == c || a.name == c.name {
		t.Fatal("definitions must be unique by text and types")
	}
	if r.lookupValidated("SELECT 1", nil) != nil {
		t.Fatal("unvalidated definition answered")
	}
	a.validated.Store(true)
	if d := r.lookupValidated("SELECT 1", nil); d != a {
		t.Fatal("validated definition not found")
	}
	r.release(a) // lookupValidated's reference
	r.release(a)
	r.release(b)
	r.release(c)
	if r.size() != 0 {
		t.Fatalf("registry leaks %d definitions", r.size())
	}
	// A new definition of the same text gets a new server name: names are
	// never reused, so a stale server cache cannot alias another query.
	if d := r.acquire("SELECT 1", nil, 0); d.name == a.name {
		t.Fatal("server name reused")
	}
}

func TestServerStmtsLRU(t *testing.T) {
	r := newStmtRegistry()
	var s serverStmts
	d1, d2, d3 := r.acquire("q1", nil, 0), r.acquire("q2", nil, 0), r.acquire("q3", nil, 0)
	s.add(r, d1, 0)
	s.add(r, d2, 0)
	s.add(r, d3, 0)
	if !s.has(d1) { // touches d1
		t.Fatal("d1 missing")
	}
	if s.oldest() != d2 {
		t.Fatalf("LRU order wrong: oldest %s", s.oldest().query)
	}
	s.remove(r, d2)
	if s.has(d2) || s.len() != 2 {
		t.Fatal("remove")
	}
	s.clear(r)
	for _, d := range []*stmtDef{d1, d2, d3} {
		r.release(d)
	}
	if r.size() != 0 || s.len() != 0 {
		t.Fatalf("leak: registry %d cache %d", r.size(), s.len())
	}
}

func TestOpQueueWraps(t *testing.T) {
	var q opQueue
	for round := 0; round < 5; round++ {
		for i := 0; i < 11; i++ {
			q.push(op{kind: opKind(i%6 + 1), clientName: string(rune('a' + i))})
		}
		for i := 0; i < 11; i++ {
			o := q.pop()
			if o.clientName != string(rune('a'+i)) {
				t.Fatalf("round %d: got %q at %d", round, o.clientName, i)
			}
		}
		if q.peek() != nil {
			t.Fatal("not empty")
		}
	}
	q.push(op{kind: opSync})
	if n := testing.AllocsPerRun(100, func() { q.push(op{kind: opSync}); q.pop() }); n != 0 {
		t.Fatalf("steady state allocates %v", n)
	}
}

// The Parse of an unnamed statement and the names of a Bind, parsed once
// per transaction, are read without a copy.
func TestParseNamesAllocateNothing(t *testing.T) {
	parse := wire.AppendParse(nil, "", "SELECT abalance FROM pgbench_accounts WHERE aid = $1", []byte{0, 1, 0, 0, 0, 23})[5:]
	bind := []byte("\x00PGTS_1\x00\x00\x00")
	stmts := map[string]*stmtDef{"PGTS_1": {}}
	n := testing.AllocsPerRun(100, func() {
		// As relayParse reads an unnamed Parse.
		if name, query, _, ok := wire.DecodeParse(parse); !ok || string(name) != "" || len(query) == 0 {
			t.Fatal("DecodeParse failed")
		}
		// As relayBind finds a Bind's statement.
		portal, stmt, _, ok := wire.DecodeBindHead(bind)
		if !ok || len(portal) != 0 || stmts[string(stmt)] == nil {
			t.Fatal("DecodeBindHead failed")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocs per Parse + Bind names, want 0", n)
	}
}

// Every simple query is checked for DEALLOCATE; the ones that are not
// cost no allocation.
func TestDeallocateTargetOtherQueriesAllocateNothing(t *testing.T) {
	q := []byte("SELECT abalance FROM pgbench_accounts WHERE aid = 42;\x00")
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := deallocateTarget(q); ok {
			t.Fatal("SELECT taken for DEALLOCATE")
		}
	}); n != 0 {
		t.Fatalf("%v allocs per non-DEALLOCATE query, want 0", n)
	}
}

// The registry counts each statement's text once, refuses a new one past
// the budget (prepared_statement_budget), still hands out one it has, and
// gives the bytes back with the last reference.
func TestStmtRegistryBudget(t *testing.T) {
	r := newStmtRegistry()
	types := []byte{0, 1, 0, 0, 0, 23}
	a := r.acquire("SELECT 1", types, 100)
	if a == nil || r.bytes.Load() != int64(len("SELECT 1")+2*len(types)) {
		t.Fatalf("acquire: %v, bytes %d", a, r.bytes.Load())
	}
	used := r.bytes.Load()
	if d := r.acquire("SELECT 1", types, 100); d != a || r.bytes.Load() != used {
		t.Fatalf("second reference: %v, bytes %d", d, r.bytes.Load())
	}
	long := strings.Repeat("x", 100)
	if d := r.acquire(long, nil, 100); d != nil {
		t.Fatalf("over the budget: got %v", d)
	}
	if r.bytes.Load() != used || r.size() != 1 {
		t.Fatalf("a refused statement left %d bytes, %d entries", r.bytes.Load(), r.size())
	}
	if d := r.acquire(long, nil, 0); d == nil {
		t.Fatal("no budget: refused")
	} else {
		r.release(d)
	}
	r.release(a)
	r.release(a)
	if r.bytes.Load() != 0 || r.size() != 0 {
		t.Fatalf("after the last release: %d bytes, %d entries", r.bytes.Load(), r.size())
	}
	if !r.reserveText(50, 100) || r.reserveText(51, 100) || !r.reserveText(50, 100) {
		t.Fatal("reserveText: want 50 and 50 of 100, not 51 between")
	}
}

// A server's refusal of a statement's plan bumps its shape epoch once:
// every server's copy parsed before is stale (prepared again at its next
// use), a second server's report of the same migration does not bump it
// again, and a client name from before is no longer current.
func TestServerStmtsShapeEpoch(t *testing.T) {
	r := newStmtRegistry()
	d := r.acquire("SELECT * FROM t", nil, 0)
	var a, b serverStmts
	a.add(r, d, d.epoch.Load())
	b.add(r, d, d.epoch.Load())
	name := &clientStmt{def: d, epoch: d.epoch.Load()}
	if !a.markStale(d) {
		t.Fatal("the first report did not bump the epoch")
	}
	if a.has(d) || b.has(d) || !a.isStale(d) || !b.isStale(d) || !a.holds(d) || !b.holds(d) {
		t.Fatal("a copy from before the bump is usable")
	}
	if b.markStale(d) || d.epoch.Load() != 1 {
		t.Fatalf("a second report of the same migration bumped the epoch to %d", d.epoch.Load())
	}
	if name.current() {
		t.Fatal("a name from before the bump is current")
	}
	name.learned(d.epoch.Load())
	if !name.current() {
		t.Fatal("a name brought up to date is not current")
	}
	a.remove(r, d)
	a.add(r, d, d.epoch.Load()) // prepared again
	if !a.has(d) || b.has(d) {
		t.Fatal("after a prepared again: only a's copy is usable")
	}
	a.clear(r)
	b.clear(r)
	r.release(d)
	if r.size() != 0 {
		t.Fatalf("leak: registry %d", r.size())
	}
}

// Online restart: a client's name whose description is older than its
// statement's shape stays refused in the new process; a current one stays
// current.
func TestMovedClientStmtKeepsStale(t *testing.T) {
	old := newStmtRegistry()
	d := old.acquire("SELECT * FROM t", nil, 0)
	stale := &clientStmt{def: d, epoch: d.epoch.Load()}
	d.bumpEpoch(0)
	fresh := &clientStmt{def: d, epoch: d.epoch.Load()}

	r := newStmtRegistry()
	a := adoptClientStmt(r, movedClientStmt("fresh", fresh))
	if !a.current() {
		t.Fatal("a current name came over stale")
	}
	b := adoptClientStmt(r, movedClientStmt("stale", stale))
	if b.current() || b.def != a.def {
		t.Fatal("a stale name came over current")
	}
	// The same from a process that does not say (an older one).
	c := adoptClientStmt(r, takeover.Stmt{Name: "s", Query: "SELECT 2"})
	if !c.current() {
		t.Fatal("a name without stale came over stale")
	}
}
