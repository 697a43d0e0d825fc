package loginfail

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
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/internal/sessionattrs"
	"github.com/pgturnstile/pgturnstile/wire"
)

// A failed server login reaches clients as Postgres's own message or as
// PgBouncer's short reason, never as Go's error string with its addresses.
func TestReason(t *testing.T) {
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
		// PgBouncer: a connect that server_connect_timeout cut short is
		// "connect failed" (its suite: test_server_connect_timeout_drop_traffic).
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, "connect failed"},
		{"login timeout", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), "connect timeout"},
		{"EOF during login", io.ErrUnexpectedEOF, "server conn crashed?"},
		{"reset during login", os.NewSyscallError("read", syscall.ECONNRESET), "server conn crashed?"},
		{"TLS", &ReasonError{Reason: "TLS startup failed", Err: errors.New("server TLS handshake: remote error: tls: bad certificate")}, "TLS startup failed"},
		{"wrong password type", fmt.Errorf("login: %w", auth.ErrWrongPasswordType), "wrong password type"},
		{"anything else", errors.New("server sent unexpected message 'Q' during login"), "login failed"},
	}
	for _, c := range cases {
		got := Reason(c.err)
		if got != c.want {
			t.Errorf("%s (%v): %q, want %q", c.name, c.err, got, c.want)
		}
		if c.name != "server's ErrorResponse" && (strings.Contains(got, "10.0.0.5") || strings.Contains(got, "5432")) {
			t.Errorf("%s: %q names the address", c.name, got)
		}
	}

	// Waiters get the server's error as it is, else the pooler's text.
	if err := ClientError(serverErr); err != error(serverErr) {
		t.Errorf("server error not passed through: %v", err)
	}
	var pe *pgerror.Error
	if err := ClientError(refused); !errors.As(err, &pe) || pe.Message != "server login failed: connect failed" || pe.SQLState != "08P01" {
		t.Errorf("refused: %v", err)
	}
	if err := Cached(refused); err.Error() != "server login has been failing, cached error: connect failed (server_login_retry)" {
		t.Errorf("cached: %v", err)
	}
}

// FailsWaiters: a login a restarting Postgres turns away (starting up,
// shutting down, or the backend ended mid-login by the shutdown) leaves
// the waiters queued for the retry, and gives new clients of a pool that
// has served no cached error; a real refusal fails them. TestPostgresRestart
// once saw "terminating connection due to administrator command" (57P01)
// cached as a login failure for every reconnecting client.
func TestFailsWaitersServerGoingAway(t *testing.T) {
	fatal := func(code, msg string) error {
		return fmt.Errorf("login: %w", &auth.ServerError{Fields: wire.ErrorFields{Severity: "FATAL", Code: code, Message: msg}})
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fatal("57P03", "the database system is starting up"), false},
		{fatal("57P03", "the database system is shutting down"), false},
		{fatal("57P01", "terminating connection due to administrator command"), false},
		{fatal("57P02", "terminating connection because of crash of another server process"), false},
		{fatal("28P01", `password authentication failed for user "app"`), true},
		{fatal("3D000", `database "x" does not exist`), true},
		{errors.New("some other failure"), true},
	} {
		if got := FailsWaiters(tc.err); got != tc.want {
			t.Errorf("FailsWaiters(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

// A login that reached a server of the wrong role leaves its waiters
// waiting for the next host, as unreachable servers do; Reason names it
// by sessionattrs' reason.
func TestFailsWaitersSessionAttrs(t *testing.T) {
	err := &ReasonError{Reason: sessionattrs.Reason, Err: sessionattrs.NotMet("session is read-only (target_session_attrs=read-write)")}
	if FailsWaiters(err) {
		t.Error("a server of the wrong role fails the waiters")
	}
	if got := Reason(err); got != "target_session_attrs not met" {
		t.Errorf("Reason = %q", got)
	}
	for _, reason := range []string{"TLS startup failed", "connect failed"} {
		if FailsWaiters(&ReasonError{Reason: reason, Err: errors.New("x")}) {
			t.Errorf("%s fails the waiters", reason)
		}
	}
	if !FailsWaiters(&ReasonError{Reason: "server refused SSL", Err: errors.New("x")}) {
		t.Error("a required TLS the server refused does not fail the waiters")
	}
}
