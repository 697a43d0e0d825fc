package pooler

import (
	"bytes"
	"testing"
)

// FuzzClientMessageNames feeds arbitrary bodies to the parsers that read
// client Parse, Bind and simple-query bodies on the relay path: none may
// panic, and a Parse body they accept is rebuilt exactly from its parts.
func FuzzClientMessageNames(f *testing.F) {
	f.Add(appendParse(nil, "s1", "SELECT $1", []byte{0, 1, 0, 0, 0, 23})[5:])
	f.Add(appendParse(nil, "", "SELECT 1", nil)[5:])
	f.Add([]byte("DEALLOCATE PREPARE \"a\"\"b\";\x00"))
	f.Add([]byte("\x00PGTS_1\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if name, query, types, ok := parseParse(body); ok {
			if types == nil {
				types = []byte{0, 0}
			}
			if got := appendParse(nil, name, string(query), types)[5:]; !bytes.Equal(got, body) {
				t.Fatalf("parseParse(%q) = %q %q %v, rebuilt as %q", body, name, query, types, got)
			}
		}
		if name, ok := deallocateTarget(body); ok && name == "" {
			t.Fatalf("deallocateTarget(%q) accepted an empty name", body)
		}
		if portal, n, ok := cbytes(body); ok {
			if bytes.IndexByte(portal, 0) >= 0 || n != len(portal)+1 || n > len(body) {
				t.Fatalf("cbytes(%q) = %q, %d", body, portal, n)
			}
		}
	})
}
