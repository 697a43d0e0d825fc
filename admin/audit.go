package admin

import (
	"strconv"
	"strings"
)

// The audit lines: each command that changes something is logged at INFO
// once it passed the role check and before it runs, in PgBouncer's words
// (admin.c's log_info "PAUSE 'appdb' command issued") where PgBouncer
// logs the command. SET, SET USER, SET POOL and KILL_CLIENT, which
// PgBouncer does not log, are logged in the same form. The session's
// logger carries the console client's identity (conn, user, addr), which
// the command's line handler writes as PgBouncer's C-n prefix.

// audit logs one audit line.
func (s *session) audit(line string) {
	s.log.Info(line)
}

// auditCommand is the line of a control command (PAUSE, RELOAD, ...):
// "PAUSE command issued" without a database, "PAUSE 'appdb' command
// issued" with one, "SHUTDOWN WAIT_FOR_SERVERS command issued".
func auditCommand(cmd Command) string {
	verb := strings.ToUpper(cmd.Verb)
	switch {
	case cmd.Verb == "shutdown" && cmd.Arg != "":
		return verb + " " + strings.ToUpper(cmd.Arg) + " command issued"
	case cmd.Verb == "kill_client":
		if id, ok := clientID(cmd.Arg); ok {
			return verb + " " + strconv.FormatUint(id, 10) + " command issued"
		}
		return verb + " command issued"
	case cmd.Arg == "":
		return verb + " command issued"
	case cmd.Value != "" && (cmd.Verb == VerbPauseShard || cmd.Verb == VerbResumeShard):
		return verb + " '" + cmd.Arg + "' " + cmd.Value + " command issued"
	}
	return verb + " '" + cmd.Arg + "' command issued"
}

// auditSet is the line of SET, SET USER and SET POOL, as their command
// tag plus the verb: "SET max_client_conn=100 command issued", "SET USER
// bob='pool_size=5' command issued". The value of a setting that can hold
// a password (auth_ldap_options' ldapbindpasswd) is not logged.
func auditSet(cmd Command) string {
	val := cmd.Value
	if cmd.Verb == VerbSet && strings.Contains(strings.ToLower(cmd.Arg), "ldap") {
		val = "***"
	}
	switch cmd.Verb {
	case VerbSetUser:
		return "SET USER " + cmd.Arg + "='" + val + "' command issued"
	case VerbSetPool:
		return "SET POOL " + cmd.Arg + "='" + val + "' command issued"
	}
	return "SET " + cmd.Arg + "=" + val + " command issued"
}
