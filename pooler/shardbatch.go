package pooler

import (
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/session"
	"github.com/pgturnstile/pgturnstile/wire"
)

// An extended-protocol batch of a sharded cluster's client is routed as a
// whole, by its first Bind that decides a shard, or answered by the
// pooler when it is only transaction control (package session decides
// which, from the bytes buffered). Here: reading the rest of a batch the
// decision needs, and writing the pooler's answers.

// batch walks the batch that starts with the current message (typ, body)
// through what the client's buffer holds behind it.
func (l *link) batch(typ byte, body []byte) session.Batch {
	return session.NewBatch(typ, body, l.c.r.Ahead())
}

// batchStart routes a batch that starts (no server linked) with a Parse
// (its routing cur) or a Bind: answered by the pooler when it is only
// transaction control, else routed by its first deciding Bind.
func (l *link) batchStart(typ byte, body []byte, cur *session.Route) (shardDecision, loopStep) {
	if l.c.shard.StartsWithTx(typ, body, cur) {
		if step, answered := l.answerTxBatch(typ, body, cur); answered {
			return shardDecision{}, step
		}
	}
	d, undecided := l.batchDecision(typ, body, cur)
	return shardDecision{active: true, d: d, undecided: undecided}, stepOn
}

// batchDecision decides the batch (session.BatchDecision), reading more
// of it while nothing decides yet and the client expects no reply.
func (l *link) batchDecision(typ byte, body []byte, cur *session.Route) (shard.Decision, bool) {
	c := l.c
	for {
		d, undecided, more := c.shard.BatchDecision(l.batch(typ, body), cur, c.stmtText)
		if !undecided || !more {
			return d, undecided
		}
		// Nothing decides yet, and the client has sent neither a Sync
		// nor a Flush, so it expects no reply: wait for the rest of the
		// batch (psycopg sends a pipeline's Parse before its Binds), as
		// Postgres would wait for the Sync.
		if err := c.r.FillAhead(); err != nil {
			return d, undecided
		}
		var err error
		if body, err = c.r.Peek(c.r.BodyLen()); err != nil {
			return d, undecided
		}
	}
}

// answerTxBatch answers a whole buffered batch with no server linked
// that is only transaction control the pooler answers itself
// (session.TxOnly); answered is false for any other, or for a batch not
// yet whole.
func (l *link) answerTxBatch(typ byte, body []byte, cur *session.Route) (loopStep, bool) {
	c := l.c
	tb, ok := c.shard.TxOnly(l.batch(typ, body), cur, c.stmtHeld)
	if !ok {
		return stepOn, false
	}
	return l.answerTxMessages(typ, body, tb), true
}

// answerTxMessages consumes the batch TxOnly approved, from the current
// message (typ, body) to its Sync, and answers each message as Postgres
// would.
func (l *link) answerTxMessages(typ byte, body []byte, tb *session.TxBatch) loopStep {
	c := l.c
	ss := c.shard
	out := ss.out[:0]
	for {
		switch typ {
		case wire.MsgParse:
			if name, text, types, _ := wire.DecodeParse(body); len(name) > 0 && c.tracking {
				// The mapping learns the name too, so that the client may
				// run it on a server later (a prepared COMMIT of a
				// transaction that did reach one).
				c.holdStmtName(string(name), string(text), types)
			}
		case wire.MsgFlush:
			if err := c.w.Write(out); err != nil {
				return c.leaveStep(err)
			}
			out = out[:0]
			if err := c.w.Flush(); err != nil {
				return c.leaveStep(err)
			}
		case wire.MsgSync:
			if err := c.r.Skip(); err != nil {
				return c.leaveStep(err)
			}
			ss.out = out[:0]
			return l.answerQuery(out)
		}
		out = ss.Answer(out, tb, session.Msg{Type: typ, Body: body})
		if err := c.r.Skip(); err != nil {
			return c.leaveStep(err)
		}
		typ2, n, err := c.r.Next()
		if err != nil {
			return c.leaveStep(err)
		}
		typ = typ2
		if body, err = c.r.Peek(n); err != nil { // whole: walked before
			return c.leaveStep(err)
		}
	}
}

// stmtHeld reports a prepared-statement name the client has in the
// mapping.
func (c *client) stmtHeld(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, held := c.mu.stmts[name]
	return held
}

// holdStmtName gives the client's name for a statement no server of the
// mapping parsed under it to the mapping, as a Parse a server had run
// would: a transaction-control statement the pooler answered (the router
// read it whole, so Postgres will parse it), or one a scatter ran unnamed
// on every database.
func (c *client) holdStmtName(name, text string, types []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	def := c.svc.stmts.Acquire(text, types, c.svc.settings().PreparedStatementBudget)
	if def == nil {
		return // over prepared_statement_budget: a later Bind finds no name
	}
	def.MarkValidated()
	c.holdNameLocked(name, def)
}
