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

// The texts are PgBouncer's (or Postgres's, or named after pgturnstile's own
// settings); operators grep for them. Changing one, or its severity or
// SQLSTATE, is a compatibility break, so every code is pinned here.
func TestErrorTexts(t *testing.T) {
	cases := []struct {
		code     Code
		args     []any
		severity string
		sqlstate string
		want     string
	}{
		{CodeMaxClientConn, nil, "FATAL", "08P01", "no more connections allowed (max_client_conn)"},
		{CodeQueryWaitTimeout, nil, "FATAL", "08P01", "query_wait_timeout"},
		{CodeUnsupportedStartupParam, []any{"foo"}, "FATAL", "08P01", "unsupported startup parameter: foo"},
		{CodeUnsupportedOptions, nil, "FATAL", "08P01", "unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed"},
		{CodeNoSuchDatabase, []any{"nope"}, "FATAL", "08P01", "no such database: nope"},
		{CodeTrustFailed, nil, "FATAL", "08P01", `"trust" authentication failed`},
		{CodeShuttingDown, nil, "FATAL", "08P01", "pooler is shutting down"},
		{CodeServerShuttingDown, nil, "FATAL", "08P01", "server shutting down"},
		{CodeServerLoginFailing, []any{"password authentication failed"}, "FATAL", "08P01", "server login has been failing, cached error: password authentication failed (server_login_retry)"},
		{CodeServerLoginFailing, []any{"connect failed"}, "FATAL", "08P01", "server login has been failing, cached error: connect failed (server_login_retry)"},
		{CodeClientLoginTimeout, nil, "FATAL", "08P01", "client_login_timeout"},
		{CodeClientIdleTimeout, nil, "FATAL", "08P01", "client_idle_timeout"},
		{CodeIdleTransactionTimeout, nil, "FATAL", "08P01", "idle transaction timeout"},
		{CodeQueryTimeout, nil, "FATAL", "08P01", "query timeout"},
		{CodeStatementModeTxBlock, nil, "FATAL", "08P01", "transaction blocks not allowed in statement pooling mode"},
		{CodeOldProtocol, nil, "FATAL", "08P01", "old V2 protocol not supported"},
		{CodeBadPacket, nil, "FATAL", "08P01", "bad packet header"},
		{CodePacketTooLarge, nil, "FATAL", "08P01", "max_packet_size exceeded"},
		{CodeServerCrashed, nil, "FATAL", "08P01", "server conn crashed?"},
		{CodeNoUserName, nil, "FATAL", "08P01", "no username supplied"},
		{CodeServerConnectFailed, []any{"connect failed"}, "FATAL", "08P01", "server login failed: connect failed"},
		{CodePQExecDisallowed, nil, "FATAL", "08P01", "PQexec disallowed"},
		{CodeSSLRequired, nil, "FATAL", "08P01", "SSL required"},
		{CodeDatabaseDisabled, []any{"app"}, "FATAL", "08P01", `database "app" is disabled`},
		{CodeEvicted, nil, "FATAL", "08P01", "evicted"},
		{CodeUnknownPacket, nil, "FATAL", "08P01", "unknown pkt"},
		{CodeClientMessageTimeout, nil, "FATAL", "08P01", "client_message_timeout"},
		{CodeHeldMessageBudget, nil, "FATAL", "53200", "out of memory for client messages (held_message_budget)"},
		{CodeInvalidMessageLength, nil, "FATAL", "08P01", "invalid message length"},
		{CodeUnsupportedOptionsParam, []any{"work_mem"}, "FATAL", "08P01", "unsupported startup parameter in options: work_mem"},
		{CodeHBANoEntry, []any{"127.0.0.1", "app", "db1"}, "FATAL", "28000", `no pg_hba.conf entry for host "127.0.0.1", user "app", database "db1"`},
		{CodeHBAMethodUnsupported, []any{"ldap"}, "FATAL", "28000", "auth method ldap is not supported"},
		{CodeAuthTypeInvalid, []any{`auth_type "pam" is not supported yet`}, "FATAL", "28000", `auth_type "pam" is not supported yet`},
		{CodeAuthQueryFailed, nil, "FATAL", "08P01", "authentication query failed"},
		{CodeAuthDBDisabled, []any{"authdb"}, "FATAL", "08P01", `authentication database "authdb" is disabled`},
		{CodeBouncerConfigError, nil, "FATAL", "08P01", "bouncer config error"},
		{CodeCertAuthFailed, []any{"app"}, "FATAL", "28000", `certificate authentication failed for user "app"`},
		{CodeExpectedPassword, []any{byte('Q')}, "FATAL", "08P01", "expected password response, got message type 'Q'"},
		{CodeAdminNotAllowed, nil, "FATAL", "08P01", "not allowed"},
		{CodeLoginFailed, nil, "FATAL", "08P01", "login failed"},
		{CodeCopyUnexpectedMessage, []any{byte('Q')}, "FATAL", "08P01", "unexpected message type 0x51 during COPY from stdin"},
		{CodeHeldMessageTooLarge, nil, "ERROR", "54000", "Parse message too large to be prepared by the pooler (max_held_message_size)"},
		{CodeStatementNameTooLong, nil, "ERROR", "54000", "prepared statement name too long"},
		{CodeStatementBudget, nil, "ERROR", "53200", "out of memory for prepared statements (prepared_statement_budget)"},
		{CodeStatementExists, nil, "ERROR", "08P01", "prepared statement name is already in use"},
		{CodeStatementNotFound, nil, "ERROR", "08P01", "prepared statement did not exist"},
		{CodeStatementDiscarded, []any{"s1"}, "ERROR", "26000", `prepared statement "s1" does not exist`},
		{CodeStalePlan, nil, "ERROR", "0A000", "cached plan must not change result type"},
		{CodeQueryTimeoutWaiting, nil, "FATAL", "08P01", "query_timeout"},
		{CodeTransactionTimeout, nil, "FATAL", "08P01", "transaction timeout"},
		{CodeConfigChanged, nil, "FATAL", "08P01", "database configuration changed"},
		{CodePeerAuthFailed, nil, "FATAL", "08P01", "unix socket login rejected"},
		{CodeNoSuchUser, nil, "FATAL", "08P01", "no such user"},
		{CodeMaxDBClientConns, nil, "FATAL", "08P01", "client connections exceeded (max_db_client_connections)"},
		{CodeMaxUserClientConns, nil, "FATAL", "08P01", "client connections exceeded (max_user_client_connections)"},
	}
	pinned := map[Code]bool{}
	for _, c := range cases {
		pinned[c.code] = true
		e := newError(c.code, c.args...)
		if e.Code != c.code || e.Message != c.want || e.SQLState != c.sqlstate || e.Severity != c.severity {
			t.Errorf("code %d: got %d %q %s %s, want %q %s %s", c.code, e.Code, e.Message, e.SQLState, e.Severity, c.want, c.sqlstate, c.severity)
		}
	}
	for code := range codes {
		if !pinned[code] {
			t.Errorf("code %d is not pinned here", code)
		}
	}
	for code := Code(1); code < codeLimit; code++ {
		if _, ok := codes[code]; !ok {
			t.Errorf("code %d has no entry in the table", code)
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
		{"wrong password type", fmt.Errorf("login: %w", auth.ErrWrongPasswordType), "wrong password type"},
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
