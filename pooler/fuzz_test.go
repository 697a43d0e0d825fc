package pooler

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/wire"
)

// FuzzClientMessageNames feeds arbitrary simple-query bodies to
// deallocateTarget, which reads every client Query on the relay path when
// prepared statements are mapped: it may not panic nor take an empty name.
// (The Parse and Bind decoders it also fed are wire's, fuzzed there.)
func FuzzClientMessageNames(f *testing.F) {
	f.Add(wire.AppendParse(nil, "s1", "SELECT $1", []byte{0, 1, 0, 0, 0, 23})[5:])
	f.Add(wire.AppendParse(nil, "", "SELECT 1", nil)[5:])
	f.Add([]byte("DEALLOCATE PREPARE \"a\"\"b\";\x00"))
	f.Add([]byte("\x00PGTS_1\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if name, ok := deallocateTarget(body); ok && name == "" {
			t.Fatalf("deallocateTarget(%q) accepted an empty name", body)
		}
	})
}
