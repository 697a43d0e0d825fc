package stmtcache

import (
	"testing"

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
		name, ok := DeallocateTarget([]byte(c.in))
		if name != c.name || ok != c.ok {
			t.Errorf("%q: got (%q, %v) want (%q, %v)", c.in, name, ok, c.name, c.ok)
		}
	}
}

// Every simple query is checked for DEALLOCATE; the ones that are not
// cost no allocation.
func TestDeallocateTargetOtherQueriesAllocateNothing(t *testing.T) {
	q := []byte("SELECT abalance FROM pgbench_accounts WHERE aid = 42;\x00")
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := DeallocateTarget(q); ok {
			t.Fatal("SELECT taken for DEALLOCATE")
		}
	}); n != 0 {
		t.Fatalf("%v allocs per non-DEALLOCATE query, want 0", n)
	}
}

// FuzzDeallocateTarget feeds arbitrary simple-query bodies to
// DeallocateTarget, which reads every client Query on the relay path when
// prepared statements are mapped: it may not panic nor take an empty name.
// (The Parse and Bind decoders an earlier form of it also fed are wire's,
// fuzzed there; its seeds stay.)
func FuzzDeallocateTarget(f *testing.F) {
	f.Add(wire.AppendParse(nil, "s1", "SELECT $1", []byte{0, 1, 0, 0, 0, 23})[5:])
	f.Add(wire.AppendParse(nil, "", "SELECT 1", nil)[5:])
	f.Add([]byte("DEALLOCATE PREPARE \"a\"\"b\";\x00"))
	f.Add([]byte("\x00PGTS_1\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if name, ok := DeallocateTarget(body); ok && name == "" {
			t.Fatalf("DeallocateTarget(%q) accepted an empty name", body)
		}
	})
}
