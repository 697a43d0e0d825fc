// Package sessionattrs is libpq's target_session_attrs as a pooler's
// server logins apply it: which role (read-write or read-only, primary or
// standby) a server must have to suit the setting, in libpq's words for a
// server that does not.
package sessionattrs

import "errors"

// Reason is the short reason a login that reached a server of the wrong
// role is given (internal/loginfail), the same for every role.
const Reason = "target_session_attrs not met"

// ErrNotMet is a login that reached a server of the wrong role; the
// errors NotMet makes are it, with libpq's words for why.
var ErrNotMet = errors.New("target_session_attrs not met")

type notMetError struct{ why string }

func (e *notMetError) Error() string        { return e.why }
func (e *notMetError) Is(target error) bool { return target == ErrNotMet }

// NotMet is ErrNotMet saying why: the log gets why, and errors.Is still
// finds ErrNotMet, which prefer-standby's fallback looks for.
func NotMet(why string) error { return &notMetError{why} }

// Probe is the query that asks a server which does not report
// in_hot_standby and default_transaction_read_only at login (before
// PostgreSQL 14) for the one of them attrs is about: recovery for the
// primary/standby settings, read-only-ness for the others.
func Probe(attrs string) string {
	if attrs == "primary" || attrs == "standby" || attrs == "prefer-standby" {
		return "SELECT pg_catalog.pg_is_in_recovery()"
	}
	return "SHOW transaction_read_only"
}

// Mismatch says in libpq's words why a server that is (or is not)
// read-only and in hot standby does not suit attrs, or "" if it does.
func Mismatch(attrs string, readOnly, hotStandby bool) string {
	switch attrs {
	case "read-write":
		if readOnly {
			return "session is read-only"
		}
	case "read-only":
		if !readOnly {
			return "session is not read-only"
		}
	case "primary":
		if hotStandby {
			return "server is in hot standby mode"
		}
	case "standby", "prefer-standby":
		if !hotStandby {
			return "server is not in hot standby mode"
		}
	}
	return ""
}
