package pooler

import (
	"errors"
	"net"
	"runtime"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/wire"
)

// errWaitCanceled ends a wait for a server on the client's cancel request.
var errWaitCanceled = errors.New("canceled while waiting for a server")

// loopStep says what loop does after one of its stages.
type loopStep uint8

const (
	stepOn        loopStep = iota // go on with this message
	stepNext                      // the message was dealt with: read the next
	stepEnd                       // the client is gone (closed or left)
	stepParked                    // the client parked: another goroutine owns c now
	stepReroute                   // a paused range let the message go: route it again (shardpause.go)
	stepAwait                     // on the event loop: the request is sent, its reply awaited (loop.go)
	stepLeaveLoop                 // on the event loop: the message needs a goroutine (loop.go)
	stepLoopWait                  // on the event loop: queued for a server; the message runs again when one is granted (loop.go)
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
	return c.serveLoop(&lv)
}

// serveLoop is loop's body, where a client handed back by the event loop
// (loop.go) goes on too. Between requests the client rests on the loop
// when it can (restOnLoop), and this goroutine ends.
func (c *client) serveLoop(lv *loopVars) (parked bool) {
	// The link stays while the loop runs: only parking drops it, on this
	// goroutine, after which the loop ends.
	l := c.mu.link
	for {
		if c.restOnLoop(lv) {
			return true
		}
		typ, n, step := c.readNext(lv)
		if step == stepOn {
			step = l.runMessage(lv, typ, n)
		}
		switch step {
		case stepEnd:
			return false
		case stepParked:
			return true
		}
	}
}

// runMessage routes the message readNext returned and forwards it.
func (l *link) runMessage(lv *loopVars, typ byte, n int) loopStep {
	r, step := l.route(lv, typ, n)
	if step == stepOn {
		step = l.forward(lv, r, typ, n)
	}
	return step
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
		c.mu.link.mu.ls.Reset()
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
	if c.svc.parker.suspended.Load() && c.restNow() {
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
				c.closeBadInput(pgerror.New(pgerror.ClientMessageTimeout), "")
			} else {
				c.leave(err)
			}
			return 0, 0, stepEnd
		}
	}
	return typ, n, stepOn
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
	var sd shardDecision
	if c.shard != nil && shardDecides(typ) {
		// A sharded cluster's client: where the message runs is decided
		// (or answered) before anything else (shardroute.go).
		var step loopStep
		rerouted := c.shard.rerouted
		c.shard.rerouted = false
		if sd, step = l.shardDecide(typ, n); step != stepOn {
			return routed{}, step
		}
		if sd.active && !rerouted && (typ == wire.MsgQuery || typ == wire.MsgBind || sd.d.Refused() || sd.d.Scattered()) {
			c.shard.tally.Add(c.shard.Cluster, sd.d)
		}
	}
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
	// A sharded client's Parse whose batch its Bind has decided links that
	// shard's server now, not answered by the mapping alone: a Describe
	// before the Bind would otherwise link the home pool's, and the Bind
	// find the batch on another shard (a scatter takes the batch whole).
	decidedParse := sd.active && !sd.undecided && typ == wire.MsgParse
	if s == nil && !decidedParse && (c.tracking || l.mu.skipToSync) {
		c.mu.Unlock()
		handled, err := l.answerUnlinked(typ, n)
		if errors.Is(err, wire.ErrBudgetExceeded) {
			c.closeBadInput(pgerror.New(pgerror.HeldMessageBudget), "")
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
		if sd.active {
			if step := l.shardLink(typ, sd.d); step != stepOn {
				if step == stepReroute {
					// It waited for a paused range: decided again under
					// the map in force now (counted once).
					c.shard.rerouted = true
					return l.route(lv, typ, n)
				}
				return routed{}, step
			}
		}
		var step loopStep
		if s, step = l.linkFor(typ, n); step != stepOn {
			return routed{}, step
		}
		c.mu.Lock()
		if c.shard != nil && c.shard.Held != nil {
			l.heldLinkedLocked(s, sd)
		}
	} else if sd.active && !l.mu.skipToSync {
		// A statement of a transaction already on a shard: it must
		// belong to the same one, and enter no range paused since.
		raise := l.heldToShardLocked(typ, s, sd.d)
		if raise == nil {
			raise = l.pausedInTxLocked(typ, sd.d)
		}
		if raise != nil {
			r := routed{s: s, raise: raise, mapped: l.recordLocked(typ, n)}
			r.txLeft, r.txTimed = c.txRemainingLocked(lv.st)
			c.mu.Unlock()
			return r, stepOn
		}
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
	if l.mu.ls.BreaksCopy(typ) {
		// Postgres would end the COPY with an error over it and consume
		// it; what the client's later messages then get depends on how
		// far the server had read.
		c.mu.Unlock()
		c.closeBadInput(pgerror.New(pgerror.CopyUnexpectedMessage, typ), "")
		return routed{}, stepEnd
	}
	r := routed{s: s, mapped: l.recordLocked(typ, n)}
	r.txLeft, r.txTimed = c.txRemainingLocked(lv.st)
	c.mu.Unlock()
	return r, stepOn
}

// followTrackingLocked starts or stops the mapping for this client when
// max_prepared_statements was changed (SET, RELOAD) from or to 0 since,
// as PgBouncer reads it for each message: with 0, a client's statement
// names go to the server as they are. It changes only where nothing of
// the mapping is in flight: no server linked (the caller's check), no
// error owed, no skip to Sync. The client's names are kept, as PgBouncer
// keeps them, for when the mapping is on again; its remembered unnamed
// Parse is not (it may be stale by then). Called with c.mu held.
func (l *link) followTrackingLocked() {
	c := l.c
	on := c.mapsStatements(c.svc.settings())
	if on == c.tracking || l.mu.skipToSync || l.mu.ops.Len() > 0 {
		return
	}
	c.tracking = on
	c.forgetUnnamedLocked()
}

// answerUnlinked answers, without a server, the messages of a client that
// holds none and that no server is needed for: Sync (ReadyForQuery 'I'; no
// transaction is open when no server is linked), Flush, Close (the client's
// map only; portals do not outlive transactions), a Parse of a statement
// some server has already parsed successfully (mapped now, prepared on the
// server at its first Bind or Describe), and everything up to the next Sync
// after an error the pooler raised. Replies are written in order to the
// client writer, which serve owns while unlinked.
//
// Besides saving a server checkout per PQprepare, this keeps clients that
// prepare synchronously while other sessions of the same thread hold every
// server (pgbench -M prepared) from waiting on themselves.
func (l *link) answerUnlinked(typ byte, bodyLen int) (bool, error) {
	c := l.c
	if l.mu.skipToSync && typ != wire.MsgSync {
		return true, l.skipAfterError(typ, bodyLen)
	}
	if !c.tracking && !l.mu.skipToSync {
		return false, nil
	}
	if typ == wire.MsgSync {
		return true, l.answerSync()
	}
	if !c.tracking {
		return false, nil
	}
	switch typ {
	case wire.MsgFlush:
		return true, l.answerFlush()
	case wire.MsgClose:
		return true, l.answerClose()
	case wire.MsgParse:
		return l.answerParse(bodyLen)
	}
	return false, nil
}

// routed is where route sent a message: the linked server, and what
// forward needs of what route recorded under c.mu.
type routed struct {
	s      *server
	mapped bool // relayed by relayMapped rather than as it is
	// raise replaces a cluster client's Query that belongs to another
	// shard than its transaction's (shardroute.go, crossShard).
	raise []byte
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
	switch err {
	case errLeaveLoop:
		return nil, stepLeaveLoop
	case errLoopWaiting:
		return nil, stepLoopWait
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

// recordLocked records the message typ of n bytes on the link before it
// goes to the server, and marks serve as writing to the server. It
// reports whether the message is mapped (relayMapped) rather than passed
// on as it is.
func (l *link) recordLocked(typ byte, n int) (mapped bool) {
	c := l.c
	ignored := l.mu.ls.Feeding() // a Sync or Flush the server ignores in COPY IN
	first := l.mu.ls.Idle() && l.mu.ls.TxStatus() == wire.TxIdle && !ignored
	if l.mu.ls.Idle() {
		// The first request after an idle point starts a query (and a
		// transaction when none is open).
		c.mu.queryStart = c.svc.clock.Now()
		if l.mu.ls.TxStatus() == wire.TxIdle {
			l.mu.xactStart = c.mu.queryStart
		}
	}
	l.mu.ls.FromClient(typ)
	l.serve.recvBytes += int64(n) + 5
	if c.tracking {
		if first || l.mu.retry.state != retryOff {
			// A copy of the request to run again (relay_retry.go) begins
			// with a transaction's first message.
			l.captureLocked(typ, n, first)
		}
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
	switch {
	case r.raise != nil:
		err = l.relayRaise(r, s)
	case r.mapped:
		err = l.relayMapped(typ, n, s)
	default:
		err = c.r.Forward(s.w)
	}
	if err != nil {
		return l.forwardFailed(lv, s, err)
	}
	switch typ {
	case wire.MsgSync:
		l.serve.unsynced = false
	case wire.MsgParse, wire.MsgBind, wire.MsgDescribe, wire.MsgExecute, wire.MsgClose:
		l.serve.unsynced = true
	}
	l.flushBatch(s, l.willRelayInline(s, typ) && !l.serve.onLoop)
	if l.serve.onLoop && !c.r.Pending() && !l.serve.pumpStarted && (typ == wire.MsgQuery || typ == wire.MsgSync) {
		// The event loop watches the server for the reply (loop.go).
		l.serve.awaited = s
		return stepAwait
	}
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

// relayMapped forwards a Parse, Bind, Describe, Close or Query with
// prepared-statement mapping (see prepared.go). bodyLen is the message's
// body length from Next.
func (l *link) relayMapped(typ byte, bodyLen int, s *server) error {
	switch typ {
	case wire.MsgParse:
		return l.relayParse(bodyLen, s)
	case wire.MsgBind:
		return l.relayBind(bodyLen, s)
	case wire.MsgDescribe:
		return l.relayDescribe(s)
	case wire.MsgClose:
		return l.relayClose(s)
	case wire.MsgQuery:
		return l.relayQuery(bodyLen, s)
	}
	panic("BUG: relayMapped for message type " + string(typ))
}

// relayQuery watches simple queries for SQL DEALLOCATE of a protocol-level
// statement name, which must not reach the server under the client's name.
// DEALLOCATE ALL and DISCARD ALL pass through; the pump acts on their
// CommandComplete.
func (l *link) relayQuery(bodyLen int, s *server) error {
	c := l.c
	pre, err := c.r.Peek(256)
	if err != nil {
		return err
	}
	c.mu.Lock()
	name, ok := "", false
	if len(pre) == bodyLen && len(c.mu.stmts) > 0 {
		name, ok = stmtcache.DeallocateTarget(pre)
	}
	var cs *stmtcache.ClientStmt
	if ok {
		cs = c.mu.stmts[name]
	}
	// A simple query replaces the server's unnamed statement.
	s.unnamedOwner = 0
	if cs == nil {
		l.mu.ops.push(op{kind: opSync, msg: wire.MsgQuery})
		c.mu.Unlock()
		return c.r.Forward(s.w)
	}
	// The name goes now, so that a Parse of it pipelined behind this
	// query is accepted as Postgres would; an error gives it back
	// (errorLocked). The definition's reference is held by the op.
	delete(c.mu.stmts, name)
	l.mu.ops.push(op{kind: opDeallocate, def: cs.Def, clientName: name, name: cs})
	l.mu.ops.push(op{kind: opSync, msg: wire.MsgQuery})
	c.mu.Unlock()
	if err := c.r.Skip(); err != nil {
		return err
	}
	l.serve.out = append(l.serve.out[:0], deallocateStandIn...)
	return s.w.Write(l.serve.out)
}

// deallocateStandIn is what the server gets for a client's DEALLOCATE of a
// mapped name (prepared.go): it succeeds where DEALLOCATE would and fails
// with 25P02 in an aborted transaction, and it creates nothing on the
// server that could be left behind.
var deallocateStandIn = wire.AppendQuery(nil, "DO $$BEGIN END$$")

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
	return !c.r.Pending() && !l.serve.pumpStarted && (typ == wire.MsgSync || typ == wire.MsgQuery && !l.serve.unsynced) && s.r.Buffered() == 0
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
