package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/jackc/pgx/v5/pgproto3"
)

// packet frames an untyped startup-phase packet: length, code, rest.
func packet(code uint32, rest string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(rest)))
	b = binary.BigEndian.AppendUint32(b, code)
	return append(b, rest...)
}

func TestReadStartupMessage(t *testing.T) {
	params := []Param{
		{"user", "alice"},
		{"database", "app"},
		{"application_name", ""},
		{"options", "-c search_path=x"},
		{"_pq_.some_option", "on"},
		{"user", "dup"}, // kept in order; Get returns the first
	}
	pkt := AppendStartup(nil, params)
	for _, name := range []string{"whole", "onebyte"} {
		var rd io.Reader = bytes.NewReader(pkt)
		if name == "onebyte" {
			rd = iotest.OneByteReader(rd)
		}
		s, err := ReadStartup(rd)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Kind != StartupMessage || s.Major != 3 || s.Minor != 0 {
			t.Fatalf("%s: kind %v version %d.%d", name, s.Kind, s.Major, s.Minor)
		}
		if !reflect.DeepEqual(s.Params, params) {
			t.Fatalf("%s: params = %q, want %q", name, s.Params, params)
		}
		if v, ok := s.Get("user"); !ok || v != "alice" {
			t.Fatalf("Get(user) = %q %v", v, ok)
		}
		if v, ok := s.Get("application_name"); !ok || v != "" {
			t.Fatalf("Get(application_name) = %q %v", v, ok)
		}
		if _, ok := s.Get("missing"); ok {
			t.Fatal("Get(missing) found something")
		}
	}
	// Nothing beyond the packet is consumed.
	rd := bytes.NewReader(append(AppendStartup(nil, params[:1]), 'Q'))
	if _, err := ReadStartup(rd); err != nil {
		t.Fatal(err)
	}
	if rd.Len() != 1 {
		t.Fatalf("ReadStartup left %d bytes, want 1", rd.Len())
	}
}

func TestStartupCrossCheckPgproto3(t *testing.T) {
	// pgproto3 encodes, we decode.
	for _, v := range []uint32{pgproto3.ProtocolVersion30, pgproto3.ProtocolVersion32} {
		sm := &pgproto3.StartupMessage{ProtocolVersion: v, Parameters: map[string]string{"user": "bob", "database": "db", "client_encoding": "UTF8"}}
		pkt, err := sm.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ReadStartup(bytes.NewReader(pkt))
		if err != nil {
			t.Fatalf("version %x: %v", v, err)
		}
		if uint32(s.Major)<<16|uint32(s.Minor) != v || len(s.Params) != 3 {
			t.Fatalf("version %x: got %d.%d with %d params", v, s.Major, s.Minor, len(s.Params))
		}
		for k, want := range sm.Parameters {
			if got, _ := s.Get(k); got != want {
				t.Fatalf("%s = %q, want %q", k, got, want)
			}
		}
	}
	// We encode, pgproto3 decodes.
	pkt := AppendStartup(nil, []Param{{"user", "carol"}, {"database", "x"}})
	var sm pgproto3.StartupMessage
	if err := sm.Decode(pkt[4:]); err != nil {
		t.Fatal(err)
	}
	if sm.ProtocolVersion != pgproto3.ProtocolVersion30 || sm.Parameters["user"] != "carol" || sm.Parameters["database"] != "x" || len(sm.Parameters) != 2 {
		t.Fatalf("pgproto3 decoded %+v", sm)
	}
	// CancelRequest both ways.
	key := [8]byte{0, 0, 0x30, 0x39, 0xde, 0xad, 0xbe, 0xef}
	cr := AppendCancelRequest(nil, key[:])
	var pc pgproto3.CancelRequest
	if err := pc.Decode(cr[4:]); err != nil || pc.ProcessID != 12345 || !bytes.Equal(pc.SecretKey, key[4:]) {
		t.Fatalf("pgproto3 CancelRequest = %+v, %v", pc, err)
	}
	enc, _ := (&pgproto3.CancelRequest{ProcessID: 12345, SecretKey: key[4:]}).Encode(nil)
	s, err := ReadStartup(bytes.NewReader(enc))
	if err != nil || s.Kind != CancelRequest || s.CancelKey != key {
		t.Fatalf("CancelRequest from pgproto3 = %+v, %v", s, err)
	}
}

func TestReadStartupRequests(t *testing.T) {
	ssl, _ := (&pgproto3.SSLRequest{}).Encode(nil)
	gss, _ := (&pgproto3.GSSEncRequest{}).Encode(nil)
	key := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	cases := []struct {
		name string
		pkt  []byte
		want Startup
	}{
		{"ssl", ssl, Startup{Kind: SSLRequest}},
		{"gss", gss, Startup{Kind: GSSENCRequest}},
		{"cancel", AppendCancelRequest(nil, key[:]), Startup{Kind: CancelRequest, CancelKey: key}},
		{"3.2", packet(3<<16|2, "user\x00u\x00\x00"), Startup{Kind: StartupMessage, Major: 3, Minor: 2, Params: []Param{{"user", "u"}}}},
		{"3.9 negotiated later", packet(3<<16|9, "\x00"), Startup{Kind: StartupMessage, Major: 3, Minor: 9}},
		{"no params", packet(3<<16, "\x00"), Startup{Kind: StartupMessage, Major: 3}},
	}
	for _, tc := range cases {
		s, err := ReadStartup(bytes.NewReader(tc.pkt))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(*s, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, *s, tc.want)
		}
	}
}

func TestReadStartupErrors(t *testing.T) {
	lenOnly := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	cases := []struct {
		name string
		pkt  []byte
		want string // substring of the StartupError message; "" for non-StartupError
		err  error  // exact error when want is ""
	}{
		{"empty", nil, "", io.EOF},
		{"partial length", []byte{0, 0}, "", io.ErrUnexpectedEOF},
		{"truncated body", packet(3<<16, "user\x00u\x00\x00")[:12], "", io.ErrUnexpectedEOF},
		{"length 0", lenOnly(0), "bad length", nil},
		{"length 7", lenOnly(7), "bad length", nil},
		{"length 10001", lenOnly(10001), "bad length", nil},
		{"length 2^32-1", lenOnly(0xffffffff), "bad length", nil},
		{"protocol 2", packet(2<<16, "user\x00u\x00\x00"), "old V2 protocol", nil},
		{"protocol 1.0", packet(1<<16, ""), "old V2 protocol", nil},
		{"protocol 4.0", packet(4<<16, "\x00"), "unsupported frontend protocol 4.0", nil},
		{"unknown request code", packet(1234<<16|5681, ""), "unsupported frontend protocol 1234.5681", nil},
		{"missing terminator", packet(3<<16, "user\x00u\x00"), "expected terminator", nil},
		{"empty body", packet(3<<16, ""), "expected terminator", nil},
		{"odd params", packet(3<<16, "user\x00u\x00database\x00"), "missing value for database", nil},
		{"odd params, empty value eats terminator", packet(3<<16, "user\x00u\x00database\x00\x00"), "expected terminator", nil},
		{"unterminated name", packet(3<<16, "user"), "unterminated name", nil},
		{"garbage after terminator", packet(3<<16, "user\x00u\x00\x00junk"), "expected terminator as last byte", nil},
		{"two terminators", packet(3<<16, "\x00\x00"), "expected terminator as last byte", nil},
		{"cancel short", packet(cancelRequestCode, "1234567"), "invalid cancel request length", nil},
		{"cancel long", packet(cancelRequestCode, "123456789"), "invalid cancel request length", nil},
	}
	for _, tc := range cases {
		s, err := ReadStartup(bytes.NewReader(tc.pkt))
		if s != nil || err == nil {
			t.Errorf("%s: got %+v, %v; want an error", tc.name, s, err)
			continue
		}
		var se *StartupError
		if tc.want == "" {
			if err != tc.err {
				t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if !errors.As(err, &se) || !strings.Contains(se.Message, tc.want) {
			t.Errorf("%s: err = %v, want StartupError containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadStartup(bytes.NewReader(packet(2<<16, ""))); err != ErrOldProtocol {
		t.Errorf("protocol 2: err = %v, want ErrOldProtocol", err)
	}
	// The limits themselves are accepted.
	if _, err := ReadStartup(bytes.NewReader(packet(sslRequestCode, ""))); err != nil {
		t.Errorf("8-byte packet: %v", err)
	}
	long := packet(3<<16, "options\x00"+strings.Repeat("x", 10000-8-10)+"\x00\x00")
	if len(long) != 10000 {
		t.Fatalf("test packet is %d bytes", len(long))
	}
	if s, err := ReadStartup(bytes.NewReader(long)); err != nil || len(s.Params) != 1 {
		t.Errorf("10000-byte packet: %v", err)
	}
}

func TestAppendStartupRoundTrip(t *testing.T) {
	for _, params := range [][]Param{
		nil,
		{{"user", "u"}},
		{{"user", "ü"}, {"database", "d b"}, {"application_name", ""}, {"options", "-c a=b -c c=d"}},
	} {
		dst := []byte("prefix")
		pkt := AppendStartup(dst, params)
		if !bytes.HasPrefix(pkt, []byte("prefix")) {
			t.Fatal("AppendStartup clobbered dst")
		}
		pkt = pkt[len("prefix"):]
		if n := binary.BigEndian.Uint32(pkt); int(n) != len(pkt) {
			t.Fatalf("length field %d, packet %d", n, len(pkt))
		}
		s, err := ParseStartup(pkt[4:])
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Params) != len(params) || (len(params) > 0 && !reflect.DeepEqual(s.Params, params)) {
			t.Fatalf("round trip: %q, want %q", s.Params, params)
		}
	}
}

func TestAppendSSLRequest(t *testing.T) {
	want, _ := (&pgproto3.SSLRequest{}).Encode(nil)
	got := AppendSSLRequest(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("SSLRequest % x, want % x", got, want)
	}
	if s, err := ReadStartup(bytes.NewReader(got)); err != nil || s.Kind != SSLRequest {
		t.Fatalf("ReadStartup: %+v %v", s, err)
	}
}
