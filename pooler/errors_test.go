package pooler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The texts are PgBouncer's; operators grep for them. Changing one is a
// compatibility break, so each is pinned here.
func TestErrorTexts(t *testing.T) {
	cases := []struct {
		code Code
		args []any
		want string
	}{
		{CodeMaxClientConn, nil, "no more connections allowed (max_client_conn)"},
		{CodeQueryWaitTimeout, nil, "query_wait_timeout"},
		{CodeUnsupportedStartupParam, []any{"foo"}, "unsupported startup parameter: foo"},
		{CodeNoSuchDatabase, []any{"nope"}, "no such database: nope"},
		{CodeServerLoginFailing, []any{"password authentication failed"}, "server login has been failing, cached error: password authentication failed (server_login_retry)"},
		{CodeStatementModeTxBlock, nil, "transaction blocks not allowed in statement pooling mode"},
		{CodeClientLoginTimeout, nil, "client_login_timeout"},
		{CodeIdleTransactionTimeout, nil, "idle transaction timeout"},
		{CodeServerCrashed, nil, "server conn crashed?"},
		{CodeServerLoginFailing, []any{"connect failed"}, "server login has been failing, cached error: connect failed (server_login_retry)"},
		{CodeServerConnectFailed, []any{"connect failed"}, "server login failed: connect failed"},
		{CodeUnknownPacket, nil, "unknown pkt"},
		{CodePacketTooLarge, nil, "max_packet_size exceeded"},
		{CodeClientMessageTimeout, nil, "client_message_timeout"},
		{CodePQExecDisallowed, nil, "PQexec disallowed"},
	}
	for _, c := range cases {
		e := newError(c.code, c.args...)
		if e.Message != c.want || e.SQLState != "08P01" || e.Severity != "FATAL" {
			t.Errorf("code %d: got %q %s %s, want %q 08P01 FATAL", c.code, e.Message, e.SQLState, e.Severity, c.want)
		}
	}
	for code := range codes {
		if newError(code).Message == "" {
			t.Errorf("code %d has no text", code)
		}
	}
}

func TestAppendError(t *testing.T) {
	b := appendError(nil, newError(CodeQueryWaitTimeout))
	if b[0] != 'E' {
		t.Fatalf("type %c", b[0])
	}
	f, err := wire.ParseErrorResponse(b[5:])
	if err != nil {
		t.Fatal(err)
	}
	if f.Code != "08P01" || f.Message != "query_wait_timeout" || f.Severity != "FATAL" {
		t.Fatalf("%+v", f)
	}
}

// A failed server login reaches clients as Postgres's own message or as
// PgBouncer's short reason, never as Go's error string with its addresses.
func TestLoginReason(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 5432},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	dnsErr := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "db.example", IsNotFound: true}}
	serverErr := &auth.ServerError{Fields: wire.ErrorFields{Severity: "FATAL", Code: "28P01", Message: "password authentication failed for user \"app\""}}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"server's ErrorResponse", serverErr, `password authentication failed for user "app"`},
		{"connection refused", refused, "connect failed"},
		{"DNS", dnsErr, "server DNS lookup failed"},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, "connect timeout"},
		{"login timeout", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), "connect timeout"},
		{"EOF during login", io.ErrUnexpectedEOF, "server conn crashed?"},
		{"reset during login", os.NewSyscallError("read", syscall.ECONNRESET), "server conn crashed?"},
		{"TLS", &reasonError{"TLS startup failed", errors.New("server TLS handshake: remote error: tls: bad certificate")}, "TLS startup failed"},
		{"anything else", errors.New("server sent unexpected message 'Q' during login"), "login failed"},
	}
	for _, c := range cases {
		got := loginReason(c.err)
		if got != c.want {
			t.Errorf("%s (%v): %q, want %q", c.name, c.err, got, c.want)
		}
		if c.name != "server's ErrorResponse" && (strings.Contains(got, "10.0.0.5") || strings.Contains(got, "5432")) {
			t.Errorf("%s: %q names the address", c.name, got)
		}
	}

	// Waiters get the server's error as it is, else the pooler's text.
	if err := serverLoginError(serverErr); err != error(serverErr) {
		t.Errorf("server error not passed through: %v", err)
	}
	var pe *Error
	if err := serverLoginError(refused); !errors.As(err, &pe) || pe.Message != "server login failed: connect failed" || pe.SQLState != "08P01" {
		t.Errorf("refused: %v", err)
	}
	if err := loginFailing(refused); err.Error() != "server login has been failing, cached error: connect failed (server_login_retry)" {
		t.Errorf("cached: %v", err)
	}
}

// Only the frontend messages of protocol 3.0 pass after login.
func TestFrontendTypes(t *testing.T) {
	var ok []byte
	for b := 0; b < 256; b++ {
		if isFrontendType(byte(b)) {
			ok = append(ok, byte(b))
		}
	}
	if got, want := string(ok), "BCDEFHPQSXcdf"; got != want {
		t.Errorf("accepted %q, want %q", got, want)
	}
}
