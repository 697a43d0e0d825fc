package pooler

import (
	"fmt"

	"github.com/pgturnstile/pgturnstile/wire"
)

// Code names an error the pooler itself sends to a client. Texts match
// PgBouncer byte for byte: runbooks, tests and client libraries grep for them.
type Code int

const (
	CodeMaxClientConn Code = iota + 1
	CodeQueryWaitTimeout
	CodeUnsupportedStartupParam
	CodeUnsupportedOptions
	CodeNoSuchDatabase
	CodeNoSuchUser
	CodeShuttingDown
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
)

type codeInfo struct {
	sqlstate string
	format   string
}

// codes is the one table of pooler-originated error texts.
var codes = map[Code]codeInfo{
	CodeMaxClientConn:           {"08P01", "no more connections allowed (max_client_conn)"},
	CodeQueryWaitTimeout:        {"08P01", "query_wait_timeout"},
	CodeUnsupportedStartupParam: {"08P01", "unsupported startup parameter: %s"},
	CodeUnsupportedOptions:      {"08P01", "unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed"},
	CodeNoSuchDatabase:          {"08P01", "no such database: %s"},
	CodeNoSuchUser:              {"28000", "no such user: %s"},
	CodeShuttingDown:            {"08P01", "pooler is shutting down"},
	CodeServerLoginFailing:      {"08P01", "server login has been failing, cached error: %s (server_login_retry)"},
	CodeClientLoginTimeout:      {"08P01", "client_login_timeout"},
	CodeClientIdleTimeout:       {"08P01", "client_idle_timeout"},
	CodeIdleTransactionTimeout:  {"08P01", "idle transaction timeout"},
	CodeQueryTimeout:            {"08P01", "query timeout"},
	CodeStatementModeTxBlock:    {"08P01", "transaction blocks not allowed in statement pooling mode"},
	CodeOldProtocol:             {"08P01", "old V2 protocol not supported"},
	CodeBadPacket:               {"08P01", "bad packet header"},
	CodePacketTooLarge:          {"08P01", "max_packet_size exceeded"},
	CodeServerCrashed:           {"08P01", "server conn crashed?"},
	CodeNoUserName:              {"08P01", "no username supplied"},
	CodeServerConnectFailed:     {"08P01", "server connection failed: %s"},
	CodePQExecDisallowed:        {"08P01", "PQexec disallowed"},
	CodeSSLRequired:             {"08P01", "SSL required"},
	CodeDatabaseDisabled:        {"08P01", "database \"%s\" is disabled"},
	CodeEvicted:                 {"08P01", "evicted"},
}

// Error is a pooler error on its way to a client: FATAL unless Severity says
// otherwise. Errors relayed from Postgres keep their own SQLSTATE.
type Error struct {
	Code     Code
	Severity string
	SQLState string
	Message  string
}

func (e *Error) Error() string { return e.Message }

// newError formats the text of code with args.
func newError(code Code, args ...any) *Error {
	ci, ok := codes[code]
	if !ok {
		panic(fmt.Sprintf("BUG: unknown error code %d", code))
	}
	msg := ci.format
	if len(args) > 0 {
		msg = fmt.Sprintf(ci.format, args...)
	}
	return &Error{Code: code, Severity: "FATAL", SQLState: ci.sqlstate, Message: msg}
}

// appendError encodes e as an ErrorResponse.
func appendError(dst []byte, e *Error) []byte {
	return wire.AppendErrorResponse(dst, wire.MsgErrorResponse, e.Severity, e.SQLState, e.Message, "", "")
}
