package pooler

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/wire"
)

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
	stmts := map[string]*stmtcache.Def{"PGTS_1": {}}
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
