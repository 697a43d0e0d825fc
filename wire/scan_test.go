package wire

import (
	"bytes"
	"io"
	"testing"
)

// Scan tells a whole request or reply from part of one, a pipelined one
// and one the loop does not run.
func TestScan(t *testing.T) {
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	p, b, e, s := frame(MsgParse, []byte("\x00SELECT 1\x00\x00\x00")), frame(MsgBind, make([]byte, 8)), frame(MsgExecute, make([]byte, 5)), frame(MsgSync, nil)
	z := frame(MsgReadyForQuery, []byte("I"))
	cases := []struct {
		name  string
		in    []byte
		role  func(byte) Role
		alone bool
		want  ScanResult
	}{
		{"extended request", cat(p, b, e, s), RequestRole, true, ScanWhole},
		{"no Sync yet", cat(p, b, e), RequestRole, true, ScanPartial},
		{"half a message", cat(p, b, e, s)[:20], RequestRole, true, ScanPartial},
		{"pipelined", cat(p, b, e, s, p), RequestRole, true, ScanOther},
		{"Terminate", frame('X', nil), RequestRole, true, ScanOther},
		{"query", frame(MsgQuery, []byte("SELECT 1\x00")), RequestRole, true, ScanWhole},
		{"reply", cat(frame(MsgCommandComplete, []byte("SELECT 1\x00")), z, z), ReplyRole, false, ScanWhole},
		{"COPY in a reply", cat(frame('G', []byte{0, 0, 0}), z), ReplyRole, false, ScanOther},
		{"bad length", []byte{MsgQuery, 0, 0, 0, 1}, RequestRole, true, ScanOther},
	}
	for _, tc := range cases {
		r := NewReader(&tryChunks{data: tc.in, sizes: []byte{255}}, 256)
		if _, err := r.FillNow(false); err != nil {
			t.Fatalf("%s: FillNow: %v", tc.name, err)
		}
		if got := r.Scan(tc.role, tc.alone); got != tc.want {
			t.Errorf("%s: Scan = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestFillNowHangUp: a short read is drained unless the caller was told of
// a hang-up: then a read that got bytes is not, and the next meets the end.
func TestFillNowHangUp(t *testing.T) {
	for _, hup := range []bool{false, true} {
		r := NewReader(&tryChunks{data: frame(MsgQuery, []byte("SELECT 1\x00")), sizes: []byte{255}}, 256)
		drained, err := r.FillNow(hup)
		if err != nil || drained == hup {
			t.Fatalf("hup %v: first FillNow = drained %v, %v; want drained %v", hup, drained, err, !hup)
		}
		if r.Buffered() != 14 {
			t.Fatalf("hup %v: %d bytes buffered, want 14", hup, r.Buffered())
		}
		if hup {
			if _, err := r.FillNow(hup); err != io.EOF {
				t.Fatalf("second FillNow after a hang-up: %v, want EOF", err)
			}
		}
	}
}
