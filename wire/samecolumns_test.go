package wire

import (
	"encoding/binary"
	"testing"
)

// column is one field of a RowDescription.
type column struct {
	name   string
	table  uint32
	attnum uint16
	typ    uint32
	size   int16
	mod    int32
	format uint16
}

func rowDescription(cols ...column) []byte {
	body := binary.BigEndian.AppendUint16(nil, uint16(len(cols)))
	for _, c := range cols {
		body = append(append(body, c.name...), 0)
		body = binary.BigEndian.AppendUint32(body, c.table)
		body = binary.BigEndian.AppendUint16(body, c.attnum)
		body = binary.BigEndian.AppendUint32(body, c.typ)
		body = binary.BigEndian.AppendUint16(body, uint16(c.size))
		body = binary.BigEndian.AppendUint32(body, uint32(c.mod))
		body = binary.BigEndian.AppendUint16(body, c.format)
	}
	return append(AppendHeader(nil, MsgRowDescription, len(body)), body...)
}

// TestSameColumns: a scatter's shards describe the same table with their
// own table OIDs (and their own OIDs for types made in each database);
// names, built-in types, sizes, modifiers and formats must match.
func TestSameColumns(t *testing.T) {
	orgID := column{"org_id", 16390, 1, 20, 8, -1, 0}
	name := column{"name", 16390, 2, 25, -1, -1, 0}
	a := rowDescription(orgID, name)
	other := func(edit func(*column)) []byte {
		c := name
		edit(&c)
		return rowDescription(orgID, c)
	}
	for _, c := range []struct {
		what string
		b    []byte
		same bool
	}{
		{"itself", a, true},
		{"another table OID and column number", rowDescription(column{"org_id", 24576, 3, 20, 8, -1, 0}, column{"name", 24576, 4, 25, -1, -1, 0}), true},
		{"another name", other(func(c *column) { c.name = "nome" }), false},
		{"another built-in type", other(func(c *column) { c.typ = 1043 }), false},
		{"a built-in type against a user type", other(func(c *column) { c.typ = 16500 }), false},
		{"another modifier", other(func(c *column) { c.mod = 14 }), false},
		{"another format", other(func(c *column) { c.format = 1 }), false},
		{"another size", other(func(c *column) { c.size = 4 }), false},
		{"one column", rowDescription(orgID), false},
		{"not a RowDescription", append([]byte{MsgDataRow}, a[1:]...), false},
		{"torn", a[:len(a)-3], false},
	} {
		if got := SameColumns(a, c.b); got != c.same {
			t.Errorf("%s: SameColumns = %v, want %v", c.what, got, c.same)
		}
	}
	// Types made in each database (an enum): their OIDs differ.
	e1 := rowDescription(column{"kind", 16390, 5, 16401, 4, -1, 0})
	e2 := rowDescription(column{"kind", 24576, 5, 24590, 4, -1, 0})
	if !SameColumns(e1, e2) {
		t.Error("an enum column of each database's own type: not the same")
	}
	// A count that promises more fields than there are bytes.
	bad := append([]byte(nil), a...)
	binary.BigEndian.PutUint16(bad[5:], 3)
	if SameColumns(bad, bad) {
		t.Error("a RowDescription with a field count past its end is the same as itself")
	}
}

// FuzzSameColumns: no panic on any pair (the shards' bytes are
// untrusted), and the answer does not depend on their order.
func FuzzSameColumns(f *testing.F) {
	f.Add(rowDescription(column{"a", 1, 1, 23, 4, -1, 0}), rowDescription(column{"a", 2, 1, 23, 4, -1, 0}))
	f.Add([]byte("T\x00\x00\x00\x06\x00\x00"), []byte("T\x00\x00\x00\x06\x00\x01"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if SameColumns(a, b) != SameColumns(b, a) {
			t.Fatalf("not symmetric: %q %q", a, b)
		}
	})
}
