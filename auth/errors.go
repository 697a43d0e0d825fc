package auth

import "fmt"

// SQLSTATEs used by this package. PgBouncer sends every login failure as a
// FATAL ErrorResponse; wrong credentials carry invalid_password, broken
// exchanges protocol_violation.
const (
	SQLStateInvalidPassword    = "28P01"
	SQLStateProtocolViolation  = "08P01"
	SQLStateFeatureUnsupported = "0A000"
)

// Message texts sent to clients. They match PgBouncer (client.c) byte for
// byte where PgBouncer has one, because runbooks and drivers' tests grep for
// them. Keep them here, pinned by TestErrorTexts.
const (
	MsgPasswordFailed    = "password authentication failed"
	MsgSASLFailed        = "SASL authentication failed"
	MsgEmptyPassword     = "empty password returned by client"
	MsgInvalidMechanism  = "client selected an invalid SASL authentication mechanism"
	MsgMalformedSCRAM    = "malformed SCRAM message"
	MsgMalformedPassword = "malformed password packet"
)

// Error is an authentication failure as the client sees it. The pooler sends
// SQLState and Message as a FATAL ErrorResponse and closes the connection.
// Detail says why, for the log only: it is never sent to the client (it may
// reveal that a user does not exist) and never contains a password or secret.
type Error struct {
	SQLState string
	Message  string
	Detail   string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Message
	}
	return e.Message + " (" + e.Detail + ")"
}

func errPassword(detail string) *Error {
	return &Error{SQLState: SQLStateInvalidPassword, Message: MsgPasswordFailed, Detail: detail}
}

func errSASL(detail string) *Error {
	return &Error{SQLState: SQLStateInvalidPassword, Message: MsgSASLFailed, Detail: detail}
}

func errMalformedSCRAM(format string, args ...any) *Error {
	return &Error{SQLState: SQLStateProtocolViolation, Message: MsgMalformedSCRAM, Detail: fmt.Sprintf(format, args...)}
}
