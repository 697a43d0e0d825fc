package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// pumpStop says why pumpRun returned.
type pumpStop uint8

const (
	pumpLinkOver pumpStop = iota // the link ended (released, lost or closed)
	pumpHandOff                  // inline only: the rest needs a pump goroutine
)

// pumpGoroutine relays one server's replies to the client for the rest of a link.
func (l *link) pumpGoroutine(s *server, done chan struct{}, freed *pumpFreed) {
	defer close(done)
	defer freed.signal()
	l.pumpRun(s, false)
}

// replyAct says what pumpRun does with a server message after looking at
// it (pumpLook).
type replyAct uint8

const (
	replyForward        replyAct = iota // pass it on to the client as bytes
	replyForwardHandOff                 // pass it on, flush, and (inline) hand over
	replyDone                           // dealt with: read the next
	replyLinkOver                       // the link ended: stop with pumpLinkOver
	replyHandOff                        // stop with pumpHandOff
)

// pumpRun relays the server's replies to the client until the link ends.
// Inline (run by serve, see relayOrPump) it also stops, with pumpHandOff,
// once everything sent is answered while the link stays, or when COPY IN
// starts.
func (l *link) pumpRun(s *server, inline bool) pumpStop {
	c := l.c
	st := c.linkSettings()
	for {
		typ, _, err := s.r.Next()
		if err != nil {
			if !isTimeout(err) {
				l.serverLost(s, err)
				return pumpLinkOver
			}
			if l.stopForPark() {
				return pumpLinkOver
			}
			if c.gone.Load() {
				l.mu.pumpFreed.signal() // see below
			}
			if l.pumpTimeout(s, st) {
				continue
			}
			return pumpLinkOver
		}
		if completesExtended(typ) {
			l.pump.replies++
		}
		gone := c.gone.Load()
		var out *wire.Writer
		if !gone {
			out = c.w
		} else {
			// Once the client is gone the pump discards what the server
			// sends: serve may write the client's last error now.
			l.mu.pumpFreed.signal()
		}
		act := l.pumpLook(s, typ, out, inline, st)
		switch act {
		case replyDone:
			continue
		case replyLinkOver:
			return pumpLinkOver
		case replyHandOff:
			return pumpHandOff
		}
		handOff := act == replyForwardHandOff
		if !l.pumpForward(s, out, gone, handOff) {
			return pumpLinkOver
		}
		if handOff {
			return pumpHandOff
		}
	}
}

// stopForPark says whether serve stopped the pump to park the client with
// its server (stopSessionPump): the pump ends, leaving the link as it is.
func (l *link) stopForPark() bool {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return l.mu.parking
}

// pumpLook looks inside the server messages the pooler must see
// (ReadyForQuery, ParameterStatus, CopyIn/CopyBoth responses and, when
// prepared statements are mapped, ParseComplete, CloseComplete,
// ErrorResponse and CommandComplete) and says what becomes of the
// message. out is the client's writer, nil once the client is gone.
func (l *link) pumpLook(s *server, typ byte, out *wire.Writer, inline bool, st *config.Settings) replyAct {
	c := l.c
	switch typ {
	case wire.MsgReadyForQuery:
		return l.pumpReady(s, out, inline, st)
	case wire.MsgParameterStatus:
		return l.pumpParameter(s, out)
	case wire.MsgCopyInResponse, wire.MsgCopyBothResponse:
		return l.pumpCopyStarted(s, out == nil, inline)
	case wire.MsgParseComplete, wire.MsgCloseComplete:
		if c.tracking {
			return l.pumpStmtReply(s, out)
		}
	case wire.MsgBindComplete:
		if c.tracking {
			c.mu.Lock()
			l.replyOpLocked(opBind)
			c.mu.Unlock()
		}
	case wire.MsgRowDescription, wire.MsgNoData:
		if c.tracking {
			c.mu.Lock()
			l.replyOpLocked(opDescribe)
			c.mu.Unlock()
		}
	case wire.MsgErrorResponse:
		return l.pumpError(s, inline)
	case wire.MsgCommandComplete:
		if len(s.unreported) > 0 && !s.unreportedDirty {
			if !l.noteSessionChange(s) {
				return replyLinkOver
			}
		}
		// Also for a client whose statements are not mapped (after
		// max_prepared_statements went to 0) on a server that has mapped
		// ones: a DISCARD ALL of its drops them too.
		if c.tracking || s.stmts.shown() > 0 {
			return l.pumpCommandComplete(s, out)
		}
	}
	return replyForward
}

// pumpForward passes the current server message on to out (discarding it,
// and counting it for the drain, once the client is gone) and flushes at
// the end of what the server sent, or before a hand-over. False when the
// link is over.
func (l *link) pumpForward(s *server, out *wire.Writer, gone, handOff bool) bool {
	n := int64(s.r.BodyLen()) + 5
	l.pump.sentBytes += n
	if gone {
		l.drainDiscarded(s, n)
	}
	if err := s.r.Forward(out); err != nil && !l.relayFailed(s, out, err) {
		return false
	}
	if out != nil && (handOff || !s.r.Pending()) {
		out.Flush()
	}
	return true
}

// pumpReady relays a ReadyForQuery, preceded by the replies the pooler
// owes the client for what it answered itself (readyLocked), and applies
// the release rule (afterReady). Inline, a link that stays once
// everything sent is answered is handed over to a pump goroutine.
func (l *link) pumpReady(s *server, out *wire.Writer, inline bool, st *config.Settings) replyAct {
	c := l.c
	l.pump.replies = 0
	msg, err := s.r.Message()
	var status byte
	if err == nil {
		status, err = wire.ReadyForQueryStatus(msg[5:])
	}
	if err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	if c.tracking {
		c.mu.Lock()
		l.mu.retry.state = retryOff
		if l.mu.retry.swallowReady {
			// The ReadyForQuery of a request the pooler sent again
			// (relay_retry.go): the second run's comes next.
			l.mu.retry.swallowReady = false
			l.mu.ls.readyForQuery(status)
			l.pump.out = l.readyLocked(l.pump.out[:0])[:0]
			c.mu.Unlock()
			return replyDone
		}
		owed := l.readyLocked(l.pump.out[:0])
		c.mu.Unlock()
		l.pump.out = owed
		if out != nil && len(owed) > 0 {
			out.Write(owed)
		}
	}
	l.pump.sentBytes += int64(len(msg))
	if out != nil {
		out.Write(msg)
	}
	if !l.afterReady(s, status, st) {
		return replyLinkOver
	}
	if inline {
		c.mu.Lock()
		answered := l.mu.ls.outstanding == 0
		c.mu.Unlock()
		if answered && !s.r.Pending() {
			// The link stays (a transaction block): a pump goroutine
			// watches the server from here on.
			return replyHandOff
		}
	}
	return replyDone
}

// pumpParameter notes a ParameterStatus on the server and, for a tracked
// parameter, as the client's value; one too long to hold is passed on
// unread.
func (l *link) pumpParameter(s *server, out *wire.Writer) replyAct {
	c := l.c
	if !s.r.Fits() {
		return replyForward
	}
	msg, err := s.r.Message()
	if err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	name, value := s.noteParameter(msg[5:])
	// out is nil once the client is gone: its parameters no longer matter.
	if canon := c.svc.trackedName(name); canon != "" && out != nil {
		c.mu.Lock()
		c.setParamLocked(canon, value)
		c.mu.Unlock()
	}
	if out != nil {
		out.Write(msg)
	}
	return replyDone
}

// pumpCopyStarted applies a CopyInResponse or CopyBothResponse to the
// link (linkState.copyStarted) and the mapping queue. gone: the client had
// left when the message was read.
func (l *link) pumpCopyStarted(s *server, gone, inline bool) replyAct {
	c := l.c
	c.mu.Lock()
	if dropped, consumed := l.mu.ls.copyStarted(l.pump.replies); c.tracking {
		l.mu.ops.killSyncs(dropped)
		switch consumed {
		case wire.MsgParse, wire.MsgClose, wire.MsgBind, wire.MsgDescribe:
			l.consumedByCopyLocked(s, consumed)
		}
	}
	c.mu.Unlock()
	if gone {
		// The drain's next step (CopyFail) is due now, not when the
		// server, waiting for data, times out.
		s.conn.SetReadDeadline(time.Now())
	}
	if inline {
		// The client sends COPY data next while the server stays silent:
		// serve must go back to reading the client.
		return replyForwardHandOff
	}
	return replyForward
}

// pumpStmtReply swallows the ParseComplete or CloseComplete of a message
// the pooler sent for its mapping (replyLocked); the client's own are
// passed on.
func (l *link) pumpStmtReply(s *server, out *wire.Writer) replyAct {
	c := l.c
	c.mu.Lock()
	swallow := l.replyLocked(s)
	c.mu.Unlock()
	if !swallow {
		return replyForward
	}
	if err := s.r.Skip(); err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	if out != nil && !s.r.Pending() {
		out.Flush()
	}
	return replyDone
}

// pumpError attributes an ErrorResponse to the message that failed
// (linkState.serverError) and, when the server now skips to a Sync not yet
// sent, makes serve skip the client's messages up to it too.
func (l *link) pumpError(s *server, inline bool) replyAct {
	c := l.c
	act := replyForward
	// Read before c.mu is taken: the message may still be arriving.
	stalePlan := c.tracking && isStalePlan(s)
	c.mu.Lock()
	replies := l.pump.replies
	skip, synced := l.mu.ls.serverError(replies)
	if skip {
		l.pump.replies = 0
		if !synced {
			// The server skips the client's messages up to its next
			// Sync: so does serve, so that none is counted as owing a
			// reply. The server says nothing more until that Sync, which
			// serve must read: an inline relay hands over.
			l.mu.skipToSync = true
			if inline {
				act = replyForwardHandOff
			}
		}
	}
	retried := false
	var stale *stmtDef
	if c.tracking {
		if stalePlan && skip {
			stale = l.staleLocked(s, replies)
		}
		l.errorLocked(s, skip)
		if stale != nil && synced {
			retried = l.retryLocked(s, stale)
		} else {
			l.mu.retry.state = retryOff
		}
	}
	c.mu.Unlock()
	if !retried {
		return act
	}
	c.noisef("%s had a stale plan on %s: prepared again, request sent again", stale.name, s)
	// The failed request's error goes to nobody: the client gets its
	// second run's replies (relay_retry.go).
	if err := s.r.Skip(); err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	return replyDone
}

// noteSessionChange marks the server's record of unreported parameters
// (server.unreported) unsure after a command that may have changed them:
// SET, RESET, DISCARD ALL. False when the server failed.
func (l *link) noteSessionChange(s *server) bool {
	pre, err := s.r.Peek(16)
	if err != nil {
		l.serverLost(s, err)
		return false
	}
	switch string(wire.CommandTag(pre)) {
	case "SET", "RESET", "DISCARD ALL":
		s.unreportedDirty = true
	}
	return true
}

// pumpCommandComplete applies a DEALLOCATE's CommandComplete to the
// mapping: the client's DEALLOCATE of a mapped statement gets DEALLOCATE's
// tag for the stand-in's DO.
func (l *link) pumpCommandComplete(s *server, out *wire.Writer) replyAct {
	c := l.c
	pre, err := s.r.Peek(32)
	if err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	if len(pre) == 0 || pre[0] != 'D' {
		return replyForward
	}
	c.mu.Lock()
	tag := wire.CommandTag(pre)
	standIn := l.deallocateDoneLocked(tag)
	if !standIn {
		l.commandCompleteLocked(s, tag)
	}
	c.mu.Unlock()
	if !standIn {
		return replyForward
	}
	if err := s.r.Skip(); err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	l.pump.sentBytes += int64(len(deallocateComplete))
	if out != nil {
		out.Write(deallocateComplete)
		if !s.r.Pending() {
			out.Flush()
		}
	}
	return replyDone
}

// afterReady applies the release rule after a ReadyForQuery; false when the
// link ended and the pump must stop.
//
// No write to the client happens under c.mu: a client that pipelines and
// stops reading its replies would otherwise hold c.mu for as long as it
// does, and KILL_CLIENT, SHOW CLIENTS, cancel requests and the janitor's
// park scan (which serves every pool) all take it. The pump is the
// client writer's only user while the server is linked, so it can flush
// with c.mu released; what must be under c.mu is only the hand-over of
// the writer back to serve, which clears c.link.srv with nothing left in
// the writer.
//
// It is longer than the pooler's other functions on purpose: each step
// holds or gives up c.mu, and the order of those steps (count, decide,
// flush unlocked, decide again, hand over, release) is the protocol
// between the pump and serve, which reads best in one place.
func (l *link) afterReady(s *server, status byte, st *config.Settings) bool {
	c := l.c
	c.mu.Lock()
	if !c.gone.Load() {
		// A drain's ReadyForQuery answers the pooler's own ROLLBACK,
		// Sync or server_reset_query, not a client's request: SHOW STATS
		// counts client queries and transactions, as PgBouncer's.
		l.countReadyLocked(status)
	}
	l.mu.ls.readyForQuery(status)
	if l.mu.ls.outstanding == 0 && (st.QueryTimeout > 0 || st.TransactionTimeout > 0) {
		s.conn.SetReadDeadline(time.Time{})
	}
	if c.gone.Load() {
		c.mu.Unlock()
		return l.drain(s)
	}
	act := afterReadyForQuery(c.mode, &l.mu.ls)
	for act == releaseServer && (l.mu.writing || c.w.Buffered() > 0) {
		if l.mu.writing {
			// serve is finishing a flush to this server; wait for it,
			// then look again: it may have sent more.
			l.mu.writerDone.Wait()
		} else {
			// The replies go out before the writer is handed back
			// (after c.link.srv is cleared serve may link another
			// server whose pump writes to the client), and without
			// c.mu (see above). The client may answer them before c.mu
			// is taken again: look again.
			l.mu.releasing = true
			c.mu.Unlock()
			c.w.Flush()
			c.mu.Lock()
		}
		if c.gone.Load() {
			l.endReleasingLocked()
			c.mu.Unlock()
			return l.drain(s)
		}
		act = afterReadyForQuery(c.mode, &l.mu.ls)
	}
	if act != releaseServer {
		l.endReleasingLocked()
	}
	switch act {
	case releaseServer:
		if c.w.Buffered() != 0 {
			panic("BUG: the client writer is handed back to serve with bytes in it")
		}
		l.unlinkServerLocked()
		l.endReleasingLocked()
		unsure := l.mu.ls.unsure
		c.mu.Unlock()
		if st.ClientIdleTimeout > 0 {
			// serve armed no idle deadline while linked; it starts now.
			c.conn.SetReadDeadline(time.Now().Add(st.ClientIdleTimeout))
		}
		if c.svc.parker.suspended.Load() {
			// SUSPEND: serve, blocked in its read since it sent the
			// transaction's end, parks now, before the client's next
			// request arrives (suspend.go).
			c.parkWanted.Store(true)
			c.conn.SetReadDeadline(time.Now())
		}
		if unsure {
			// A reply may still be on its way (see linkState): it must
			// not reach the next client.
			s.pool.discard(s, "client protocol state unknown after COPY")
			return false
		}
		l.releaseClean(s, st)
		return false
	case rejectTxBlock:
		c.mu.Unlock()
		c.closeClient(CodeStatementModeTxBlock) // the link still holds s: see closeClient
		c.mu.Lock()
		l.awaitServeOffServerRelock(s)
		l.unlinkServerLocked()
		c.mu.Unlock()
		s.pool.discard(s, "transaction blocks not allowed in statement pooling mode")
		return false
	}
	idleInTx := l.mu.ls.idle() && status != wire.TxIdle
	txLeft, txTimed := c.txRemainingLocked(st)
	c.mu.Unlock()
	if !s.r.Pending() {
		c.w.Flush()
	}
	if !idleInTx {
		txTimed = false // serve's deadline, armed while the query ran, stands
	}
	if d, ok := earliest(st.IdleTransactionTimeout, idleInTx && st.IdleTransactionTimeout > 0, txLeft, txTimed); ok {
		c.conn.SetReadDeadline(time.Now().Add(d))
	}
	return true
}

// releaseClean returns a clean server, running server_reset_query first
// when server_reset_query_always asks for it in transaction mode.
func (l *link) releaseClean(s *server, st *config.Settings) {
	c := l.c
	if st.ServerResetQueryAlways && st.ServerResetQuery != "" {
		res, err := s.exec(st.ServerResetQuery, st.ServerConnectTimeout)
		if err != nil || res.status != wire.TxIdle {
			s.pool.discard(s, "reset query failed")
			return
		}
		// The reset (typically DISCARD ALL) may have dropped prepared
		// statements and reset parameters; forget them rather than guess.
		s.stmts.clear(c.svc.stmts)
		s.unnamedOwner = 0
		s.unreportedDirty = true
	}
	s.pool.release(s)
}

// pushSyncLocked records a Sync-like message the pooler itself sends.
func (l *link) pushSyncLocked(typ byte) {
	c := l.c
	if c.tracking {
		l.mu.ops.push(op{kind: opSync, msg: typ})
	}
}

// completesExtended reports whether a server message of type typ is the
// last reply to an extended-protocol message (linkState.failing): Parse,
// Bind and Close have one reply each, Describe ends with RowDescription or
// NoData, Execute with CommandComplete, EmptyQueryResponse or
// PortalSuspended. A Query's own RowDescription and CommandComplete count
// too, harmlessly: by then every earlier extended message has finished.
func completesExtended(typ byte) bool {
	switch typ {
	case wire.MsgParseComplete, wire.MsgBindComplete, wire.MsgCloseComplete, wire.MsgNoData,
		wire.MsgRowDescription, wire.MsgCommandComplete, wire.MsgEmptyQueryResponse, wire.MsgPortalSuspended:
		return true
	}
	return false
}

// isCopyInput reports whether the server, reading the client as COPY data,
// takes a message of type typ as such (Sync and Flush it ignores).
func isCopyInput(typ byte) bool {
	switch typ {
	case wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail, wire.MsgSync, wire.MsgFlush:
		return true
	}
	return false
}

// pumpTimeout handles an expired server read deadline: a departed client's
// drain step, or query_timeout. False when the link is over.
func (l *link) pumpTimeout(s *server, st *config.Settings) bool {
	c := l.c
	c.mu.Lock()
	gone := c.gone.Load()
	txLeft, txTimed := c.txRemainingLocked(st)
	queryOver := st.QueryTimeout > 0 && c.svc.clock.Since(c.mu.queryStart) >= st.QueryTimeout
	c.mu.Unlock()
	if gone {
		return l.drain(s)
	}
	// query_timeout first, as PgBouncer's janitor checks it first.
	code, reason := CodeQueryTimeout, "query timeout"
	if !queryOver && txTimed && txLeft <= 0 {
		code, reason = CodeTransactionTimeout, "transaction timeout"
	}
	c.closeClient(code)
	c.mu.Lock()
	l.awaitServeOffServerRelock(s)
	l.unlinkServerLocked()
	c.mu.Unlock()
	s.pool.discard(s, reason)
	return false
}

// serverLost handles a server that failed while linked.
func (l *link) serverLost(s *server, err error) {
	c := l.c
	c.mu.Lock()
	tell := l.mu.srv == s && !c.gone.Load() && !l.mu.detach
	_, code := l.lostReasonLocked(s)
	c.mu.Unlock()
	if tell {
		c.closeClient(code)
	}
	c.mu.Lock()
	l.awaitServeOffServerRelock(s)
	reason, _ := l.lostReasonLocked(s)
	if c.gone.Load() && !tell {
		// A drain ends with its server (a client told here leaves
		// without one).
		l.finishDrainLocked("closed")
	}
	if l.mu.srv == s {
		l.unlinkServerLocked()
	}
	c.mu.Unlock()
	s.pool.discard(s, reason)
}

// lostReasonLocked is why the linked server s is closed when it fails
// (the log's reason) and what the client is told.
func (l *link) lostReasonLocked(s *server) (string, Code) {
	reason, code := "server conn crashed?", CodeServerCrashed
	if l.mu.detach {
		reason = l.mu.detachReason
	}
	if s.evicted.Load() {
		reason, code = "evicted", CodeEvicted
	}
	if s.fastClosed.Load() {
		reason, code = reasonConfigChanged, CodeConfigChanged
	}
	return reason, code
}

// awaitServeOffServerRelock waits until serve no longer writes to s, the
// linked server the pump is about to close or hand back (c.link.writing,
// set from recording a message until its batch is flushed). discard
// writes s's Terminate and lets the pool forget s; a server serve still
// writes to would then have two writers, and release would give that
// writer to the next holder. s's socket is closed first when serve is
// writing, so that a write blocked on it ends. Called with c.mu held; it
// is released while waiting (the suffix says so) and held again on
// return. The caller has told the client or the client is gone, so that
// serve is not left reading the rest of a batch: it finds the client's
// socket closed, and both doneWriting and abandonLink end the writing.
// Never called by serve itself (inline relay): serve has flushed its
// batch before it relays.
func (l *link) awaitServeOffServerRelock(s *server) {
	c := l.c
	if l.mu.srv != s || !l.mu.writing {
		return
	}
	// Closed with the lock released: closing a TLS connection may write
	// its close_notify.
	c.mu.Unlock()
	s.conn.Close()
	c.mu.Lock()
	for l.mu.srv == s && l.mu.writing {
		l.mu.writerDone.Wait()
	}
}

// closeClient tells the client of a pooler error that ends it and closes
// its socket. Only the pump calls it, while the link still holds its
// server, and without c.mu: while c.link.srv is set the pump is the
// client writer's only user, and once it is nil serve owns the writer
// again and may link another server and relay its replies to that writer
// (the race detector caught the pump's error and serve's relay writing it
// together when this ran after the link ended). serve's closeBadInput
// waits for link.pumpFreed, which the pump signals only after this. The
// write is bounded, as fail's is; without c.mu a client that reads nothing
// holds up nobody else meanwhile (SHOW CLIENTS, cancel requests, the
// janitor's park scan).
func (c *client) closeClient(code Code) {
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.w.Write(appendError(nil, newError(code)))
	c.w.Flush()
	c.conn.Close()
}

// endReleasingLocked ends afterReady's release flush: serve, waiting to
// route the client's next message, goes on.
func (l *link) endReleasingLocked() {
	if l.mu.releasing {
		l.mu.releasing = false
		l.mu.releaseDone.Broadcast()
	}
}

// countReadyLocked adds a finished query (and, at status 'I', a finished
// transaction) and the bytes sent to the client since the last one to the
// pool's stats. c.mu orders it after serve's writes of the start times.
func (l *link) countReadyLocked(status byte) {
	c := l.c
	p := l.mu.pool
	ps := &p.stats
	now := c.svc.clock.Now()
	ps.queries.Add(1)
	ps.queryTime.Add(int64(now.Sub(c.mu.queryStart) / time.Microsecond))
	p.metrics.queryDuration.Update(now.Sub(c.mu.queryStart).Seconds())
	if status == wire.TxIdle {
		ps.xacts.Add(1)
		ps.xactTime.Add(int64(now.Sub(l.mu.xactStart) / time.Microsecond))
	}
	ps.sent.Add(l.pump.sentBytes)
	l.pump.sentBytes = 0
}
