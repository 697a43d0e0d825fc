//go:build !windows

package takeover

import (
	"encoding/binary"
	"testing"
)

// testRowDescription and testDataRow build what the console sends for
// SHOW FDS, by hand, so that the takeover's reader is checked against the
// protocol rather than against admin's writer.
func testRowDescription(names ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(names)))
	for _, n := range names {
		b = append(b, n...)
		b = append(b, 0)
		b = append(b, make([]byte, 18)...) // table oid, column, type oid, size, modifier, format
	}
	return b
}

func testDataRow(vals ...*string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(vals)))
	for _, v := range vals {
		if v == nil {
			b = binary.BigEndian.AppendUint32(b, 0xFFFFFFFF)
			continue
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(*v)))
		b = append(b, *v...)
	}
	return b
}

func strp(s string) *string { return &s }

func TestTakeoverRowParsing(t *testing.T) {
	names := rowDescriptionNames(testRowDescription("fd", "task", "user", "pgturnstile_state"))
	if len(names) != 4 || names[1] != "task" || names[3] != "pgturnstile_state" {
		t.Fatalf("names = %q", names)
	}
	row := rowValues(names, testDataRow(strp("7"), strp("client"), nil, strp(`{"key":"0102"}`)))
	if row["fd"] != "7" || row["task"] != "client" || row["pgturnstile_state"] != `{"key":"0102"}` {
		t.Errorf("row = %q", row)
	}
	if _, ok := row["user"]; ok {
		t.Errorf("a NULL user came through as %q", row["user"])
	}
	// An ErrorResponse's message.
	body := []byte("SERROR\x00C08P01\x00Malready suspended/paused\x00\x00")
	if got := errorMessage(body); got != "already suspended/paused" {
		t.Errorf("error message = %q", got)
	}
}

// FuzzTakeoverRows: whatever the old process sends, the reader neither
// panics nor reads past the message.
func FuzzTakeoverRows(f *testing.F) {
	f.Add(testRowDescription("fd", "task"), testDataRow(strp("1"), strp("pooler")))
	f.Add([]byte{0, 5, 'a'}, []byte{0, 2, 0, 0, 0, 9, 'x'})
	f.Add([]byte{}, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, desc, row []byte) {
		names := rowDescriptionNames(desc)
		_ = rowValues(names, row)
		_ = errorMessage(row)
	})
}
