package pooler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Code names an error the pooler itself sends to a client. Texts match
// PgBouncer byte for byte: runbooks, tests and client libraries grep for them.
// A text never carries an address, a port or a Go error string: those go to
// the log only (see loginReason).
type Code int

const (
	CodeMaxClientConn Code = iota + 1
	CodeQueryWaitTimeout
	CodeUnsupportedStartupParam
	CodeUnsupportedOptions
	CodeNoSuchDatabase
	CodeShuttingDown
	CodeServerShuttingDown
	CodeServerLoginFailing
	CodeClientLoginTimeout
	CodeClientIdleTimeout
	CodeIdleTransactionTimeout
	CodeQueryTimeout
	CodeStatementModeTxBlock
	CodeOldProtocol
	CodeBadPacket
	CodePacketTooLarge
	CodeServerCrashed
	CodeNoUserName
	CodeServerConnectFailed
	CodePQExecDisallowed
	CodeSSLRequired
	CodeDatabaseDisabled
	CodeEvicted
	CodeUnknownPacket
	CodeClientMessageTimeout
	CodeHeldMessageBudget
	CodeInvalidMessageLength
	CodeUnsupportedOptionsParam
	CodeHBANoEntry
	CodeHBAMethodUnsupported
	CodeAuthTypeInvalid
	CodeAuthQueryFailed
	CodeAuthDBDisabled
	CodeBouncerConfigError
	CodeCertAuthFailed
	CodeExpectedPassword
	CodeAdminNotAllowed
	CodeCopyUnexpectedMessage
	CodeHeldMessageTooLarge
	CodeStatementNameTooLong
	CodeStatementBudget
	CodeStatementExists
	CodeTrustFailed
	CodeNoSuchUser
	CodeStatementNotFound
	CodeQueryTimeoutWaiting
	CodeMaxDBClientConns
	CodeMaxUserClientConns
	CodeLoginFailed
	CodeTransactionTimeout
	CodeConfigChanged
	CodePeerAuthFailed
	CodeStatementDiscarded
	CodeStalePlan

	codeLimit // one past the last code; TestErrorTexts checks each has an entry
)

type codeInfo struct {
	severity string // FATAL closes the connection; ERROR answers one request
	sqlstate string
	format   string
}

// codes is the one table of pooler-originated error texts, with their
// severity and SQLSTATE.
var codes = map[Code]codeInfo{
	CodeMaxClientConn:           {"FATAL", "08P01", "no more connections allowed (max_client_conn)"},
	CodeQueryWaitTimeout:        {"FATAL", "08P01", "query_wait_timeout"},
	CodeUnsupportedStartupParam: {"FATAL", "08P01", "unsupported startup parameter: %s"},
	CodeUnsupportedOptions:      {"FATAL", "08P01", "unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed"},
	CodeNoSuchDatabase:          {"FATAL", "08P01", "no such database: %s"},
	CodeTrustFailed:             {"FATAL", "08P01", `"trust" authentication failed`},
	CodeShuttingDown:            {"FATAL", "08P01", "pooler is shutting down"},
	CodeServerShuttingDown:      {"FATAL", "08P01", "server shutting down"},
	CodeServerLoginFailing:      {"FATAL", "08P01", "server login has been failing, cached error: %s (server_login_retry)"},
	CodeClientLoginTimeout:      {"FATAL", "08P01", "client_login_timeout"},
	CodeClientIdleTimeout:       {"FATAL", "08P01", "client_idle_timeout"},
	CodeIdleTransactionTimeout:  {"FATAL", "08P01", "idle transaction timeout"},
	CodeQueryTimeout:            {"FATAL", "08P01", "query timeout"},
	CodeStatementModeTxBlock:    {"FATAL", "08P01", "transaction blocks not allowed in statement pooling mode"},
	CodeOldProtocol:             {"FATAL", "08P01", "old V2 protocol not supported"},
	CodeBadPacket:               {"FATAL", "08P01", "bad packet header"},
	CodePacketTooLarge:          {"FATAL", "08P01", "max_packet_size exceeded"},
	CodeServerCrashed:           {"FATAL", "08P01", "server conn crashed?"},
	CodeNoUserName:              {"FATAL", "08P01", "no username supplied"},
	CodeServerConnectFailed:     {"FATAL", "08P01", "server login failed: %s"},
	CodePQExecDisallowed:        {"FATAL", "08P01", "PQexec disallowed"},
	CodeSSLRequired:             {"FATAL", "08P01", "SSL required"},
	CodeDatabaseDisabled:        {"FATAL", "08P01", "database \"%s\" is disabled"},
	CodeEvicted:                 {"FATAL", "08P01", "evicted"},
	CodeUnknownPacket:           {"FATAL", "08P01", "unknown pkt"},
	// pgturnstile's own (client_message_timeout), named after its setting
	// like PgBouncer's timeouts.
	CodeClientMessageTimeout: {"FATAL", "08P01", "client_message_timeout"},
	CodeHeldMessageBudget:    {"FATAL", "53200", "out of memory for client messages (held_message_budget)"},
	CodeInvalidMessageLength: {"FATAL", "08P01", "invalid message length"},

	// Login (PgBouncer's texts where it has the case). auth_type's text is
	// auth.ParseMethod's, which names the setting's value.
	CodeUnsupportedOptionsParam: {"FATAL", "08P01", "unsupported startup parameter in options: %s"},
	CodeHBANoEntry:              {"FATAL", "28000", `no pg_hba.conf entry for host "%s", user "%s", database "%s"`},
	CodeHBAMethodUnsupported:    {"FATAL", "28000", "auth method %s is not supported"},
	CodeAuthTypeInvalid:         {"FATAL", "28000", "%s"},
	CodeAuthQueryFailed:         {"FATAL", "08P01", "authentication query failed"},
	CodeAuthDBDisabled:          {"FATAL", "08P01", `authentication database "%s" is disabled`},
	CodeBouncerConfigError:      {"FATAL", "08P01", "bouncer config error"},
	CodeCertAuthFailed:          {"FATAL", "28000", `certificate authentication failed for user "%s"`},
	CodeExpectedPassword:        {"FATAL", "08P01", "expected password response, got message type %q"},
	CodeAdminNotAllowed:         {"FATAL", "08P01", "not allowed"},
	// Postgres's text for a non-COPY message amid COPY FROM STDIN.
	CodeCopyUnexpectedMessage: {"FATAL", "08P01", "unexpected message type 0x%02X during COPY from stdin"},

	// A Parse the pooler answers itself, in its place in the pipeline: the
	// client stays connected.
	CodeHeldMessageTooLarge:  {"ERROR", "54000", "Parse message too large to be prepared by the pooler (max_held_message_size)"},
	CodeStatementNameTooLong: {"ERROR", "54000", "prepared statement name too long"},
	CodeStatementBudget:      {"ERROR", "53200", "out of memory for prepared statements (prepared_statement_budget)"},
	// PgBouncer's texts for a Parse of a name the client holds and a Bind
	// or Describe of one it has not prepared; its SQLSTATE too, though the
	// client stays connected.
	CodeStatementExists:   {"ERROR", "08P01", "prepared statement name is already in use"},
	CodeStatementNotFound: {"ERROR", "08P01", "prepared statement did not exist"},
	// Postgres's own for a name the client's DISCARD ALL or DEALLOCATE
	// ALL dropped: the client did prepare it, and drivers that re-prepare
	// on 26000 (pgjdbc) heal.
	CodeStatementDiscarded: {"ERROR", "26000", `prepared statement "%s" does not exist`},
	// Postgres's own for a statement whose result a migration changed
	// since the client described it (a client's name older than its
	// statement's shape epoch, internal/stmtcache): drivers prepare again
	// on it.
	CodeStalePlan: {"ERROR", "0A000", "cached plan must not change result type"},
	// auth_query found no row for a user under trust.
	CodeNoSuchUser: {"FATAL", "08P01", "no such user"},

	// query_timeout of a client still waiting for a server: PgBouncer's
	// janitor says it with the setting's name, unlike the "query timeout"
	// of a query that ran too long on its server.
	CodeQueryTimeoutWaiting: {"FATAL", "08P01", "query_timeout"},

	// A login over max_db_client_connections / max_user_client_connections
	// (clientcaps.go).
	CodeMaxDBClientConns:   {"FATAL", "08P01", "client connections exceeded (max_db_client_connections)"},
	CodeMaxUserClientConns: {"FATAL", "08P01", "client connections exceeded (max_user_client_connections)"},

	// A replication client whose own server refused the login (no
	// replication role, no hba line for replication): PgBouncer tells
	// the client this and logs the server's words.
	CodeLoginFailed: {"FATAL", "08P01", "login failed"},

	// transaction_timeout (PgBouncer 1.25), said as its janitor says it.
	CodeTransactionTimeout: {"FATAL", "08P01", "transaction timeout"},
	// server_fast_close: the client's server closed because RECONNECT or
	// a RELOAD changed its database.
	CodeConfigChanged: {"FATAL", "08P01", "database configuration changed"},
	// peer authentication refused (not a Unix socket, another OS user, no
	// ident map line): PgBouncer's words and SQLSTATE.
	CodePeerAuthFailed: {"FATAL", "08P01", "unix socket login rejected"},
}

// Error is a pooler error on its way to a client, built by newError from the
// codes table. Errors relayed from Postgres (a server's ErrorResponse during
// login or parameter sync) and auth's own errors keep their SQLSTATE and text
// and have no Code.
type Error struct {
	Code     Code
	Severity string
	SQLState string
	Message  string
	// Detail, when set, is sent as the ErrorResponse's DETAIL.
	Detail string
}

func (e *Error) Error() string { return e.Message }

// newError formats the text of code with args, with the code's severity and
// SQLSTATE.
func newError(code Code, args ...any) *Error {
	ci, ok := codes[code]
	if !ok {
		panic(fmt.Sprintf("BUG: unknown error code %d", code))
	}
	msg := ci.format
	if len(args) > 0 {
		msg = fmt.Sprintf(ci.format, args...)
	}
	return &Error{Code: code, Severity: ci.severity, SQLState: ci.sqlstate, Message: msg}
}

// appendError encodes e as an ErrorResponse.
func appendError(dst []byte, e *Error) []byte {
	return wire.AppendErrorResponse(dst, wire.MsgErrorResponse, e.Severity, e.SQLState, e.Message, e.Detail, "")
}

// serverLoginError is what a client waiting for a server is told when that
// server's login failed: Postgres's own ErrorResponse as it is (PgBouncer
// forwards it the same way), anything else as "server login failed: " and
// PgBouncer's word for it.
func serverLoginError(err error) error {
	var se *auth.ServerError
	var pe *Error
	if errors.As(err, &se) || errors.As(err, &pe) {
		return err
	}
	return newError(CodeServerConnectFailed, loginReason(err))
}

// loginReason is a failed server login as a client may see it: Postgres's
// message when the server refused, else the short reason PgBouncer records
// for the pool (last_connect_failed_message). Go's error strings name
// addresses and ports ("dial tcp 10.0.0.5:5432: connect: connection
// refused"); they go to the log where the login failed, never to a client.
func loginReason(err error) string {
	var se *auth.ServerError
	var re *reasonError
	var dns *net.DNSError
	var op *net.OpError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return se.Fields.Message
	case errors.As(err, &re):
		return re.reason
	case errors.Is(err, auth.ErrWrongPasswordType):
		return "wrong password type"
	case errors.As(err, &dns):
		return "server DNS lookup failed"
	case errors.As(err, &ne) && ne.Timeout():
		return "connect timeout"
	case errors.As(err, &op) && op.Op == "dial":
		return "connect failed"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed), errors.As(err, &op):
		return "server conn crashed?"
	}
	return "login failed"
}

// reasonError is an error of a server login step with PgBouncer's short
// reason for it, which loginReason tells clients; Error() is the detail for
// the log.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }
