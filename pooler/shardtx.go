package pooler

import (
	"errors"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/session"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Transactions of a sharded cluster's clients (shardroute.go routes them):
// what the pooler answers itself while no server is linked (a held BEGIN,
// COMMIT or ROLLBACK of a transaction that never reached a server, SET
// [LOCAL] pgturnstile.*), the held BEGIN sent ahead of the transaction's
// first statement and its replies swallowed, a transaction held to the
// shard of its first statement, and refusals (0A000).

// answerShardQuery answers the simple queries the pooler answers itself
// for a cluster's client (session.AnswerQuery): SET [LOCAL]
// pgturnstile.*, and BEGIN, COMMIT, ROLLBACK while the transaction has
// not reached a server. answered is false for any other.
func (l *link) answerShardQuery(text []byte, linked bool) (loopStep, bool) {
	out, a := l.c.shard.AnswerQuery(text, linked)
	switch a {
	case session.Answered:
		return l.answerShard(out), true
	case session.BadHint:
		return l.refuseShard(wire.MsgQuery, shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonBadHint}), true
	}
	return stepOn, false
}

// heldStatus is the transaction status a cluster's client without a
// linked server is in: 'T' while its BEGIN is held.
func (c *client) heldStatus() byte {
	if c.shard != nil {
		return c.shard.HeldStatus()
	}
	return wire.TxIdle
}

// answerShard consumes the current Query and answers it with out and
// ReadyForQuery.
func (l *link) answerShard(out []byte) loopStep {
	c := l.c
	if err := c.r.Skip(); err != nil {
		return c.leaveStep(err)
	}
	return l.answerQuery(out)
}

// refuseShard answers a statement the router refused: ERROR 0A000 with
// the table and the reason in DETAIL and the ways to name a key in HINT;
// nothing reaches a server and the client stays usable.
func (l *link) refuseShard(typ byte, d shard.Decision) loopStep {
	c := l.c
	if err := c.r.Skip(); err != nil {
		return c.leaveStep(err)
	}
	msg, detail, hint := c.shard.RefusalText(d)
	out := wire.AppendErrorResponse(c.shard.out[:0], wire.MsgErrorResponse, "ERROR", "0A000", msg, detail, hint)
	if typ == wire.MsgQuery {
		out = wire.AppendReadyForQuery(out, c.heldStatus())
		c.shard.out = out
		if err := c.w.Write(out); err != nil {
			return c.leaveStep(err)
		}
		if err := c.w.Flush(); err != nil {
			return c.leaveStep(err)
		}
		return stepNext
	}
	c.shard.out = out
	if err := c.refuse(typ, out); err != nil {
		return c.leaveStep(err)
	}
	return stepNext
}

// heldLinkedLocked runs on a server just linked while the client's BEGIN
// is held. For the transaction's first statement the BEGIN is sent ahead
// of it (replayHeldLocked). What says nothing of the transaction's shard
// (a Parse alone, a Describe) runs outside it, and the pump shows its
// ReadyForQuery as 'T', the status the client is in. c.mu held.
func (l *link) heldLinkedLocked(s *server, sd shardDecision) {
	if sd.active && !sd.undecided {
		l.replayHeldLocked(s)
		return
	}
	l.pump.asHeld = true
}

// replayHeldLocked sends the held BEGIN ahead of the transaction's first
// statement on the server just linked for it; the pump swallows its
// replies (pumpSwallow), which the client had from the pooler. c.mu held.
func (l *link) replayHeldLocked(s *server) {
	c := l.c
	now := c.svc.clock.Now()
	c.mu.queryStart, l.mu.xactStart = now, now
	held, n := c.shard.TakeHeld()
	for range n {
		l.mu.ls.FromClient(wire.MsgQuery)
	}
	l.pump.swallow += n
	l.pump.heldErr, l.pump.heldBegun = nil, 0
	s.w.Write(held)
}

// heldToShardLocked holds a statement of a transaction already on server
// s to s's shard. A simple Query for another shard, or one the router
// refuses, is replaced by an error Postgres raises (raise): the
// transaction fails on both sides. A Bind is replaced by a Bind of a
// statement no session has, which the server fails (26000), aborting the
// transaction (an implicit one up to the Sync too) before anything of it
// can commit; the pump gives the client the refusal (0A000, with DETAIL
// and HINT) in place of that error (link.mu.refusal). c.mu held.
func (l *link) heldToShardLocked(typ byte, s *server, d shard.Decision) (raise []byte) {
	ss := l.c.shard
	if cl := ss.Map(); cl != nil && cl.Shadow {
		return nil
	}
	pinned := s.pool.key.db
	wrong := d.Source == shard.SourceRefused || d.Source == shard.SourceScatter ||
		d.Source != shard.SourceDefault && d.Database != "" && d.Database != pinned
	if !wrong {
		return nil
	}
	switch typ {
	case wire.MsgQuery:
		return ss.CrossShardQuery(d, pinned)
	case wire.MsgBind:
		msg, detail, hint := ss.CrossShardText(d, pinned)
		l.mu.refusal = wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "0A000", msg, detail, hint)
		return poisonBind
	}
	return nil
}

// relayRaise writes the error statement that replaces the client's Query
// (consumed) on s.
func (l *link) relayRaise(r routed, s *server) error {
	c := l.c
	if c.tracking {
		c.mu.Lock()
		if r.raise[0] == wire.MsgBind {
			l.pushReplyOpLocked(opBind, nil) // its error answers the Bind
		} else {
			s.unnamedOwner = 0
			l.mu.ops.push(op{kind: opSync, msg: wire.MsgQuery})
		}
		c.mu.Unlock()
	}
	if err := c.r.Skip(); err != nil {
		return err
	}
	return s.w.Write(r.raise)
}

// pumpSwallow drops a server's replies to the held statements up to their
// ReadyForQuery, which only moves the link's protocol position. A BEGIN
// that fails (the server in a state nothing should leave it in) loses the
// server: the client's statement must not run outside its transaction.
// A later held statement that fails (SET LOCAL of an unknown setting, a
// ROLLBACK TO of no savepoint) has aborted the transaction: its error is
// kept and given to the client in place of the next error the server
// sends, which is the transaction's "current transaction is aborted".
func (l *link) pumpSwallow(s *server, typ byte) replyAct {
	c := l.c
	switch typ {
	case wire.MsgErrorResponse:
		msg, err := s.r.Message()
		if err != nil || l.pump.heldBegun == 0 {
			l.serverLost(s, errHeldBeginFailed)
			return replyLinkOver
		}
		if l.pump.heldErr == nil {
			l.pump.heldErr = append([]byte(nil), msg...)
		}
		return replyDone
	case wire.MsgReadyForQuery:
		msg, err := s.r.Message()
		var status byte
		if err == nil {
			status, err = wire.ReadyForQueryStatus(msg[5:])
		}
		if err != nil {
			l.serverLost(s, err)
			return replyLinkOver
		}
		l.pump.swallow--
		l.pump.heldBegun++
		l.pump.replies = 0
		c.mu.Lock()
		l.mu.ls.ReadyForQuery(status)
		c.mu.Unlock()
		return replyDone
	}
	if err := s.r.Skip(); err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	return replyDone
}

var errHeldBeginFailed = errors.New("the server refused a BEGIN the pooler had answered")

// heldReady is the ReadyForQuery of a link that ran outside the client's
// held transaction.
var heldReady = wire.AppendReadyForQuery(nil, wire.TxInBlock)

// poisonBind names a statement no session has: the server fails it with
// 26000, which aborts the transaction it is in (an implicit one up to the
// Sync too).
var poisonBind = wire.AppendBind(nil, "", "pgturnstile: statement for another shard", nil)

// substituteError takes the error the client gets in place of the
// server's current one, if any: a held statement's that failed (the
// server's is then "current transaction is aborted"), or the refusal of a
// Bind the server failed in its place (heldToShardLocked).
func (l *link) substituteError() []byte {
	if msg := l.pump.heldErr; msg != nil {
		l.pump.heldErr = nil
		return msg
	}
	c := l.c
	c.mu.Lock()
	msg := l.mu.refusal
	l.mu.refusal = nil
	c.mu.Unlock()
	return msg
}

// pumpHeldError gives the client msg in place of the server's current
// error, then acts as act would have.
func (l *link) pumpHeldError(s *server, out *wire.Writer, act replyAct, msg []byte) replyAct {
	if out == nil {
		return act // the client is gone: discarded as the server's would be
	}
	if err := s.r.Skip(); err != nil {
		l.serverLost(s, err)
		return replyLinkOver
	}
	l.pump.sentBytes += int64(len(msg))
	out.Write(msg)
	if act == replyForwardHandOff {
		out.Flush()
		return replyHandOff
	}
	if !s.r.Pending() {
		out.Flush()
	}
	return replyDone
}
