package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/linkstate"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
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
		if linkstate.CompletesExtended(typ) {
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
	if l.pump.swallow > 0 {
		return l.pumpSwallow(s, typ) // a held BEGIN's (shardroute.go)
	}
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
		act := l.pumpError(s, inline)
		if c.shard != nil && (act == replyForward || act == replyForwardHandOff) {
			if msg := l.substituteError(); msg != nil {
				return l.pumpHeldError(s, out, act, msg) // shardtx.go
			}
		}
		return act
	case wire.MsgCommandComplete:
		if len(s.unreported) > 0 && !s.unreportedDirty {
			if !l.noteSessionChange(s) {
				return replyLinkOver
			}
		}
		// Also for a client whose statements are not mapped (after
		// max_prepared_statements went to 0) on a server that has mapped
		// ones: a DISCARD ALL of its drops them too.
		if c.tracking || s.stmts.Shown() > 0 {
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
			l.mu.ls.ReadyForQuery(status)
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
		if l.pump.asHeld && status == wire.TxIdle {
			out.Write(heldReady) // shardroute.go
		} else {
			out.Write(msg)
		}
	}
	if !l.afterReady(s, status, st) {
		return replyLinkOver
	}
	if inline {
		c.mu.Lock()
		answered := l.mu.ls.Outstanding() == 0
		c.mu.Unlock()
		if answered && !s.r.Pending() {
			// The link stays (a transaction block): a pump goroutine
			// watches the server from here on.
			return replyHandOff
		}
	}
	return replyDone
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
// the writer back to serve, which clears l.mu.srv with nothing left in
// the writer.
//
// It is longer than the pooler's other functions on purpose: each step
// holds or gives up c.mu, and the order of those steps (count, decide,
// flush unlocked, decide again, hand over, release) is the protocol
// between the pump and serve, which reads best in one place.
func (l *link) afterReady(s *server, status byte, st *config.Settings) bool {
	c := l.c
	c.mu.Lock()
	l.mu.refusal = nil // a router refusal is for its own batch only
	if !c.gone.Load() {
		// A drain's ReadyForQuery answers the pooler's own ROLLBACK,
		// Sync or server_reset_query, not a client's request: SHOW STATS
		// counts client queries and transactions, as PgBouncer's.
		l.countReadyLocked(status)
	}
	l.mu.ls.ReadyForQuery(status)
	if l.mu.ls.Outstanding() == 0 && (st.QueryTimeout > 0 || st.TransactionTimeout > 0) {
		s.conn.SetReadDeadline(time.Time{})
	}
	if c.gone.Load() {
		c.mu.Unlock()
		return l.drain(s)
	}
	act := l.mu.ls.AfterReadyForQuery(c.releaseMode())
	for act == linkstate.ReleaseServer && (l.mu.writing || c.w.Buffered() > 0) {
		if l.mu.writing {
			// serve is finishing a flush to this server; wait for it,
			// then look again: it may have sent more.
			l.mu.writerDone.Wait()
		} else {
			// The replies go out before the writer is handed back
			// (after l.mu.srv is cleared serve may link another
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
		act = l.mu.ls.AfterReadyForQuery(c.releaseMode())
	}
	if act != linkstate.ReleaseServer {
		l.endReleasingLocked()
	}
	switch act {
	case linkstate.ReleaseServer:
		if c.w.Buffered() != 0 {
			panic("BUG: the client writer is handed back to serve with bytes in it")
		}
		l.unlinkServerLocked()
		l.endReleasingLocked()
		unsure := l.mu.ls.Unsure()
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
			// A reply may still be on its way (linkstate.State.Unsure):
			// it must not reach the next client.
			s.pool.discard(s, "client protocol state unknown after COPY")
			return false
		}
		l.releaseClean(s, st)
		return false
	case linkstate.RejectTxBlock:
		c.mu.Unlock()
		c.closeClient(pgerror.StatementModeTxBlock) // the link still holds s: see closeClient
		c.mu.Lock()
		l.awaitServeOffServerRelock(s)
		l.unlinkServerLocked()
		c.mu.Unlock()
		s.pool.discard(s, "transaction blocks not allowed in statement pooling mode")
		return false
	}
	idleInTx := l.mu.ls.Idle() && status != wire.TxIdle
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
		s.stmts.Clear(c.svc.stmts)
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

// replyOpLocked pops the op of a Bind (BindComplete) or Describe
// (RowDescription, NoData) when it is the next one owed; a RowDescription
// of a Query finds its opSync instead and pops nothing. The reply of a
// Describe sent again (relay_retry.go) tells the client its statement's
// new shape: its name's epoch is brought up to date.
func (l *link) replyOpLocked(kind opKind) {
	if o := l.mu.ops.peek(); o != nil && o.kind == kind {
		if d := l.mu.ops.pop(); d.name != nil {
			d.name.Learned(d.epoch)
		}
	}
}

// readyLocked appends the errors the pooler owes before this ReadyForQuery
// and pops the Sync it answers.
func (l *link) readyLocked(out []byte) []byte {
	c := l.c
	for o := l.mu.ops.peek(); o != nil && o.kind != opSync; o = l.mu.ops.peek() {
		d := l.mu.ops.pop()
		if d.kind == opError && d.err != nil {
			out = wire.AppendErrorResponse(out, wire.MsgErrorResponse, d.err.Severity, d.err.SQLState, d.err.Message, "", "")
		}
		if d.kind == opDeallocate {
			// Neither a CommandComplete nor an error came for the
			// stand-in (which Postgres never does): the name stays gone.
			c.svc.stmts.Release(d.def)
		}
	}
	if o := l.mu.ops.peek(); o != nil {
		l.mu.ops.pop()
	}
	return out
}
