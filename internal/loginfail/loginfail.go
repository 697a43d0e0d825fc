// Package loginfail is what a failed server login means to clients: the
// short reason PgBouncer gives for it (never Go's error string, which
// names addresses and ports), the error the clients waiting for that
// server are told, and whether the failure fails them at all or leaves
// them waiting for the next login.
package loginfail

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/internal/sessionattrs"
)

// ReasonError is an error of a server login step with PgBouncer's short
// reason for it, which Reason tells clients; Error() is the detail for
// the log.
type ReasonError struct {
	Reason string
	Err    error
}

func (e *ReasonError) Error() string { return e.Err.Error() }
func (e *ReasonError) Unwrap() error { return e.Err }

// Reason is a failed server login as a client may see it: Postgres's
// message when the server refused, else the short reason PgBouncer records
// for the pool (last_connect_failed_message). Go's error strings name
// addresses and ports ("dial tcp 10.0.0.5:5432: connect: connection
// refused"); they go to the log where the login failed, never to a client.
func Reason(err error) string {
	var se *auth.ServerError
	var re *ReasonError
	var dns *net.DNSError
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return se.Fields.Message
	case errors.As(err, &re):
		return re.Reason
	case errors.Is(err, auth.ErrWrongPasswordType):
		return "wrong password type"
	case errors.As(err, &dns):
		return "server DNS lookup failed"
	case errors.As(err, &op) && op.Op == "dial":
		// PgBouncer's words: a TCP connect that did not complete, by
		// refusal or by server_connect_timeout (traffic dropped), is
		// "connect failed"; "connect timeout" is a login that began and
		// did not finish in time.
		return "connect failed"
	case errors.As(err, &ne) && ne.Timeout():
		return "connect timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed), errors.As(err, &op):
		return "server conn crashed?"
	}
	return "login failed"
}

// ClientError is what a client waiting for a server is told when that
// server's login failed: Postgres's own ErrorResponse as it is (PgBouncer
// forwards it the same way), anything else as "server login failed: " and
// PgBouncer's word for it.
func ClientError(err error) error {
	var se *auth.ServerError
	var pe *pgerror.Error
	if errors.As(err, &se) || errors.As(err, &pe) {
		return err
	}
	return pgerror.New(pgerror.ServerConnectFailed, Reason(err))
}

// Cached is a pool's last failed login as PgBouncer reports it to a client
// refused while server_login_retry runs: the server's message or
// PgBouncer's short reason, never the Go error (logged when the login
// failed).
func Cached(err error) error {
	return pgerror.New(pgerror.ServerLoginFailing, Reason(err))
}

// GoingAway: the server refused a login only because it is starting up or
// shutting down ("the database system is starting up" / "is shutting
// down", 57P03), or ended the backend mid-login for a shutdown (57P01
// admin_shutdown, "terminating connection due to administrator command";
// 57P02 crash_shutdown). A restart sends all three, depending on where
// each login is when it begins.
func GoingAway(err error) bool {
	var se *auth.ServerError
	if !errors.As(err, &se) {
		return false
	}
	switch se.Fields.Code {
	case "57P01", "57P02", "57P03":
		return true
	}
	return false
}

// FailsWaiters reports whether a failed server login fails the clients
// waiting for it, as in PgBouncer: when the server answered and refused or
// broke the login (an ErrorResponse other than "the database system is
// starting up", a password the server's method cannot use, a required TLS
// the server refused, a protocol violation). A server that could not be
// reached (connect refused or timed out, DNS), whose TLS handshake failed
// (PgBouncer loses such a server before its login) or that hung up
// mid-login is retried every server_login_retry while its clients keep
// waiting, up to query_wait_timeout: a restart or failover costs them
// latency, not errors.
func FailsWaiters(err error) bool {
	if GoingAway(err) {
		return false
	}
	switch Reason(err) {
	case "connect failed", "connect timeout", "server DNS lookup failed", "server conn crashed?", "TLS startup failed",
		sessionattrs.Reason:
		return false
	}
	return true
}
