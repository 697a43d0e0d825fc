package admin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/pgturnstile/pgturnstile/wire"
)

// session is one console client between two queries. It is owned by the
// goroutine running Serve.
type session struct {
	con  Console
	w    *wire.Writer
	user string
	role Role
	// log gets the audit lines of the commands that change something
	// ("PAUSE 'appdb' command issued"); it carries who the console
	// client is (user, address) as its attributes.
	log  *slog.Logger
	buf  []byte // reply being built; written and flushed once per query
	done bool   // SHUTDOWN (immediate): stop serving without a reply

	// sendFD passes descriptors with SHOW FDS (ServeFDs); nil: plain.
	sendFD FDSender
	// handover are the IDs a SHOW FDS passed, for the SHUTDOWN that
	// hands them over; handedOver once it did.
	handover   []uint64
	handedOver bool
}

// Serve runs the console's simple-query loop on an authenticated
// connection until the client sends Terminate or leaves (nil), the client
// sends a message the console does not take (ErrProtocol, after an ERROR
// that says so), SHUTDOWN without a mode (nil, no reply: the process is
// going away), or a read or write fails (that error). The welcome
// (AuthenticationOk, ParameterStatus, BackendKeyData, ReadyForQuery) has
// already been sent by the pooler.
func Serve(con Console, r *wire.Reader, w *wire.Writer, user string, role Role) error {
	return ServeFDs(con, r, w, user, role, nil, nil)
}

// ServeFDs is Serve for a session that may take part in an online restart:
// send passes SHOW FDS's descriptors (fds.go). A session that got them and
// ends without the SHUTDOWN that hands them over resumes the service: the
// restart failed, and the old process goes on. log gets the audit line of
// each command that changes something (audit.go), nil: none.
func ServeFDs(con Console, r *wire.Reader, w *wire.Writer, user string, role Role, send FDSender, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &session{con: con, w: w, user: user, role: role, sendFD: send, log: log}
	defer func() {
		if s.handover != nil && !s.handedOver {
			con.Resume("")
		}
	}()
	for {
		typ, n, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch typ {
		case wire.MsgQuery:
			if limit := maxQuery(con); n > limit {
				// Refused from its header: the query is never read,
				// whatever length it claims.
				s.buf = wire.AppendErrorResponse(s.buf, wire.MsgErrorResponse, "FATAL", CodeProgramLimitExceeded, fmt.Sprintf(msgQueryTooLong, limit), "", "")
				if err := s.flush(); err != nil {
					return err
				}
				return fmt.Errorf("%w: %s: %d bytes", ErrQueryTooLong, fmt.Sprintf(msgQueryTooLong, limit), n)
			}
			body, err := r.ReadBody(nil)
			if err != nil {
				return err
			}
			i := bytes.IndexByte(body, 0)
			if i < 0 {
				return s.close(fmt.Errorf("%w: %s", ErrProtocol, msgIncompleteQuery), msgIncompleteQuery)
			}
			con.ConsoleQuery()
			s.exec(string(body[:i]))
			if s.done {
				return s.flush()
			}
			s.buf = wire.AppendReadyForQuery(s.buf, wire.TxIdle)
			if err := s.flush(); err != nil {
				return err
			}
		case wire.MsgTerminate:
			return nil
		default:
			if err := r.Skip(); err != nil {
				return err
			}
			// As PgBouncer: the reason as ERROR with ReadyForQuery, then
			// FATAL "bad packet" and the connection is closed.
			switch typ {
			case wire.MsgParse, wire.MsgBind, wire.MsgExecute:
				s.error(newError(msgExtendedProtocol))
			default:
				s.error(newError(msgUnsupportedPkt, typ))
			}
			s.buf = wire.AppendReadyForQuery(s.buf, wire.TxIdle)
			return s.close(fmt.Errorf("%w: message %q", ErrProtocol, typ), msgBadPacket)
		}
	}
}

// maxQuery is the longest console query taken: pkt_buf, as PgBouncer's
// console takes no query larger than its packet buffer, and never under
// 512 bytes.
func maxQuery(con Console) int {
	return max(con.Config().Settings.PktBuf, 512)
}

// close sends FATAL reason (PgBouncer's disconnect_client with notify) and
// returns err for Serve to end with.
func (s *session) close(err error, reason string) error {
	s.buf = wire.AppendErrorResponse(s.buf, wire.MsgErrorResponse, "FATAL", CodeProtocolViolation, reason, "", "")
	if ferr := s.flush(); ferr != nil {
		return ferr
	}
	return err
}

func (s *session) flush() error {
	err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	if err != nil {
		return err
	}
	return s.w.Flush()
}

// error appends an ErrorResponse (severity ERROR: the session goes on).
func (s *session) error(e *Error) {
	s.errorDetail(e, "")
}

func (s *session) errorDetail(e *Error, detail string) {
	code := e.SQLState
	if code == "" {
		code = CodeProtocolViolation
	}
	s.buf = wire.AppendErrorResponse(s.buf, wire.MsgErrorResponse, "ERROR", code, e.Message, detail, "")
}

func (s *session) notice(msg, detail string) {
	s.buf = wire.AppendErrorResponse(s.buf, wire.MsgNoticeResponse, "NOTICE", "00000", msg, detail, "")
}

// notices sends each Notice of a Console answer that took effect.
func (s *session) notices(ns []*Notice) {
	for _, n := range ns {
		s.buf = wire.AppendErrorResponse(s.buf, wire.MsgNoticeResponse, "NOTICE", "00000", n.Message, n.Detail, n.Hint)
	}
}

func (s *session) complete(tag string) {
	s.buf = appendCommandComplete(s.buf, tag)
}

// fail reports a Console error: an *Error as it is, anything else as
// generic (PgBouncer's text for the command) with the error as DETAIL.
func (s *session) fail(err error, generic *Error) {
	var e *Error
	if errors.As(err, &e) {
		s.error(e)
		return
	}
	s.errorDetail(generic, err.Error())
}

// exec runs one statement and appends its reply, without ReadyForQuery.
func (s *session) exec(q string) {
	cmd, err := ParseCommand(q)
	if err != nil {
		s.error(err.(*Error))
		return
	}
	switch cmd.Verb {
	case "show", "select":
		s.show(q, cmd.Arg)
	case VerbSet:
		s.set(cmd)
	case VerbSetUser, VerbSetPool:
		s.setOverride(cmd)
	case VerbPauseShard, VerbResumeShard:
		s.shardCommand(cmd)
	default:
		s.command(q, cmd)
	}
}

func (s *session) show(q, what string) {
	if name, val, ok := fakeParam(what); ok {
		s.table(cols("s", name), [][]value{{text(val)}})
		return
	}
	if strings.EqualFold(what, "help") {
		s.notice(msgConsoleUsage, helpText)
		s.complete("SHOW")
		return
	}
	sc, ok := shows[strings.ToLower(what)]
	if !ok {
		s.error(syntaxError(q))
		return
	}
	if sc.adminOnly && s.role != RoleAdmin {
		s.error(newError(msgAdminNeeded))
		return
	}
	if s.sendFD != nil && strings.EqualFold(what, "fds") {
		if err := s.showFDs(); err != nil {
			s.done = true // the connection failed: end the session
		}
		return
	}
	s.table(sc.cols, sc.rows(s.con))
}

// table appends a result set and its SHOW tag.
func (s *session) table(cs []column, rows [][]value) {
	s.buf = appendRowDescription(s.buf, cs)
	for _, r := range rows {
		if len(r) != len(cs) {
			panic(fmt.Sprintf("BUG: admin: row of %d values for %d columns", len(r), len(cs)))
		}
		s.buf = appendDataRow(s.buf, r)
	}
	s.complete("SHOW")
}

// set is SET key = value for a [pgbouncer] setting.
func (s *session) set(cmd Command) {
	if s.fakeSet(cmd.Arg) {
		return
	}
	if s.role != RoleAdmin {
		s.error(newError(msgAdminNeeded))
		return
	}
	s.audit(auditSet(cmd))
	if err := s.con.Set(cmd.Arg, cmd.Value); err != nil {
		ns, ok := notices(err)
		if !ok {
			s.setFailed(err)
			return
		}
		s.notices(ns)
	}
	s.complete("SET " + cmd.Arg + "=" + cmd.Value)
}

// fakeSet answers SET of a faked driver parameter: a NOTICE and tag SET,
// for any role, nothing changed.
func (s *session) fakeSet(key string) bool {
	if _, _, ok := fakeParam(key); !ok {
		return false
	}
	s.notice(msgSetIgnored, "")
	s.complete("SET")
	return true
}

// setOverride is the fork's SET USER name = '...' and SET POOL user.db = '...'.
// The settings string is validated here and passed on as written.
func (s *session) setOverride(cmd Command) {
	if s.fakeSet(cmd.Arg) {
		return
	}
	if s.role != RoleAdmin {
		s.error(newError(msgAdminNeeded))
		return
	}
	s.audit(auditSet(cmd))
	var err error
	if cmd.Verb == VerbSetUser {
		if _, err = ParseUserSettings(cmd.Value); err == nil {
			err = s.con.SetUser(cmd.Arg, cmd.Value)
		}
	} else {
		user, db, ok := SplitPoolName(cmd.Arg)
		if !ok {
			err = fmt.Errorf("invalid pool name %q: must be user.database", cmd.Arg)
		} else if _, err = ParsePoolSettings(cmd.Value); err == nil {
			err = s.con.SetPool(user, db, cmd.Value)
		}
	}
	if err != nil {
		// The override took effect; the NOTICEs say the user or the
		// database is not known now (a typo, or the order of SET POOL's
		// name reversed).
		ns, ok := notices(err)
		if !ok {
			s.setFailed(err)
			return
		}
		s.notices(ns)
	}
	s.complete("SET " + cmd.Arg + "=" + cmd.Value)
}

// setFailed answers a rejected SET, SET USER or SET POOL with PgBouncer's
// and the fork's fixed text "SET failed" (runbooks match it); the reason
// goes in DETAIL, with the Console's SQLSTATE when it gave one.
func (s *session) setFailed(err error) {
	e := newError(msgSetFailed)
	var ce *Error
	if errors.As(err, &ce) && ce.SQLState != "" {
		e.SQLState = ce.SQLState
	}
	s.errorDetail(e, err.Error())
}

// command runs the control commands. Argument checks that PgBouncer makes
// before the role check come first, so the same input gives the same error.
func (s *session) command(q string, cmd Command) {
	arg := cmd.Arg
	var err error
	var tag string
	switch cmd.Verb {
	case "reload", "suspend":
		if arg != "" {
			s.error(syntaxError(q))
			return
		}
	case "shutdown":
		if arg != "" && !strings.EqualFold(arg, "wait_for_servers") && !strings.EqualFold(arg, "wait_for_clients") {
			s.error(syntaxError(q))
			return
		}
	case "pause", "resume", "disable", "enable", "reconnect", "kill", "kill_client", "wait_close":
	default:
		s.error(syntaxError(q))
		return
	}
	if s.role != RoleAdmin {
		s.error(newError(msgAdminNeeded))
		return
	}
	if !(cmd.Verb == "shutdown" && arg == "" && s.handover != nil) {
		// The online restart's SHUTDOWN logs its own hand-over.
		s.audit(auditCommand(cmd))
	}
	generic := newError("%s failed", strings.ToUpper(cmd.Verb))
	switch cmd.Verb {
	case "reload":
		tag = "RELOAD"
		generic = &Error{SQLState: CodeConfigFileError, Message: msgReloadFailed}
		err = s.con.Reload()
	case "suspend":
		tag, err = "SUSPEND", s.con.Suspend()
	case "shutdown":
		switch {
		case arg == "" && s.handover != nil:
			// The online restart's SHUTDOWN: what SHOW FDS passed is
			// the new process's now. No reply: the session ends.
			s.con.HandOver(s.handover)
			s.handedOver = true
			s.done = true
			return
		case arg == "":
			// PgBouncer does not answer: the connection stays open until
			// the process exits.
			s.con.Shutdown(ShutdownImmediate)
			s.done = true
			return
		case strings.EqualFold(arg, "wait_for_servers"):
			s.con.Shutdown(ShutdownWaitForServers)
		default:
			s.con.Shutdown(ShutdownWaitForClients)
		}
		tag = "SHUTDOWN"
	case "pause":
		tag, err = "PAUSE", s.con.Pause(arg)
	case "resume":
		tag, err = "RESUME", s.con.Resume(arg)
	case "disable", "enable":
		if arg == "" {
			s.error(newError(msgDBRequired))
			return
		}
		if cmd.Verb == "disable" {
			tag, err = "DISABLE", s.con.Disable(arg)
		} else {
			tag, err = "ENABLE", s.con.Enable(arg)
		}
	case "reconnect":
		tag, err = "RECONNECT", s.con.Reconnect(arg)
	case "kill":
		tag, err = "KILL", s.con.Kill(arg)
	case "kill_client":
		id, ok := clientID(arg)
		if !ok {
			s.error(newError(msgBadClientID))
			return
		}
		tag, err = "KILL_CLIENT", s.con.KillClient(id)
	case "wait_close":
		tag, err = "WAIT_CLOSE", s.con.WaitClose(arg)
	}
	if err != nil {
		s.fail(err, generic)
		return
	}
	s.complete(tag)
}

// clientID reads KILL_CLIENT's argument as sscanf("%llu") does: the
// leading decimal digits.
func clientID(arg string) (uint64, bool) {
	n := 0
	for n < len(arg) && arg[n] >= '0' && arg[n] <= '9' {
		n++
	}
	if n == 0 {
		return 0, false
	}
	id, err := strconv.ParseUint(arg[:n], 10, 64)
	return id, err == nil
}

// shardCommand runs PAUSE SHARD and RESUME SHARD (pgturnstile's), for
// admins only, as PAUSE and RESUME.
func (s *session) shardCommand(cmd Command) {
	if s.role != RoleAdmin {
		s.error(newError(msgAdminNeeded))
		return
	}
	s.audit(auditCommand(cmd))
	var err error
	tag := strings.ToUpper(cmd.Verb)
	if cmd.Verb == VerbPauseShard {
		err = s.con.PauseShard(cmd.Arg, cmd.Value)
	} else {
		err = s.con.ResumeShard(cmd.Arg, cmd.Value)
	}
	if err != nil {
		s.fail(err, newError("%s failed", tag))
		return
	}
	s.complete(tag)
}
