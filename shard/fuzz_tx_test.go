package shard

import (
	"bytes"
	"testing"
)

// FuzzReadTxControl: any text reads without a panic, and a text the
// pooler would answer itself is one statement of transaction control:
// never one that hides another statement after a ';'.
func FuzzReadTxControl(f *testing.F) {
	for _, s := range []string{"BEGIN", "begin isolation level serializable, read only", "START TRANSACTION;",
		"COMMIT AND NO CHAIN", "rollback to savepoint a", "SAVEPOINT \"x\"", "SET LOCAL a = 1",
		"BEGIN; DROP TABLE t", "SET LOCAL a = 1; DROP TABLE t", "/* c */ begin -- x", "begin 'x", "ROLLBACK TO", "release"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, sql []byte) {
		kind, _ := ReadTxControl(sql)
		if _, found, _ := ReadSet(sql); (kind != TxNone || found) && !MaybeControl(sql) {
			t.Fatalf("%q is control (%v) but MaybeControl says no", sql, kind)
		}
		if kind == TxNone {
			return
		}
		lx := lexer{src: sql}
		semi := false
		for {
			tok := lx.next()
			if tok.kind == tokEOF {
				break
			}
			if semi {
				t.Fatalf("%q read as %v with a statement after its ';'", sql, kind)
			}
			semi = tok.kind == tokPunct && sql[tok.start] == ';'
		}
	})
}

// FuzzScatterable: no panic; a text it lets scatter starts with SELECT
// or COPY, returns rows (ReturnsRows), and names none of the words that
// make per-shard answers wrong.
func FuzzScatterable(f *testing.F) {
	for _, s := range []string{"SELECT * FROM t", "SELECT count(*) FROM t", "COPY t TO STDOUT",
		"copy (select * from t) to stdout with (format csv)", "SELECT * FROM t ORDER BY 1",
		"SELECT $$ order $$ FROM t", "SELECT 'limit' FROM t", "SELECT \"group\" FROM t"} {
		f.Add([]byte(s))
	}
	f.Add([]byte("UPDATE t SET a = 1 RETURNING a"))
	f.Fuzz(func(t *testing.T, sql []byte) {
		k := Scatterable(sql)
		// A text that would run on each database in turn (shard=all)
		// returns no rows: what scatters is a read, which does.
		if rr := ReturnsRows(sql); k != ScatterNone && !rr {
			t.Fatalf("%q scatters but returns no rows", sql)
		}
		if k == ScatterNone {
			return
		}
		lx := lexer{src: sql}
		for {
			tok := lx.next()
			if tok.kind == tokEOF {
				break
			}
			if tok.kind == tokIdent && refusedInScatter[string(bytes.ToLower(sql[tok.start:tok.end]))] {
				t.Fatalf("%q scatters with %q in it", sql, sql[tok.start:tok.end])
			}
		}
	})
}
