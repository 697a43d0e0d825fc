package pooler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"time"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/wire"
)

// errWaitCanceled ends a wait for a server on the client's cancel request.
var errWaitCanceled = errors.New("canceled while waiting for a server")

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
	c.plain = nil // the login's alone: a parked client must not keep its socket
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
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error(fmt.Sprintf("panic in client: %v", r))
		}
		if !parked {
			c.conn.Close()
			c.svc.clientClosed(c)
		}
	}()
	parked = c.loop(afterLogin)
}

// fail sends err to an unlinked client when it is a pooler error and logs
// why the client is going.
func (c *client) fail(err error) {
	if errors.Is(err, errSilent) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	var pe *Error
	var ae *auth.Error
	var pge *auth.ServerError
	var se *wire.StartupError
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &ae):
		pe = &Error{Severity: "FATAL", SQLState: ae.SQLState, Message: ae.Message}
	case errors.As(err, &pge):
		// A server's own error during login is forwarded as is; one
		// without a SQLSTATE (a broken or hostile server) gets 08P01.
		pe = &Error{Severity: "FATAL", SQLState: pge.Fields.Code, Message: pge.Fields.Message}
		if pe.SQLState == "" {
			pe.SQLState = "08P01"
		}
		if pe.Message == "" {
			pe.Message = "server login failed"
		}
	case errors.As(err, &se):
		pe = &Error{Code: CodeBadPacket, Severity: "FATAL", SQLState: "08P01", Message: se.Message}
	case errors.Is(err, wire.ErrMessageTooLarge):
		pe = newError(CodePacketTooLarge)
	case errors.Is(err, wire.ErrBadLength):
		pe = newError(CodeBadPacket)
	case isTimeout(err):
		pe = newError(CodeClientLoginTimeout)
	default:
		// Go's error strings (addresses, ports, system errors) are for
		// the log only. A failure of the client's own connection gets
		// no message: it could not be delivered.
		c.logger().Warn(err.Error())
		if isConnError(err) {
			return
		}
		pe = newError(CodeServerConnectFailed, loginReason(err))
	}
	if c.svc.settings().LogPoolerErrors {
		c.logger().Warn("pooler error: " + pe.Message)
	}
	if c.svc.logDisconnections() {
		// PgBouncer's line for every client it closes, with the reason
		// it told the client.
		c.logger().Info("closing because: " + pe.Message + " (age=" + formatAge(c.svc.clock.Since(c.connected)) + ")")
	}
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.w.Write(appendError(c.scratch[:0], pe))
	c.w.Flush()
}

// loopStep says what loop does after one of its stages.
type loopStep uint8

const (
	stepOn     loopStep = iota // go on with this message
	stepNext                   // the message was dealt with: read the next
	stepEnd                    // the client is gone (closed or left)
	stepParked                 // the client parked: another goroutine owns c now
)

// loopVars is what loop carries from one message to the next.
type loopVars struct {
	st *config.Settings
	// timeouts: client_idle_timeout or idle_transaction_timeout own the
	// read deadline.
	timeouts bool
	// loginGrace: the early-park deadline is armed until the first read.
	loginGrace bool
	// msgArmed: awaitMessage set the read deadline for the message just
	// read (client_message_timeout, or none); it is taken off before the
	// next message.
	msgArmed bool
}

// loop relays client messages to linked servers until the client leaves.
// afterLogin: the client has just logged in; if it sends nothing within
// parkAfterLogin it parks (park.go). Each message goes through three
// stages: readNext (its header judged, its body awaited), route (answered
// without a server, or a server linked for it) and forward (recorded on
// the link and written to the server).
func (c *client) loop(afterLogin bool) (parked bool) {
	lv := c.startLoop(afterLogin)
	for {
		typ, n, step := c.readNext(&lv)
		if step == stepOn {
			var r routed
			r, step = c.mu.link.route(&lv, typ, n)
			if step == stepOn {
				step = c.mu.link.forward(&lv, r, typ, n)
			}
		}
		switch step {
		case stepEnd:
			return false
		case stepParked:
			return true
		}
	}
}

// startLoop marks the client as relaying and arms the early-park deadline
// after a login.
func (c *client) startLoop(afterLogin bool) loopVars {
	st := c.settings()
	lv := loopVars{st: st, timeouts: st.ClientIdleTimeout > 0 || st.IdleTransactionTimeout > 0 || st.TransactionTimeout > 0}
	// Idle from login, or from parked on a resumed client: only now may
	// the janitor ask it to park (again).
	c.mu.Lock()
	if s := c.mu.parkedSrv; s != nil {
		// Parked with its server (a session-mode client, SUSPEND): the
		// link goes on where it was, idle, with no pump until the next
		// request.
		c.mu.parkedSrv = nil
		c.mu.link.linkSrvLocked(s)
		c.mu.link.mu.ls.reset()
		c.setStateLocked(clientActive)
	} else {
		c.setStateLocked(clientIdle)
	}
	c.mu.Unlock()
	// The early-park deadline is armed only where the janitor would park
	// the client later anyway (a system with parking, no idle timeouts,
	// which own the deadline, and no TLS); it is cleared by the first
	// message.
	lv.loginGrace = netpoll.CanPark && afterLogin && !lv.timeouts && !c.tls
	if lv.loginGrace {
		c.parkWanted.Store(true)
		c.conn.SetReadDeadline(time.Now().Add(parkAfterLogin))
	}
	return lv
}

// readNext reads the next message's header, judges it, and waits until the
// message is in whole (awaitMessage). stepOn with the message ready to be
// routed; anything else when there is none.
func (c *client) readNext(lv *loopVars) (typ byte, n int, step loopStep) {
	if c.restNow() {
		return 0, 0, stepParked // SUSPEND: at rest between transactions
	}
	if lv.timeouts {
		c.armClientDeadline(lv.st)
	} else if lv.msgArmed {
		c.conn.SetReadDeadline(time.Time{})
	}
	lv.msgArmed = false
	typ, n, err := c.r.Next()
	if lv.loginGrace {
		lv.loginGrace = false
		if err == nil {
			c.parkWanted.Store(false)
			c.conn.SetReadDeadline(time.Time{})
		}
	}
	if err != nil {
		return 0, 0, c.readFailed(lv.st, err)
	}
	if step := c.judgeHeader(lv.st, typ, n); step != stepOn {
		return 0, 0, step
	}
	if !c.r.Pending() {
		// The message has not all arrived: wait for it before a server
		// is taken or written to.
		lv.msgArmed = true
		if err := c.awaitMessage(lv.st, n); err != nil {
			if isTimeout(err) {
				c.closeBadInput(newError(CodeClientMessageTimeout), "")
			} else {
				c.leave(err)
			}
			return 0, 0, stepEnd
		}
	}
	return typ, n, stepOn
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
		c.closeBadInput(newError(CodePacketTooLarge), "")
	case errors.Is(err, wire.ErrBadLength):
		c.closeBadInput(newError(CodeBadPacket), "")
	default:
		c.leave(err)
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

// judgeHeader refuses, on its 5-byte header alone, a message the client
// may not send, and ends the client on Terminate. stepOn for a message to
// route.
func (c *client) judgeHeader(st *config.Settings, typ byte, n int) loopStep {
	switch {
	case !isFrontendType(typ):
		// Checked on the header alone: the body is not read (a startup
		// packet sent again reads as type 0 with a length of its own).
		// Never forwarded: Postgres would end its backend over it.
		c.closeBadInput(newError(CodeUnknownPacket), fmt.Sprintf("unknown pkt from client: %d/0x%x", typ, typ))
	case n > largeMessageLimit || n > c.smallLimit(typ) && isSmallMessage(typ):
		// Postgres ends its backend over such a message; refused from
		// the header, as Postgres does, before any is read.
		c.closeBadInput(newError(CodeInvalidMessageLength), fmt.Sprintf("%s message of %d bytes", wire.FrontendType(typ), n))
	case typ == wire.MsgQuery && st.DisablePQExec:
		// disable_pqexec: a simple Query may carry several statements,
		// which some SQL injections rely on.
		c.closeBadInput(newError(CodePQExecDisallowed), "client used \"Query\" packet type")
	case typ == wire.MsgTerminate:
		c.r.Skip()
		c.leave(nil)
	default:
		return stepOn
	}
	return stepEnd
}

// route finds where a message goes: answered by the pooler without a
// server (answerUnlinked), dropped up to the next Sync after an error the
// pooler raised, refused during COPY IN, or to the linked server, which
// is linked for it first when there is none (linkFor).
//
// With stepOn the message is recorded on the link (recordLocked) under
// the same hold of c.mu that found the link linked, so the pump cannot
// release the server in between; route releases c.mu before it returns,
// whatever it returns.
func (l *link) route(lv *loopVars, typ byte, n int) (routed, loopStep) {
	c := l.c
	c.mu.Lock()
	if c.mu.state == clientDraining {
		// The pump found the client's socket failing (relayFailed) and
		// closed it: the client left, and what is left of its messages in
		// the read buffer is not run (nor a server linked for it). It ends
		// as the next read of the closed socket would have.
		c.mu.Unlock()
		c.leave(net.ErrClosed)
		return routed{}, stepEnd
	}
	for l.mu.releasing {
		// The pump is releasing the server at the end of a transaction
		// (afterReady): this message goes to whichever server the
		// pool gives next.
		l.mu.releaseDone.Wait()
	}
	s := l.mu.srv
	if s == nil {
		l.followTrackingLocked()
	}
	if s == nil && (c.tracking || l.mu.skipToSync) {
		c.mu.Unlock()
		handled, err := l.answerUnlinked(typ, n)
		if errors.Is(err, wire.ErrBudgetExceeded) {
			c.closeBadInput(newError(CodeHeldMessageBudget), "")
			return routed{}, stepEnd
		}
		if err != nil {
			c.leaveOrTimeout(err, lv.msgArmed, lv.st)
			return routed{}, stepEnd
		}
		if handled {
			return routed{}, stepNext
		}
		c.mu.Lock()
		s = l.mu.srv
	}
	if s == nil {
		c.mu.Unlock()
		var step loopStep
		if s, step = l.linkFor(typ, n); step != stepOn {
			return routed{}, step
		}
		c.mu.Lock()
	}
	if l.mu.skipToSync && typ != wire.MsgSync {
		// After an error the pooler raised, like Postgres: drop
		// everything up to the client's Sync.
		c.mu.Unlock()
		if err := l.skipAfterError(typ, n); err != nil {
			c.leaveOrTimeout(err, lv.msgArmed, lv.st)
			return routed{}, stepEnd
		}
		l.flushBatch(s, false)
		if !c.r.Pending() {
			l.startPump(s)
		}
		return routed{}, stepNext
	}
	l.mu.skipToSync = false
	if l.mu.ls.feeding && !isCopyInput(typ) {
		// Postgres would end the COPY with an error over it and consume
		// it; what the client's later messages then get depends on how
		// far the server had read.
		c.mu.Unlock()
		c.closeBadInput(newError(CodeCopyUnexpectedMessage, typ), "")
		return routed{}, stepEnd
	}
	r := routed{s: s, mapped: l.recordLocked(typ, n)}
	r.txLeft, r.txTimed = c.txRemainingLocked(lv.st)
	c.mu.Unlock()
	return r, stepOn
}

// routed is where route sent a message: the linked server, and what
// forward needs of what route recorded under c.mu.
type routed struct {
	s      *server
	mapped bool // relayed by relayMapped rather than as it is
	// txLeft is transaction_timeout's time left, when txTimed.
	txLeft  time.Duration
	txTimed bool
}

// linkFor links a server for the message typ of n bytes (linkServer) and
// answers a wait that ended without one: cancelled, shed by admission, or
// failed.
func (l *link) linkFor(typ byte, n int) (*server, loopStep) {
	c := l.c
	s, err := l.linkServer(typ, n)
	if err == nil {
		return s, stepOn
	}
	if errors.Is(err, errWaitCanceled) {
		if err := c.queryCanceled(typ); err != nil {
			c.leave(err)
			return nil, stepEnd
		}
		return nil, stepNext
	}
	if shed, ok := err.(*shedError); ok {
		if err := c.shed(typ, shed.policy, shed.ShedError); err != nil {
			c.leave(err)
			return nil, stepEnd
		}
		return nil, stepNext
	}
	c.r.Skip()
	c.fail(err)
	return nil, stepEnd
}

// forward writes the message route recorded to the linked server r.s,
// flushes once the client's batch is consumed, and relays the reply
// inline or leaves it to the pump (relayOrPump). c.mu is not held.
func (l *link) forward(lv *loopVars, r routed, typ byte, n int) loopStep {
	c := l.c
	s := r.s
	if typ == wire.MsgQuery || typ == wire.MsgSync {
		// The reply is awaited on the server: query_timeout and
		// transaction_timeout are its read deadline (pumpTimeout).
		if d, ok := earliest(lv.st.QueryTimeout, lv.st.QueryTimeout > 0, r.txLeft, r.txTimed); ok {
			s.conn.SetReadDeadline(time.Now().Add(d))
		}
	}
	var err error
	if r.mapped {
		err = l.relayMapped(typ, n, s)
	} else {
		err = c.r.Forward(s.w)
	}
	if err != nil {
		return l.forwardFailed(lv, s, err)
	}
	l.flushBatch(s, l.willRelayInline(s, typ))
	if l.relayOrPump(s, typ) && s.pool.hasWaiters() {
		// The reply is out and the server is back in the pool, which has
		// clients queued: the pooler is busy. Let the runnable goroutines
		// go first; by the time this one reads its client again the next
		// request has usually arrived, which saves a read that finds
		// nothing and the park and wake-up after it. (A client's request
		// waits for a server anyway.)
		runtime.Gosched()
	}
	return stepNext
}

// recordLocked records the message typ of n bytes on the link before it
// goes to the server, and marks serve as writing to the server. It
// reports whether the message is mapped (relayMapped) rather than passed
// on as it is.
func (l *link) recordLocked(typ byte, n int) (mapped bool) {
	c := l.c
	ignored := l.mu.ls.feeding // a Sync or Flush the server ignores in COPY IN
	first := l.mu.ls.idle() && l.mu.ls.txStatus == wire.TxIdle && !ignored
	if l.mu.ls.idle() {
		// The first request after an idle point starts a query (and a
		// transaction when none is open).
		c.mu.queryStart = c.svc.clock.Now()
		if l.mu.ls.txStatus == wire.TxIdle {
			l.mu.xactStart = c.mu.queryStart
		}
	}
	l.mu.ls.fromClient(typ)
	l.serve.recvBytes += int64(n) + 5
	if c.tracking {
		l.captureLocked(typ, n, first)
		switch typ {
		case wire.MsgParse, wire.MsgBind, wire.MsgDescribe, wire.MsgClose, wire.MsgQuery:
			mapped = true
		case wire.MsgSync, wire.MsgFunctionCall:
			if !ignored {
				l.mu.ops.push(op{kind: opSync, msg: typ})
			}
		}
	}
	l.mu.writing = true
	return mapped
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
		c.fail(newError(CodeClientMessageTimeout))
		return stepEnd
	}
	if errors.Is(err, wire.ErrBudgetExceeded) {
		// Nothing of the message was passed on: the server goes back
		// clean.
		c.closeBadInput(newError(CodeHeldMessageBudget), "")
		return stepEnd
	}
	if errors.Is(err, errUnmappedTooLong) {
		// Read whole, nothing of it passed on, as Postgres refuses it.
		c.closeBadInput(newError(CodeInvalidMessageLength), fmt.Sprintf("Describe or Close over %d bytes naming no mapped statement", smallMessageLimit))
		return stepEnd
	}
	c.leave(err)
	return stepEnd
}

// isFrontendType reports whether typ is a message a logged-in client may
// send: the frontend messages of protocol 3.0 after authentication
// (PasswordMessage 'p' belongs to the login only). Postgres ends the
// session over any other ("invalid frontend message type"), PgBouncer the
// client ("unknown pkt").
func isFrontendType(typ byte) bool {
	switch typ {
	case wire.MsgBind, wire.MsgClose, wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail,
		wire.MsgDescribe, wire.MsgExecute, wire.MsgFlush, wire.MsgFunctionCall, wire.MsgParse,
		wire.MsgQuery, wire.MsgSync, wire.MsgTerminate:
		return true
	}
	return false
}

func isSmallMessage(typ byte) bool {
	switch typ {
	case wire.MsgDescribe, wire.MsgClose, wire.MsgSync, wire.MsgFlush, wire.MsgTerminate, wire.MsgCopyDone, wire.MsgCopyFail:
		return true
	}
	return false
}

// awaitMessage waits until the current message, of n body bytes, is in the
// read buffer whole, before any of it goes on: a server is taken (link), or
// written to, only for a message that has arrived, so a client that sends
// a header and stalls holds no server (PgBouncer links one on the header).
// A message larger than the read buffer is streamed and cannot be held back
// whole: its server is taken once the buffer is full of it, and a stall
// after that holds the server.
//
// The wait, and the streaming of a larger message after it, end after
// client_message_timeout when it is set: the read deadline stays armed for
// the rest of the message (loop takes it off). A park request or an idle
// deadline that expires meanwhile does not end it: the client is busy.
func (c *client) awaitMessage(st *config.Settings, n int) error {
	var deadline time.Time
	if st.ClientMessageTimeout > 0 {
		deadline = time.Now().Add(st.ClientMessageTimeout)
	}
	c.conn.SetReadDeadline(deadline)
	for {
		_, err := c.r.Peek(n)
		if err == nil || !isTimeout(err) {
			return err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return err
		}
		// Not our deadline: the janitor's park request, or one armed
		// for idleness. A client with part of a message sent is neither
		// parked nor idle.
		c.parkWanted.Store(false)
		c.conn.SetReadDeadline(deadline)
	}
}

// leaveOrTimeout ends the client after a read of its current message
// failed: client_message_timeout when that deadline passed (nothing of the
// message went to a server), else the client left.
func (c *client) leaveOrTimeout(err error, msgArmed bool, st *config.Settings) {
	if msgArmed && st.ClientMessageTimeout > 0 && isTimeout(err) {
		c.closeBadInput(newError(CodeClientMessageTimeout), "")
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
// the pump has seen the client go (link.pumpFreed), while it drains on.
// detail, when set, is logged.
func (c *client) closeBadInput(e *Error, detail string) {
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

// flushBatch flushes to the server once the client's batch is consumed,
// then hands the server's writer back. With awaitReply (serve reads the
// reply itself next, see willRelayInline) it returns once the reply starts
// to arrive, saving the read that would find nothing yet.
func (l *link) flushBatch(s *server, awaitReply bool) {
	c := l.c
	if c.r.Pending() {
		return
	}
	if l.serve.recvBytes > 0 {
		l.mu.pool.stats.received.Add(l.serve.recvBytes)
		l.serve.recvBytes = 0
	}
	var err error
	if awaitReply {
		err = s.w.FlushAwaitReply()
	} else {
		err = s.w.Flush()
	}
	if err != nil {
		s.conn.Close()
	}
	l.doneWriting()
}

// willRelayInline reports whether relayOrPump will read the reply to the
// batch just relayed on this goroutine: the batch ends with Sync or Query
// (the server answers it), no pump reads the server, and nothing of an
// earlier reply is left unread in the server's buffer.
func (l *link) willRelayInline(s *server, typ byte) bool {
	c := l.c
	return !c.r.Pending() && !l.serve.pumpStarted && (typ == wire.MsgSync || typ == wire.MsgQuery) && s.r.Buffered() == 0
}

// doneWriting hands the linked server's writer back: from here on the pump
// may release the server.
func (l *link) doneWriting() {
	c := l.c
	c.mu.Lock()
	l.mu.writing = false
	l.mu.writerDone.Broadcast()
	c.mu.Unlock()
}

// armClientDeadline sets the read deadline for client_idle_timeout or
// idle_transaction_timeout from the current link state.
func (c *client) armClientDeadline(st *config.Settings) {
	c.mu.Lock()
	linked := c.mu.link.mu.srv != nil
	idleInTx := linked && c.mu.link.mu.ls.idle() && c.mu.link.mu.ls.txStatus != wire.TxIdle
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
	idleInTx := linked && c.mu.link.mu.ls.idle() && c.mu.link.mu.ls.txStatus != wire.TxIdle
	txLeft, txTimed := c.txRemainingLocked(st)
	c.mu.Unlock()
	switch {
	case !linked && st.ClientIdleTimeout > 0:
		c.fail(newError(CodeClientIdleTimeout))
		return true
	case txTimed && txLeft <= 0:
		c.mu.link.unlinkAndClose("transaction timeout")
		c.fail(newError(CodeTransactionTimeout))
		return true
	case idleInTx && st.IdleTransactionTimeout > 0:
		c.mu.link.unlinkAndClose("idle transaction timeout")
		c.fail(newError(CodeIdleTransactionTimeout))
		return true
	}
	return false
}
