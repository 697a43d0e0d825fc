// Package pgerror is the errors the pooler itself sends to clients: one
// table of codes with PgBouncer's texts (or Postgres's, where PgBouncer
// has none), their severity and SQLSTATE, and the ErrorResponse that
// carries one. Errors relayed from Postgres keep their own fields and are
// not made here.
package pgerror

import (
	"fmt"

	"github.com/pgturnstile/pgturnstile/wire"
)

// Code names an error the pooler itself sends to a client. Texts match
// PgBouncer byte for byte: runbooks, tests and client libraries grep for them.
// A text never carries an address, a port or a Go error string: those go to
// the log only (see internal/loginfail).
type Code int

const (
	MaxClientConn Code = iota + 1
	QueryWaitTimeout
	UnsupportedStartupParam
	UnsupportedOptions
	NoSuchDatabase
	ShuttingDown
	ServerShuttingDown
	ServerLoginFailing
	ClientLoginTimeout
	ClientIdleTimeout
	IdleTransactionTimeout
	QueryTimeout
	StatementModeTxBlock
	OldProtocol
	BadPacket
	PacketTooLarge
	ServerCrashed
	NoUserName
	ServerConnectFailed
	PQExecDisallowed
	SSLRequired
	DatabaseDisabled
	Evicted
	UnknownPacket
	ClientMessageTimeout
	HeldMessageBudget
	InvalidMessageLength
	UnsupportedOptionsParam
	HBANoEntry
	HBAMethodUnsupported
	AuthTypeInvalid
	AuthQueryFailed
	AuthDBDisabled
	BouncerConfigError
	CertAuthFailed
	ExpectedPassword
	AdminNotAllowed
	CopyUnexpectedMessage
	HeldMessageTooLarge
	StatementNameTooLong
	StatementBudget
	StatementExists
	TrustFailed
	NoSuchUser
	StatementNotFound
	QueryTimeoutWaiting
	MaxDBClientConns
	MaxUserClientConns
	LoginFailed
	TransactionTimeout
	ConfigChanged
	PeerAuthFailed
	StatementDiscarded
	StalePlan
	ViewsSearchPath
	ShardMapPending

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
	MaxClientConn:           {"FATAL", "08P01", "no more connections allowed (max_client_conn)"},
	QueryWaitTimeout:        {"FATAL", "08P01", "query_wait_timeout"},
	UnsupportedStartupParam: {"FATAL", "08P01", "unsupported startup parameter: %s"},
	UnsupportedOptions:      {"FATAL", "08P01", "unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed"},
	NoSuchDatabase:          {"FATAL", "08P01", "no such database: %s"},
	TrustFailed:             {"FATAL", "08P01", `"trust" authentication failed`},
	ShuttingDown:            {"FATAL", "08P01", "pooler is shutting down"},
	ServerShuttingDown:      {"FATAL", "08P01", "server shutting down"},
	ServerLoginFailing:      {"FATAL", "08P01", "server login has been failing, cached error: %s (server_login_retry)"},
	ClientLoginTimeout:      {"FATAL", "08P01", "client_login_timeout"},
	ClientIdleTimeout:       {"FATAL", "08P01", "client_idle_timeout"},
	IdleTransactionTimeout:  {"FATAL", "08P01", "idle transaction timeout"},
	QueryTimeout:            {"FATAL", "08P01", "query timeout"},
	StatementModeTxBlock:    {"FATAL", "08P01", "transaction blocks not allowed in statement pooling mode"},
	OldProtocol:             {"FATAL", "08P01", "old V2 protocol not supported"},
	BadPacket:               {"FATAL", "08P01", "bad packet header"},
	PacketTooLarge:          {"FATAL", "08P01", "max_packet_size exceeded"},
	ServerCrashed:           {"FATAL", "08P01", "server conn crashed?"},
	NoUserName:              {"FATAL", "08P01", "no username supplied"},
	ServerConnectFailed:     {"FATAL", "08P01", "server login failed: %s"},
	PQExecDisallowed:        {"FATAL", "08P01", "PQexec disallowed"},
	SSLRequired:             {"FATAL", "08P01", "SSL required"},
	DatabaseDisabled:        {"FATAL", "08P01", "database \"%s\" is disabled"},
	Evicted:                 {"FATAL", "08P01", "evicted"},
	UnknownPacket:           {"FATAL", "08P01", "unknown pkt"},
	// pgturnstile's own (client_message_timeout), named after its setting
	// like PgBouncer's timeouts.
	ClientMessageTimeout: {"FATAL", "08P01", "client_message_timeout"},
	HeldMessageBudget:    {"FATAL", "53200", "out of memory for client messages (held_message_budget)"},
	InvalidMessageLength: {"FATAL", "08P01", "invalid message length"},

	// Login (PgBouncer's texts where it has the case). auth_type's text is
	// auth.ParseMethod's, which names the setting's value.
	UnsupportedOptionsParam: {"FATAL", "08P01", "unsupported startup parameter in options: %s"},
	HBANoEntry:              {"FATAL", "28000", `no pg_hba.conf entry for host "%s", user "%s", database "%s"`},
	HBAMethodUnsupported:    {"FATAL", "28000", "auth method %s is not supported"},
	AuthTypeInvalid:         {"FATAL", "28000", "%s"},
	AuthQueryFailed:         {"FATAL", "08P01", "authentication query failed"},
	AuthDBDisabled:          {"FATAL", "08P01", `authentication database "%s" is disabled`},
	BouncerConfigError:      {"FATAL", "08P01", "bouncer config error"},
	CertAuthFailed:          {"FATAL", "28000", `certificate authentication failed for user "%s"`},
	ExpectedPassword:        {"FATAL", "08P01", "expected password response, got message type %q"},
	AdminNotAllowed:         {"FATAL", "08P01", "not allowed"},
	// Postgres's text for a non-COPY message amid COPY FROM STDIN.
	CopyUnexpectedMessage: {"FATAL", "08P01", "unexpected message type 0x%02X during COPY from stdin"},

	// A Parse the pooler answers itself, in its place in the pipeline: the
	// client stays connected.
	HeldMessageTooLarge:  {"ERROR", "54000", "Parse message too large to be prepared by the pooler (max_held_message_size)"},
	StatementNameTooLong: {"ERROR", "54000", "prepared statement name too long"},
	StatementBudget:      {"ERROR", "53200", "out of memory for prepared statements (prepared_statement_budget)"},
	// PgBouncer's texts for a Parse of a name the client holds and a Bind
	// or Describe of one it has not prepared; its SQLSTATE too, though the
	// client stays connected.
	StatementExists:   {"ERROR", "08P01", "prepared statement name is already in use"},
	StatementNotFound: {"ERROR", "08P01", "prepared statement did not exist"},
	// Postgres's own for a name the client's DISCARD ALL or DEALLOCATE
	// ALL dropped: the client did prepare it, and drivers that re-prepare
	// on 26000 (pgjdbc) heal.
	StatementDiscarded: {"ERROR", "26000", `prepared statement "%s" does not exist`},
	// Postgres's own for a statement whose result a migration changed
	// since the client described it (a client's name older than its
	// statement's shape epoch, internal/stmtcache): drivers prepare again
	// on it.
	StalePlan: {"ERROR", "0A000", "cached plan must not change result type"},
	// A login to a cluster served through per-shard views (views = true
	// in the shard file) that sets search_path: the pooler would set it
	// on each shard's server, past the views.
	ViewsSearchPath: {"FATAL", "0A000", "pgturnstile: cluster %s runs through per-shard views; search_path cannot be set at login"},
	// shard_source = etcd and no map has arrived yet: the database may be
	// a cluster's. PgBouncer's text with the reason; 57P03
	// (cannot_connect_now) tells the client to try again.
	ShardMapPending: {"FATAL", "57P03", "no such database: %s (no shard map from etcd yet)"},
	// auth_query found no row for a user under trust.
	NoSuchUser: {"FATAL", "08P01", "no such user"},

	// query_timeout of a client still waiting for a server: PgBouncer's
	// janitor says it with the setting's name, unlike the "query timeout"
	// of a query that ran too long on its server.
	QueryTimeoutWaiting: {"FATAL", "08P01", "query_timeout"},

	// A login over max_db_client_connections / max_user_client_connections
	// (pooler/clientcaps.go).
	MaxDBClientConns:   {"FATAL", "08P01", "client connections exceeded (max_db_client_connections)"},
	MaxUserClientConns: {"FATAL", "08P01", "client connections exceeded (max_user_client_connections)"},

	// A replication client whose own server refused the login (no
	// replication role, no hba line for replication): PgBouncer tells
	// the client this and logs the server's words.
	LoginFailed: {"FATAL", "08P01", "login failed"},

	// transaction_timeout (PgBouncer 1.25), said as its janitor says it.
	TransactionTimeout: {"FATAL", "08P01", "transaction timeout"},
	// server_fast_close: the client's server closed because RECONNECT or
	// a RELOAD changed its database.
	ConfigChanged: {"FATAL", "08P01", "database configuration changed"},
	// peer authentication refused (not a Unix socket, another OS user, no
	// ident map line): PgBouncer's words and SQLSTATE.
	PeerAuthFailed: {"FATAL", "08P01", "unix socket login rejected"},
}

// Error is a pooler error on its way to a client, built by New from the
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

// New formats the text of code with args, with the code's severity and
// SQLSTATE.
func New(code Code, args ...any) *Error {
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

// Append encodes e as an ErrorResponse.
func Append(dst []byte, e *Error) []byte {
	return wire.AppendErrorResponse(dst, wire.MsgErrorResponse, e.Severity, e.SQLState, e.Message, e.Detail, "")
}
