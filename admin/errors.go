package admin

import (
	"errors"
	"fmt"
)

// SQLSTATEs of console errors. PgBouncer sends every console error as
// severity ERROR with 08P01, except a failed RELOAD (F0000).
const (
	CodeProtocolViolation = "08P01"
	CodeConfigFileError   = "F0000"
	// CodeProgramLimitExceeded answers a query longer than the console
	// takes (pkt_buf).
	CodeProgramLimitExceeded = "54000"
)

// Message texts, byte for byte PgBouncer's (admin.c) or the Cloudflare
// fork's where the command is the fork's; runbooks and tests grep them.
const (
	msgAdminNeeded      = "admin access needed"
	msgBadArguments     = "bad arguments"
	msgSetFailed        = "SET failed"
	msgSetIgnored       = "SET ignored"
	msgReloadFailed     = "RELOAD failed, see logs for additional details"
	msgDBRequired       = "a database is required"
	msgBadClientID      = "invalid client pointer supplied"
	msgExtendedProtocol = "extended query protocol not supported by admin console"
	msgUnsupportedPkt   = "unsupported packet type for admin console: %d"
	msgIncompleteQuery  = "incomplete query"
	msgBadPacket        = "bad packet"
	msgQueryTooLong     = "query too long for the admin console (pkt_buf = %d)"
	msgConsoleUsage     = "Console usage"
)

var errBadArguments = &Error{SQLState: CodeProtocolViolation, Message: msgBadArguments}

// syntaxError is PgBouncer's answer to a statement no rule matches.
func syntaxError(q string) *Error {
	return &Error{SQLState: CodeProtocolViolation, Message: fmt.Sprintf("invalid command '%s', use SHOW HELP;", q)}
}

func newError(format string, args ...any) *Error {
	return &Error{SQLState: CodeProtocolViolation, Message: fmt.Sprintf(format, args...)}
}

// ErrProtocol is returned (wrapped) by Serve when it closed the session
// because the client sent a message the console does not take (Parse,
// Bind, ...) or a malformed Query.
var ErrProtocol = errors.New("admin: unsupported message for the admin console")

// ErrQueryTooLong ends Serve after a query longer than pkt_buf.
var ErrQueryTooLong = errors.New("admin: query too long")

// Notice is a Console answer that is not a failure: the command took
// effect, and the client is told something about it in a NOTICE before
// the command's tag (PgBouncer's SET of a TLS setting that cannot be
// applied yet).
type Notice struct {
	Message, Detail, Hint string
}

func (n *Notice) Error() string { return n.Message }

// notices returns the Notices err is made of: one *Notice, or several
// joined (errors.Join); ok is false when err holds anything else, a
// failure.
func notices(err error) (ns []*Notice, ok bool) {
	j, isJ := err.(interface{ Unwrap() []error })
	if !isJ {
		var n *Notice
		if errors.As(err, &n) {
			return []*Notice{n}, true
		}
		return nil, false
	}
	for _, e := range j.Unwrap() {
		n, isN := e.(*Notice)
		if !isN {
			return nil, false
		}
		ns = append(ns, n)
	}
	return ns, len(ns) > 0
}

// NoSuchUserNotice is SET USER's and SET POOL's NOTICE for a user the
// pooler does not know now: the override is still kept, by name (a user
// may come later, through auth_query or a RELOAD).
func NoSuchUserNotice(name string) *Notice {
	return &Notice{Message: "no such user: " + name,
		Detail: "The setting is kept and applies once user \"" + name + "\" logs in."}
}

// NoSuchDatabaseNotice is SET POOL's NOTICE for a database the pooler
// does not serve now: the override is kept, by name. swapped says that
// the two names would both be known the other way round: SHOW POOLS
// prints the database first, SET POOL takes the user first.
func NoSuchDatabaseNotice(user, db string, swapped bool) *Notice {
	n := &Notice{Message: "no such database: " + db,
		Detail: "The setting is kept and applies to pool " + user + "." + db + " once database \"" + db + "\" is used."}
	if swapped {
		n.Hint = "SET POOL takes user.database: did you mean SET POOL " + db + "." + user + "?"
	}
	return n
}
