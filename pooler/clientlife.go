package pooler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/loginfail"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/wire"
)

// A client's goroutine apart from its read loop (serve.go): its start after
// the login, the ways it ends (fail, leave, closeBadInput, the read loop's
// timeouts and failed reads and writes), and the requests serve answers
// with an error without a server (queryCanceled, refuse).

// serve runs the client's whole life.
func (c *client) serve() {
	loggedIn := false
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error(fmt.Sprintf("panic in client: %v", r))
		}
		if !loggedIn {
			c.conn.Close()
			c.svc.clientClosed(c)
		}
	}()
	if err := c.login(); err != nil {
		c.releaseCaps()
		c.fail(err)
		return
	}
	loggedIn = true
	if c.repl != replNone {
		go c.serveReplication()
		return
	}
	// The login ran deep (TLS handshake, SCRAM) and grew this goroutine's
	// stack, which Go only shrinks at a garbage collection. A client that
	// will park when idle (park.go) gives its goroutine up then, stack and
	// all: it goes on here, saving a goroutine's start and the scheduler's
	// wake-up on every login (connection churn pays it per transaction).
	// One that cannot park (TLS, client_idle_timeout, no epoll) lives on
	// a fresh goroutine whose stack starts small: idle clients are many.
	if netpoll.CanPark && !c.tls && c.settings().ClientIdleTimeout == 0 {
		c.serveLoggedIn(true)
		return
	}
	go c.serveLoggedIn(true)
}

// serveLoggedIn relays for a logged-in client until it leaves or parks
// (park.go); a parked client comes back here on a new goroutine.
func (c *client) serveLoggedIn(afterLogin bool) {
	parked := false
	defer c.endServe(&parked)
	parked = c.loop(afterLogin)
}

// endServe ends a goroutine that served c (deferred): a panic is logged,
// and unless c parked (another goroutine or the loop owns it now) the
// client ends.
func (c *client) endServe(parked *bool) {
	if r := recover(); r != nil {
		c.logger().Error(fmt.Sprintf("panic in client: %v", r))
	}
	if !*parked {
		c.mu.link.dropLoopWait()
		c.conn.Close()
		c.svc.clientClosed(c)
	}
}

// fail sends err to an unlinked client when it is a pooler error and logs
// why the client is going.
func (c *client) fail(err error) {
	if errors.Is(err, errSilent) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	var pe *pgerror.Error
	var ae *auth.Error
	var pge *auth.ServerError
	var se *wire.StartupError
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &ae):
		pe = &pgerror.Error{Severity: "FATAL", SQLState: ae.SQLState, Message: ae.Message}
	case errors.As(err, &pge):
		// A server's own error during login is forwarded as is; one
		// without a SQLSTATE (a broken or hostile server) gets 08P01.
		pe = &pgerror.Error{Severity: "FATAL", SQLState: pge.Fields.Code, Message: pge.Fields.Message}
		if pe.SQLState == "" {
			pe.SQLState = "08P01"
		}
		if pe.Message == "" {
			pe.Message = "server login failed"
		}
	case errors.As(err, &se):
		pe = &pgerror.Error{Code: pgerror.BadPacket, Severity: "FATAL", SQLState: "08P01", Message: se.Message}
	case errors.Is(err, wire.ErrMessageTooLarge):
		pe = pgerror.New(pgerror.PacketTooLarge)
	case errors.Is(err, wire.ErrBadLength):
		pe = pgerror.New(pgerror.BadPacket)
	case isTimeout(err):
		pe = pgerror.New(pgerror.ClientLoginTimeout)
	default:
		// Go's error strings (addresses, ports, system errors) are for
		// the log only. A failure of the client's own connection gets
		// no message: it could not be delivered.
		c.logger().Warn(err.Error())
		if isConnError(err) {
			return
		}
		pe = pgerror.New(pgerror.ServerConnectFailed, loginfail.Reason(err))
	}
	if c.svc.settings().LogPoolerErrors {
		c.logger().Warn("pooler error: " + pe.Message)
	}
	// PgBouncer's line for every client it closes, with the reason it
	// told the client.
	c.closingBecause(pe.Message)
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.w.Write(pgerror.Append(c.scratch[:0], pe))
	c.w.Flush()
}

// closingBecause logs a client's end as PgBouncer's disconnect_client
// does, with log_disconnections: the reason (as the client was told it,
// where it was told one) and the connection's age.
func (c *client) closingBecause(reason string) {
	if c.svc.logDisconnections() {
		c.logger().Info("closing because: " + reason + " (age=" + formatAge(c.svc.clock.Since(c.connectedAt())) + ")")
	}
}

// leave handles the client going away. A linked server is drained back to a
// clean state by its pump (Sync, ROLLBACK, reset query) instead of being
// closed; the pump is woken by an expired read deadline.
func (c *client) leave(err error) {
	if c.closeLogged.Load() {
		// The pump closed it and said why (closeClient).
	} else if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.closingBecause("client unexpected eof")
	} else {
		c.closingBecause("client close request")
	}
	c.mu.link.abandonLink()
}

// leaveOrTimeout ends the client after a read of its current message
// failed: client_message_timeout when that deadline passed (nothing of the
// message went to a server), else the client left.
func (c *client) leaveOrTimeout(err error, msgArmed bool, st *config.Settings) {
	if msgArmed && st.ClientMessageTimeout > 0 && isTimeout(err) {
		c.closeBadInput(pgerror.New(pgerror.ClientMessageTimeout), "")
		return
	}
	c.leave(err)
}

// closeBadInput ends a client over input the pooler refuses (an unknown
// message type, a bad or oversized header, a message not finished within
// client_message_timeout) before any of it was passed on. A linked server
// is not closed for it: it goes through leave's drain (replies discarded,
// Sync, ROLLBACK, reset) and back to the pool. The client gets e once
// nothing else writes to it: at once when serve owns its writer, else once
// the pump has seen the client go (link.mu.pumpFreed), while it drains on.
// detail, when set, is logged.
func (c *client) closeBadInput(e *pgerror.Error, detail string) {
	if detail != "" {
		c.logger().Warn(detail)
	}
	var done chan struct{}
	if c.mu.link.serve.pumpStarted {
		// The link's pump may write to the client until it has seen the
		// client go (or, after a link that ended, until it has exited).
		c.mu.Lock()
		done = c.mu.link.mu.pumpFreed.ch
		c.mu.Unlock()
	}
	if done == nil {
		c.fail(e)
		c.mu.link.abandonLink()
		return
	}
	c.mu.link.abandonLink()
	<-done
	c.fail(e)
}

// readFailed handles an error reading a message header: a park request or
// an idle deadline (timeouts), a header refused by the reader, or the
// client leaving.
func (c *client) readFailed(st *config.Settings, err error) loopStep {
	switch {
	case isTimeout(err) && c.parkWanted.Load():
		if c.tryPark() {
			return stepParked
		}
		return stepNext
	case isTimeout(err) && c.clientTimedOut(st):
		return stepEnd
	case isTimeout(err):
		return stepNext
	case errors.Is(err, wire.ErrMessageTooLarge):
		// Refused on its header: nothing of it reached the server, which
		// stays clean.
		c.closeBadInput(pgerror.New(pgerror.PacketTooLarge), "")
	case errors.Is(err, wire.ErrBadLength):
		c.closeBadInput(pgerror.New(pgerror.BadPacket), "")
	default:
		c.leave(err)
	}
	return stepEnd
}

// forwardFailed handles a failed write of a message to the server, or
// read of it from the client.
func (l *link) forwardFailed(lv *loopVars, s *server, err error) loopStep {
	c := l.c
	if s.w.Err() != nil {
		// The server is gone; its pump reports it to the client.
		s.conn.Close()
		l.doneWriting()
		l.startPump(s)
		return stepNext
	}
	l.doneWriting()
	if lv.msgArmed && lv.st.ClientMessageTimeout > 0 && isTimeout(err) {
		// A message larger than the read buffer stalled midway: the
		// server has part of it and cannot be brought back clean.
		l.unlinkAndClose("client_message_timeout")
		c.fail(pgerror.New(pgerror.ClientMessageTimeout))
		return stepEnd
	}
	if errors.Is(err, wire.ErrBudgetExceeded) {
		// Nothing of the message was passed on: the server goes back
		// clean.
		c.closeBadInput(pgerror.New(pgerror.HeldMessageBudget), "")
		return stepEnd
	}
	if errors.Is(err, errUnmappedTooLong) {
		// Read whole, nothing of it passed on, as Postgres refuses it.
		c.closeBadInput(pgerror.New(pgerror.InvalidMessageLength), fmt.Sprintf("Describe or Close over %d bytes naming no mapped statement", smallMessageLimit))
		return stepEnd
	}
	c.leave(err)
	return stepEnd
}

// armClientDeadline sets the read deadline for client_idle_timeout or
// idle_transaction_timeout from the current link state.
func (c *client) armClientDeadline(st *config.Settings) {
	c.mu.Lock()
	linked := c.mu.link.mu.srv != nil
	idleInTx := linked && c.mu.link.mu.ls.Idle() && c.mu.link.mu.ls.TxStatus() != wire.TxIdle
	txLeft, txTimed := c.txRemainingLocked(st)
	c.mu.Unlock()
	var d time.Duration
	switch {
	case !linked:
		d = st.ClientIdleTimeout
	case idleInTx:
		d = st.IdleTransactionTimeout
	}
	if d, ok := earliest(d, d > 0, txLeft, txTimed); ok {
		c.conn.SetReadDeadline(time.Now().Add(d))
	} else {
		c.conn.SetReadDeadline(time.Time{})
	}
}

// clientTimedOut handles a client read deadline; true if the client was
// closed.
func (c *client) clientTimedOut(st *config.Settings) bool {
	c.mu.Lock()
	linked := c.mu.link.mu.srv != nil
	idleInTx := linked && c.mu.link.mu.ls.Idle() && c.mu.link.mu.ls.TxStatus() != wire.TxIdle
	txLeft, txTimed := c.txRemainingLocked(st)
	c.mu.Unlock()
	switch {
	case !linked && st.ClientIdleTimeout > 0:
		c.fail(pgerror.New(pgerror.ClientIdleTimeout))
		return true
	case txTimed && txLeft <= 0:
		c.mu.link.unlinkAndClose("transaction timeout")
		c.fail(pgerror.New(pgerror.TransactionTimeout))
		return true
	case idleInTx && st.IdleTransactionTimeout > 0:
		c.mu.link.unlinkAndClose("idle transaction timeout")
		c.fail(pgerror.New(pgerror.IdleTransactionTimeout))
		return true
	}
	return false
}

// queryCanceled answers a request whose wait for a server was cancelled, as
// Postgres answers a cancelled query: ERROR 57014, and the client stays
// usable. A simple query is done with ReadyForQuery; in the extended
// protocol the rest of the batch is dropped up to its Sync, which gets the
// ReadyForQuery.
func (c *client) queryCanceled(typ byte) error {
	if err := c.r.Skip(); err != nil {
		return err
	}
	out := wire.AppendErrorResponse(c.scratch[:0], wire.MsgErrorResponse, "ERROR", "57014", "canceling statement due to user request", "", "")
	return c.refuse(typ, out)
}

// refuse sends out, an ErrorResponse for a request the pooler refused
// before any server saw it (message typ, already consumed), the way
// Postgres ends a failed request: a simple Query, Sync or FunctionCall is
// done with ReadyForQuery 'I'; in the extended protocol the rest of the
// batch is dropped up to its Sync, which gets the ReadyForQuery.
func (c *client) refuse(typ byte, out []byte) error {
	switch typ {
	case wire.MsgQuery, wire.MsgSync, wire.MsgFunctionCall:
		out = wire.AppendReadyForQuery(out, wire.TxIdle)
	default:
		c.mu.Lock()
		c.mu.link.mu.skipToSync = true
		c.mu.Unlock()
	}
	c.scratch = out
	if err := c.w.Write(out); err != nil {
		return err
	}
	return c.w.Flush()
}

// judgeHeader refuses, on its 5-byte header alone, a message the client
// may not send, and ends the client on Terminate. stepOn for a message to
// route.
func (c *client) judgeHeader(st *config.Settings, typ byte, n int) loopStep {
	switch {
	case !wire.IsFrontendType(typ):
		// Checked on the header alone: the body is not read (a startup
		// packet sent again reads as type 0 with a length of its own).
		// Never forwarded: Postgres would end its backend over it.
		c.closeBadInput(pgerror.New(pgerror.UnknownPacket), fmt.Sprintf("unknown pkt from client: %d/0x%x", typ, typ))
	case n > largeMessageLimit || n > c.smallLimit(typ) && wire.IsSmallMessage(typ):
		// Postgres ends its backend over such a message; refused from
		// the header, as Postgres does, before any is read.
		c.closeBadInput(pgerror.New(pgerror.InvalidMessageLength), fmt.Sprintf("%s message of %d bytes", wire.FrontendType(typ), n))
	case typ == wire.MsgQuery && st.DisablePQExec:
		// disable_pqexec: a simple Query may carry several statements,
		// which some SQL injections rely on.
		c.closeBadInput(pgerror.New(pgerror.PQExecDisallowed), "client used \"Query\" packet type")
	case typ == wire.MsgTerminate:
		c.r.Skip()
		c.leave(nil)
	default:
		return stepOn
	}
	return stepEnd
}

// smallLimit is the longest body of a message Postgres caps at
// smallMessageLimit: a Describe or Close may name a longer statement
// while the pooler maps names (mappedNameLimit).
func (c *client) smallLimit(typ byte) int {
	if c.tracking && (typ == wire.MsgDescribe || typ == wire.MsgClose) {
		return mappedNameLimit
	}
	return smallMessageLimit
}
