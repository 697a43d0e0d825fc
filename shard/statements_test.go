package shard

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
)

// A statement prepared by many sessions is one Statement: the pooler's
// clients read one copy, which stays in cache.
func TestStatementShared(t *testing.T) {
	c := exampleCluster(t, nil)
	sql := `SELECT * FROM files WHERE org_id = $1`
	var wg sync.WaitGroup
	got := make([]*Statement, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = NewRouter(c).Statement([]byte(sql), false)
		}()
	}
	wg.Wait()
	for i, st := range got {
		if st != got[0] {
			t.Fatalf("session %d got its own Statement", i)
		}
	}
	st := got[0]
	if st.Text != sql || st.Tx != TxNone || !st.Decision.Pending || st.Prepared == nil {
		t.Fatalf("statement %+v", st)
	}
	d, err := st.Prepared.Bind(params{{binary.BigEndian.AppendUint64(nil, 77), true}})
	if err != nil || d.Database != orgDB(c, 77) {
		t.Fatalf("Bind: %+v %v, want %s", d, err, orgDB(c, 77))
	}
	// A user who may target shards reads hints another user's statement
	// does not: not the same Statement.
	if NewRouter(c).Statement([]byte(sql), true) == st {
		t.Fatal("mayTarget shares the other users' Statement")
	}
}

// The session setting the router scans by (standard_conforming_strings
// off) and pins give a statement of the session's own.
func TestStatementNotSharedUnderSessionSettings(t *testing.T) {
	c := exampleCluster(t, nil)
	sql := []byte(`SELECT * FROM files WHERE org_id = 5 AND name = 'a\'`)
	shared := NewRouter(c).Statement(sql, false)
	r := NewRouter(c)
	r.SetEscapeStrings(true)
	own := r.Statement(sql, false)
	if own == shared {
		t.Fatal("an escape-strings session shares the Statement")
	}
	if r.Statement(sql, false) == own {
		t.Fatal("an escape-strings session's Statement was shared")
	}
	pinned := NewRouter(c).PrepareStatement([]byte(`SELECT 1`), Pin{Shard: "db0"}, true)
	if pinned == NewRouter(c).Statement([]byte(`SELECT 1`), true) {
		t.Fatal("a pinned session's Statement is the shared one")
	}
}

// A refusal's table is the Statement's own copy: the scanner's memory is
// reused by the next statement it scans.
func TestStatementRefusalKeepsTable(t *testing.T) {
	c := exampleCluster(t, nil)
	r := NewRouter(c)
	st := r.Statement([]byte(`SELECT * FROM files WHERE org_id = $1 OR org_id = $2`), false)
	if !st.Decision.Refused() || string(st.Decision.Table) != "files" {
		t.Fatalf("decision %+v", st.Decision)
	}
	r.Route([]byte(`SELECT * FROM orgs WHERE name = 'xxxxx'`), Pin{}, false)
	if string(st.Decision.Table) != "files" {
		t.Fatalf("table became %q", st.Decision.Table)
	}
}

// Past the bound a statement is its session's alone, and still right.
func TestStatementsBounded(t *testing.T) {
	c := exampleCluster(t, nil)
	r := NewRouter(c)
	for i := range maxStatements + 10 {
		r.Statement(fmt.Appendf(nil, "SELECT %d FROM files WHERE org_id = $1", i), false)
	}
	n := len(c.statements.m[0]) + len(c.statements.m[1])
	if n != maxStatements {
		t.Fatalf("%d shared statements, bound %d", n, maxStatements)
	}
	sql := []byte(`SELECT 'beyond' FROM files WHERE org_id = $1`)
	a, b := r.Statement(sql, false), r.Statement(sql, false)
	if a == b || !a.Decision.Pending || a.Prepared == nil {
		t.Fatalf("beyond the bound: %+v %+v", a, b)
	}
}

func TestStatementTxControl(t *testing.T) {
	c := exampleCluster(t, nil)
	st := NewRouter(c).Statement([]byte(`BEGIN`), false)
	if st.Tx != TxBegin || st.Decision.Source != SourceDefault || st.Prepared != nil {
		t.Fatalf("%+v", st)
	}
}
