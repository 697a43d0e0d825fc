package wire

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Letters both directions use get each direction's name.
func TestMessageTypeNames(t *testing.T) {
	for _, c := range []struct {
		typ               byte
		frontend, backend string
	}{
		{'D', "Describe", "DataRow"},
		{'C', "Close", "CommandComplete"},
		{'E', "Execute", "ErrorResponse"},
		{'S', "Sync", "ParameterStatus"},
		{'H', "Flush", "CopyOutResponse"},
		{'d', "CopyData", "CopyData"},
		{'Q', "Query", "unknown backend message 'Q'"},
		{'Z', "unknown frontend message 'Z'", "ReadyForQuery"},
		{0, `unknown frontend message '\x00'`, `unknown backend message '\x00'`},
		{0xe9, `unknown frontend message '\u00e9'`, `unknown backend message '\u00e9'`},
	} {
		if got := FrontendType(c.typ).String(); got != c.frontend {
			t.Errorf("FrontendType(%q) = %q, want %q", c.typ, got, c.frontend)
		}
		if got := BackendType(c.typ).String(); got != c.backend {
			t.Errorf("BackendType(%q) = %q, want %q", c.typ, got, c.backend)
		}
	}
}

// Every message pgproto3 can encode has a name in its direction, and the
// name is pgproto3's type name (Authentication*, SASL* and GSS* aside).
func TestMessageTypeNamesCoverProtocol(t *testing.T) {
	front := map[string]pgproto3.FrontendMessage{
		"Bind": &pgproto3.Bind{}, "Close": &pgproto3.Close{}, "CopyData": &pgproto3.CopyData{},
		"CopyDone": &pgproto3.CopyDone{}, "CopyFail": &pgproto3.CopyFail{}, "Describe": &pgproto3.Describe{},
		"Execute": &pgproto3.Execute{}, "Flush": &pgproto3.Flush{}, "FunctionCall": &pgproto3.FunctionCall{},
		"Parse": &pgproto3.Parse{}, "PasswordMessage": &pgproto3.PasswordMessage{}, "Query": &pgproto3.Query{},
		"Sync": &pgproto3.Sync{}, "Terminate": &pgproto3.Terminate{},
	}
	for name, m := range front {
		b, err := m.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := FrontendType(b[0]).String(); got != name {
			t.Errorf("FrontendType(%q) = %q, want %q", b[0], got, name)
		}
	}
	back := map[string]pgproto3.BackendMessage{
		"Authentication": &pgproto3.AuthenticationOk{}, "BackendKeyData": &pgproto3.BackendKeyData{},
		"BindComplete": &pgproto3.BindComplete{}, "CloseComplete": &pgproto3.CloseComplete{},
		"CommandComplete": &pgproto3.CommandComplete{}, "CopyData": &pgproto3.CopyData{}, "CopyDone": &pgproto3.CopyDone{},
		"CopyInResponse": &pgproto3.CopyInResponse{}, "CopyOutResponse": &pgproto3.CopyOutResponse{},
		"CopyBothResponse": &pgproto3.CopyBothResponse{}, "DataRow": &pgproto3.DataRow{},
		"EmptyQueryResponse": &pgproto3.EmptyQueryResponse{}, "ErrorResponse": &pgproto3.ErrorResponse{},
		"FunctionCallResponse": &pgproto3.FunctionCallResponse{}, "NegotiateProtocolVersion": &pgproto3.NegotiateProtocolVersion{},
		"NoData": &pgproto3.NoData{}, "NoticeResponse": &pgproto3.NoticeResponse{},
		"NotificationResponse": &pgproto3.NotificationResponse{}, "ParameterDescription": &pgproto3.ParameterDescription{},
		"ParameterStatus": &pgproto3.ParameterStatus{}, "ParseComplete": &pgproto3.ParseComplete{},
		"PortalSuspended": &pgproto3.PortalSuspended{}, "ReadyForQuery": &pgproto3.ReadyForQuery{TxStatus: 'I'},
		"RowDescription": &pgproto3.RowDescription{},
	}
	for name, m := range back {
		b, err := m.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := BackendType(b[0]).String(); got != name {
			t.Errorf("BackendType(%q) = %q, want %q", b[0], got, name)
		}
	}
}

// A known name costs no allocation: String may sit on a logging path.
func TestMessageTypeStringAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		_ = FrontendType(MsgParse).String()
		_ = BackendType(MsgDataRow).String()
	}); n != 0 {
		t.Fatalf("%v allocs, want 0", n)
	}
}

// Only the frontend messages of protocol 3.0 pass after login.
func TestFrontendTypes(t *testing.T) {
	var ok []byte
	for b := 0; b < 256; b++ {
		if IsFrontendType(byte(b)) {
			ok = append(ok, byte(b))
		}
	}
	if got, want := string(ok), "BCDEFHPQSXcdf"; got != want {
		t.Errorf("accepted %q, want %q", got, want)
	}
}
