package wire

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// decodeBackend frames msg with a Reader (checking it is exactly one message
// of type typ) and decodes the body with pgproto3's decoder into into.
func decodeBackend(t *testing.T, msg []byte, typ byte, into interface{ Decode([]byte) error }) {
	t.Helper()
	r := NewReader(bytes.NewReader(msg), 4096)
	gt, n, err := r.Next()
	if err != nil || gt != typ {
		t.Fatalf("Next = %q, %v; want %q", gt, err, typ)
	}
	body, err := r.Body()
	if err != nil || len(body) != n {
		t.Fatal(err)
	}
	if r.Buffered() != 0 {
		t.Fatalf("%d bytes after the message: length field wrong", r.Buffered())
	}
	if err := into.Decode(body); err != nil {
		t.Fatalf("pgproto3 decode %q: %v", typ, err)
	}
}

func TestEncodersCrossCheck(t *testing.T) {
	pre := []byte("xx") // encoders append; the prefix must survive

	t.Run("ErrorResponse", func(t *testing.T) {
		msg := AppendErrorResponse(pre, MsgErrorResponse, "FATAL", "08P01", "no more connections allowed (max_client_conn)", "some detail", "a hint")
		if !bytes.HasPrefix(msg, pre) {
			t.Fatal("prefix lost")
		}
		var e pgproto3.ErrorResponse
		decodeBackend(t, msg[2:], 'E', &e)
		if e.Severity != "FATAL" || e.SeverityUnlocalized != "FATAL" || e.Code != "08P01" ||
			e.Message != "no more connections allowed (max_client_conn)" || e.Detail != "some detail" || e.Hint != "a hint" {
			t.Fatalf("decoded %+v", e)
		}
		// Optional fields are left out, not sent empty.
		msg = AppendErrorResponse(nil, MsgNoticeResponse, "WARNING", "01000", "careful", "", "")
		var n pgproto3.NoticeResponse
		decodeBackend(t, msg, 'N', &n)
		if n.Severity != "WARNING" || n.Code != "01000" || n.Message != "careful" || n.Detail != "" || n.Hint != "" {
			t.Fatalf("decoded %+v", n)
		}
		if bytes.Contains(msg, []byte("D\x00")) || bytes.Contains(msg, []byte("H\x00")) {
			t.Fatalf("empty optional field encoded: %q", msg)
		}
		// Our own decoder agrees.
		f, err := ParseErrorResponse(msg[5:])
		if err != nil || f != (ErrorFields{Severity: "WARNING", Code: "01000", Message: "careful"}) {
			t.Fatalf("ParseErrorResponse = %+v, %v", f, err)
		}
	})
	t.Run("ReadyForQuery", func(t *testing.T) {
		for _, st := range []byte{TxIdle, TxInBlock, TxFailed} {
			var z pgproto3.ReadyForQuery
			msg := AppendReadyForQuery(nil, st)
			decodeBackend(t, msg, 'Z', &z)
			if z.TxStatus != st {
				t.Fatalf("status %q decoded as %q", st, z.TxStatus)
			}
			want, _ := (&pgproto3.ReadyForQuery{TxStatus: st}).Encode(nil)
			if !bytes.Equal(msg, want) {
				t.Fatalf("%q != pgproto3 %q", msg, want)
			}
		}
	})
	t.Run("AuthenticationOk", func(t *testing.T) {
		var a pgproto3.AuthenticationOk
		decodeBackend(t, AppendAuthenticationOk(nil), 'R', &a)
		want, _ := (&pgproto3.AuthenticationOk{}).Encode(nil)
		if !bytes.Equal(AppendAuthenticationOk(nil), want) {
			t.Fatal("differs from pgproto3")
		}
	})
	t.Run("ParameterStatus", func(t *testing.T) {
		var p pgproto3.ParameterStatus
		msg := AppendParameterStatus(nil, "server_version", "17.2 (pgturnstile)")
		decodeBackend(t, msg, 'S', &p)
		if p.Name != "server_version" || p.Value != "17.2 (pgturnstile)" {
			t.Fatalf("decoded %+v", p)
		}
		name, value, err := ParseParameterStatus(msg[5:])
		if err != nil || string(name) != "server_version" || string(value) != "17.2 (pgturnstile)" {
			t.Fatalf("ParseParameterStatus = %q %q %v", name, value, err)
		}
	})
	t.Run("BackendKeyData", func(t *testing.T) {
		key := [8]byte{0, 0, 0x30, 0x39, 1, 2, 3, 4}
		var k pgproto3.BackendKeyData
		msg := AppendBackendKeyData(nil, key)
		decodeBackend(t, msg, 'K', &k)
		if k.ProcessID != 12345 || !bytes.Equal(k.SecretKey, key[4:]) {
			t.Fatalf("decoded %+v", k)
		}
	})
	t.Run("Query", func(t *testing.T) {
		var q pgproto3.Query
		msg := AppendQuery(nil, "SET search_path = 'a'")
		decodeBackend(t, msg, 'Q', &q)
		if q.String != "SET search_path = 'a'" {
			t.Fatalf("decoded %q", q.String)
		}
		want, _ := (&pgproto3.Query{String: "SET search_path = 'a'"}).Encode(nil)
		if !bytes.Equal(msg, want) {
			t.Fatalf("%q != pgproto3 %q", msg, want)
		}
	})
	t.Run("SyncTerminate", func(t *testing.T) {
		s, _ := (&pgproto3.Sync{}).Encode(nil)
		x, _ := (&pgproto3.Terminate{}).Encode(nil)
		if !bytes.Equal(AppendSync(nil), s) || !bytes.Equal(AppendTerminate(nil), x) {
			t.Fatalf("Sync %q / Terminate %q differ from pgproto3 %q / %q", AppendSync(nil), AppendTerminate(nil), s, x)
		}
	})
	t.Run("NegotiateProtocolVersion", func(t *testing.T) {
		for _, opts := range [][]string{nil, {"_pq_.a"}, {"_pq_.a", "_pq_.bb"}} {
			var v pgproto3.NegotiateProtocolVersion
			msg := AppendNegotiateProtocolVersion(nil, 0, opts)
			decodeBackend(t, msg, 'v', &v)
			if v.NewestMinorProtocol != 0 || len(v.UnrecognizedOptions) != len(opts) || (len(opts) > 0 && !reflect.DeepEqual(v.UnrecognizedOptions, opts)) {
				t.Fatalf("decoded %+v, want %q", v, opts)
			}
			want, _ := (&pgproto3.NegotiateProtocolVersion{UnrecognizedOptions: opts}).Encode(nil)
			if !bytes.Equal(msg, want) {
				t.Fatalf("%q != pgproto3 %q", msg, want)
			}
		}
	})
}

func TestReadyForQueryStatus(t *testing.T) {
	if st, err := ReadyForQueryStatus([]byte("T")); err != nil || st != TxInBlock {
		t.Fatalf("= %q, %v", st, err)
	}
	for _, b := range [][]byte{nil, {}, []byte("IT")} {
		if _, err := ReadyForQueryStatus(b); err == nil {
			t.Errorf("%q accepted", b)
		}
	}
}

func TestParseParameterStatus(t *testing.T) {
	name, value, err := ParseParameterStatus([]byte("TimeZone\x00Europe/Paris\x00"))
	if err != nil || string(name) != "TimeZone" || string(value) != "Europe/Paris" {
		t.Fatalf("= %q %q %v", name, value, err)
	}
	name, value, err = ParseParameterStatus([]byte("a\x00\x00"))
	if err != nil || string(name) != "a" || len(value) != 0 {
		t.Fatalf("empty value: %q %q %v", name, value, err)
	}
	for _, b := range []string{"", "name", "name\x00value"} {
		if _, _, err := ParseParameterStatus([]byte(b)); err == nil {
			t.Errorf("%q accepted", b)
		}
	}
}

func TestParseErrorResponse(t *testing.T) {
	// As Postgres sends it: localized S, then V, R kept (lc_messages does
	// not translate it), unknown fields ignored.
	pe := &pgproto3.ErrorResponse{
		Severity: "ERREUR", SeverityUnlocalized: "ERROR", Code: "42P01",
		Message: `relation "x" does not exist`, Detail: "d", Hint: "h",
		Position: 15, File: "parse_relation.c", Line: 1392, Routine: "parserOpenTable",
	}
	msg, _ := pe.Encode(nil)
	f, err := ParseErrorResponse(msg[5:])
	want := ErrorFields{Severity: "ERROR", Code: "42P01", Message: `relation "x" does not exist`, Detail: "d", Hint: "h", Routine: "parserOpenTable"}
	if err != nil || f != want {
		t.Fatalf("= %+v, %v; want %+v", f, err, want)
	}
	// Old servers send no V: the S field is used.
	f, err = ParseErrorResponse([]byte("SFATAL\x00C28000\x00Mno\x00\x00"))
	if err != nil || f != (ErrorFields{Severity: "FATAL", Code: "28000", Message: "no"}) {
		t.Fatalf("= %+v, %v", f, err)
	}
	// V wins over S whatever the order.
	f, err = ParseErrorResponse([]byte("VERROR\x00SERREUR\x00C42601\x00\x00"))
	if err != nil || f.Severity != "ERROR" {
		t.Fatalf("V before S: severity %q, %v", f.Severity, err)
	}
	if f, err := ParseErrorResponse([]byte{0}); err != nil || f != (ErrorFields{}) {
		t.Fatalf("empty = %+v, %v", f, err)
	}
	for _, b := range []string{"", "SERROR", "SERROR\x00", "SERROR\x00M", "SERROR\x00Mx\x00"} {
		if _, err := ParseErrorResponse([]byte(b)); err == nil {
			t.Errorf("%q accepted", b)
		}
	}
}

func TestCommandTag(t *testing.T) {
	for in, want := range map[string]string{"SELECT 5\x00": "SELECT 5", "INSERT 0 1\x00": "INSERT 0 1", "BEGIN": "BEGIN", "": ""} {
		if got := CommandTag([]byte(in)); string(got) != want {
			t.Errorf("CommandTag(%q) = %q, want %q", in, got, want)
		}
	}
	cc, _ := (&pgproto3.CommandComplete{CommandTag: []byte("UPDATE 3")}).Encode(nil)
	if got := CommandTag(cc[5:]); string(got) != "UPDATE 3" {
		t.Fatalf("from pgproto3: %q", got)
	}
	if binary.BigEndian.Uint32(cc[1:5]) != uint32(len(cc)-1) {
		t.Fatal("unexpected pgproto3 framing")
	}
}
