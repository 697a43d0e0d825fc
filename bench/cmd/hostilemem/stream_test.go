//go:build linux

package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestStreamFraming checks that each case's streamed bytes, at a small size
// and a chunk that does not divide it, decode as the intended messages.
func TestStreamFraming(t *testing.T) {
	const size = 10
	xs := strings.Repeat("x", size)
	want := map[string][]pgproto3.FrontendMessage{
		"parse-named": {&pgproto3.Parse{Name: "huge", Query: "SELECT length('" + xs + "')", ParameterOIDs: []uint32{}}, &pgproto3.Sync{}},
		"parse-unnamed": {&pgproto3.Parse{Query: "SELECT length('" + xs + "')", ParameterOIDs: []uint32{}},
			&pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{}},
		"describe":      {&pgproto3.Describe{ObjectType: 'S', Name: xs}, &pgproto3.Sync{}},
		"close":         {&pgproto3.Close{ObjectType: 'S', Name: xs}, &pgproto3.Sync{}},
		"console-admin": {&pgproto3.Query{String: "SHOW " + xs}},
		"console-stats": {&pgproto3.Query{String: "SHOW " + xs}},
	}
	for _, c := range cases() {
		var buf bytes.Buffer
		n, err := c.stream(&buf, size, []byte("xxx"))
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		if n != c.msgLen(size)+1 {
			t.Errorf("%s: wrote %d bytes of the message, want %d", c.key, n, c.msgLen(size)+1)
		}
		var exp []byte
		for _, m := range want[c.key] {
			if exp, err = m.Encode(exp); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(buf.Bytes(), exp) {
			t.Errorf("%s:\n got %q\nwant %q", c.key, buf.Bytes(), exp)
		}
	}
}

// TestStreamStops checks that writing stops at the first failed write.
func TestStreamStops(t *testing.T) {
	w := &failAfter{n: 3}
	n, err := cases()[0].stream(w, 100, []byte("xxxxxxxxxx"))
	if err != io.ErrClosedPipe || w.calls != 4 {
		t.Fatalf("err %v after %d writes, want ErrClosedPipe after 4", err, w.calls)
	}
	if n != int64(5+len(cases()[0].head)+20) {
		t.Errorf("counted %d bytes written", n)
	}
}

type failAfter struct{ n, calls int }

func (f *failAfter) Write(b []byte) (int, error) {
	f.calls++
	if f.calls > f.n {
		return 0, io.ErrClosedPipe
	}
	return len(b), nil
}
