package pooler

import (
	"encoding/binary"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// An extended-protocol batch of a sharded cluster's client: the messages
// up to its Sync are one transaction, so the batch is routed as a whole,
// by its first Bind that decides a shard — a JDBC batch of BEGIN and an
// INSERT goes, BEGIN included, to the INSERT's shard. A batch of only
// transaction control (pgbench -M extended's BEGIN, a driver's prepared
// COMMIT of a transaction that never reached a server) is answered by the
// pooler, as a simple BEGIN is (shardtx.go). Only what the client has
// sent is looked at: a batch still arriving is routed by what has come.

// batchMsg is one message of a batch, read from the client's buffer.
type batchMsg struct {
	typ  byte
	body []byte
}

// batchIter walks the current message (typ, body) and each whole message
// buffered behind it, up to and including a Sync; synced reports that the
// Sync was reached (the batch is whole in the buffer).
type batchIter struct {
	cur    batchMsg
	ahead  []byte
	n      int
	synced bool
}

func (l *link) batchIter(typ byte, body []byte) batchIter {
	return batchIter{cur: batchMsg{typ, body}, ahead: l.c.r.Ahead()}
}

// next returns the next message, false at the batch's end (its Sync
// returned, or the buffer's end).
func (it *batchIter) next() (batchMsg, bool) {
	if it.synced {
		return batchMsg{}, false
	}
	var m batchMsg
	if it.n == 0 {
		m = it.cur
	} else {
		if len(it.ahead) < 5 {
			return batchMsg{}, false
		}
		mlen := int(binary.BigEndian.Uint32(it.ahead[1:5]))
		if mlen < 4 || len(it.ahead) < 1+mlen {
			return batchMsg{}, false
		}
		m = batchMsg{it.ahead[0], it.ahead[5 : 1+mlen]}
		it.ahead = it.ahead[1+mlen:]
	}
	it.n++
	it.synced = m.typ == wire.MsgSync
	return m, true
}

// batchStart routes a batch that starts (no server linked) with a Parse
// (its routing cur) or a Bind: answered by the pooler when it is only
// transaction control, else routed by its first deciding Bind.
func (l *link) batchStart(typ byte, body []byte, cur *stmtRoute) (shardDecision, loopStep) {
	if l.startsWithTx(typ, body, cur) {
		if step, answered := l.answerTxBatch(typ, body, cur); answered {
			return shardDecision{}, step
		}
	}
	d, undecided := l.batchDecision(typ, body, cur)
	return shardDecision{active: true, d: d, undecided: undecided}, stepOn
}

// batchDecision walks the batch's Parses and Binds: the first Bind that
// decides a shard (a key, a target, a refusal) decides the batch; Binds of
// statements without a colo table decide the default database; with no
// Bind but of transaction control the batch is undecided.
func (l *link) batchDecision(typ byte, body []byte, cur *stmtRoute) (shard.Decision, bool) {
	for {
		d, undecided, more := l.batchDecisionOnce(typ, body, cur)
		if !undecided || !more {
			return d, undecided
		}
		// Nothing decides yet, and the client has sent neither a Sync
		// nor a Flush, so it expects no reply: wait for the rest of the
		// batch (psycopg sends a pipeline's Parse before its Binds), as
		// Postgres would wait for the Sync.
		if err := l.c.r.FillAhead(); err != nil {
			return d, undecided
		}
		var err error
		if body, err = l.c.r.Peek(l.c.r.BodyLen()); err != nil {
			return d, undecided
		}
	}
}

// batchDecisionOnce decides by what is buffered; more reports that the
// buffered batch ends with no Sync or Flush.
func (l *link) batchDecisionOnce(typ byte, body []byte, cur *stmtRoute) (d shard.Decision, undecided, more bool) {
	ss := l.c.shard
	var parsed []namedRoute // Parses of this batch, beyond the current one
	var fallback *shard.Decision
	var fb shard.Decision
	it := l.batchIter(typ, body)
	flushed := false
	for m, ok := it.next(); ok; m, ok = it.next() {
		flushed = m.typ == wire.MsgFlush
		switch m.typ {
		case wire.MsgParse:
			if it.n == 1 {
				// cur, recorded by shardDecide: its own decision stands
				// when it needs no Bind (a refusal, literal keys).
				if cur != nil && cur.tx() == shard.TxNone && !cur.st.Decision.Pending && cur.st.Decision.Source != shard.SourceDefault {
					return cur.st.Decision, false, false
				}
				continue
			}
			if name, text, _, ok := wire.DecodeParse(m.body); ok {
				parsed = append(parsed, namedRoute{string(name), ss.prepare(ss.router, text)})
			}
		case wire.MsgBind:
			_, stmt, _, ok := wire.DecodeBindHead(m.body)
			if !ok {
				continue
			}
			sr, ok := l.batchStmt(parsed, stmt)
			if !ok {
				return shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}, false, false
			}
			if sr.tx() != shard.TxNone {
				continue
			}
			d := sr.decide(ss, m.body)
			if it.n > 1 && ss.memo.at == nil {
				// The Bind is ahead in the buffer: when it is read, this
				// decision is its decision (shardDecide).
				ss.memo = bindMemo{at: &m.body[0], n: len(m.body), d: d}
			}
			if d.Source != shard.SourceDefault {
				return d, false, false
			}
			if fallback == nil {
				fb = d
				fallback = &fb
			}
		}
	}
	if fallback != nil {
		return fb, false, false
	}
	return ss.lastDecision(), true, !it.synced && !flushed
}

// startsWithTx says whether the batch's first message is a Parse of, or a
// Bind of a statement that is, transaction control: only such a batch may
// be answered by the pooler (answerTxBatch).
func (l *link) startsWithTx(typ byte, body []byte, cur *stmtRoute) bool {
	switch typ {
	case wire.MsgParse:
		return cur != nil && cur.tx() != shard.TxNone
	case wire.MsgBind:
		_, stmt, _, ok := wire.DecodeBindHead(body)
		if !ok {
			return false
		}
		sr, known := l.c.shard.stmts.get(stmt)
		return known && sr.tx() != shard.TxNone
	}
	return false
}

// namedRoute is a statement Parsed in the batch being walked.
type namedRoute struct {
	name string
	sr   stmtRoute
}

// batchStmt is the routing of a statement a Bind of the batch names: the
// batch's own last Parse of it, else the client's.
func (l *link) batchStmt(parsed []namedRoute, stmt []byte) (stmtRoute, bool) {
	for i := len(parsed) - 1; i >= 0; i-- {
		if parsed[i].name == string(stmt) {
			return parsed[i].sr, true
		}
	}
	return l.c.shard.stmtRouteOf(l.c, stmt)
}

// answerTxBatch answers a whole buffered batch with no server linked
// that is only transaction control the pooler answers itself: a BEGIN
// (held, as a simple BEGIN is), the SAVEPOINT, RELEASE, ROLLBACK TO and
// SET LOCAL of a held transaction, its COMMIT or ROLLBACK. Anything else,
// or a batch not yet whole, is not answered (answered false).
func (l *link) answerTxBatch(typ byte, body []byte, cur *stmtRoute) (loopStep, bool) {
	c := l.c
	ss := c.shard
	// First look: is every statement executed one the pooler answers?
	held := ss.held != nil
	portals := map[string]shard.TxControl{}
	stmts := map[string]stmtRoute{}
	ok := true
	it := l.batchIter(typ, body)
	for m, more := it.next(); more && ok; m, more = it.next() {
		isFirst := it.n == 1
		switch m.typ {
		case wire.MsgParse:
			name, text, _, okp := wire.DecodeParse(m.body)
			if !okp {
				ok = false
				break
			}
			sr := stmtRoute{}
			if isFirst && cur != nil {
				sr = *cur
			} else {
				st := &shard.Statement{Text: string(text)}
				st.Tx, _ = shard.ReadTxControl(text)
				sr.st = st
			}
			if sr.tx() == shard.TxNone || len(name) > 0 && c.stmtHeld(string(name)) {
				ok = false // (a name in use: Postgres' 42P05 is the answer)
				break
			}
			stmts[string(name)] = sr
		case wire.MsgBind:
			portal, stmt, _, okb := wire.DecodeBindHead(m.body)
			sr, known := stmts[string(stmt)]
			if !known && okb {
				sr, known = ss.stmts.get(stmt)
			}
			if !okb || !known || sr.tx() == shard.TxNone {
				ok = false
				break
			}
			portals[string(portal)] = sr.tx()
		case wire.MsgExecute:
			portal, oke := wire.DecodeExecute(m.body)
			kind, known := portals[string(portal)]
			switch {
			case !oke || !known:
				ok = false
			case kind == shard.TxBegin:
				held = true
			case kind.HeldInTransaction() && held:
			case (kind == shard.TxCommit || kind == shard.TxRollback) && held:
				held = false
			default:
				ok = false // outside a held transaction: Postgres answers
			}
		case wire.MsgDescribe, wire.MsgClose, wire.MsgSync, wire.MsgFlush:
		default:
			ok = false
		}
	}
	synced := it.synced
	if !ok || !synced {
		return stepOn, false
	}
	return l.answerTxMessages(typ, body, stmts), true
}

// answerTxMessages consumes the batch answerTxBatch approved, from the
// current message (typ, body) to its Sync, and answers each message as
// Postgres would.
func (l *link) answerTxMessages(typ byte, body []byte, stmts map[string]stmtRoute) loopStep {
	c := l.c
	ss := c.shard
	out := ss.out[:0]
	portals := map[string]stmtRoute{}
	for {
		switch typ {
		case wire.MsgParse:
			name, text, types, _ := wire.DecodeParse(body)
			ss.stmts.set(name, stmts[string(name)])
			if len(name) > 0 && c.tracking {
				// The mapping learns the name too, so that the client may
				// run it on a server later (a prepared COMMIT of a
				// transaction that did reach one).
				c.holdTxStmt(string(name), string(text), types)
			}
			out = append(out, wire.MsgParseComplete, 0, 0, 0, 4)
		case wire.MsgBind:
			portal, stmt, _, _ := wire.DecodeBindHead(body)
			sr, ok := stmts[string(stmt)]
			if !ok {
				sr, _ = ss.stmts.get(stmt)
			}
			portals[string(portal)] = sr
			out = append(out, wire.MsgBindComplete, 0, 0, 0, 4)
		case wire.MsgDescribe:
			if len(body) > 0 && body[0] == 'S' {
				out = append(out, wire.MsgParameterDescription, 0, 0, 0, 6, 0, 0)
			}
			out = append(out, wire.MsgNoData, 0, 0, 0, 4)
		case wire.MsgExecute:
			portal, _ := wire.DecodeExecute(body)
			sr := portals[string(portal)]
			_, start := shard.ReadTxControl([]byte(sr.text()))
			out = l.applyTx(out, sr.tx(), start, sr.text())
		case wire.MsgClose:
			if target, name, ok := wire.DecodeTarget(body); ok && target == 'S' {
				ss.stmts.del(name)
			}
			out = append(out, wire.MsgCloseComplete, 0, 0, 0, 4)
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

// applyTx applies one transaction-control statement the pooler answers
// (text, as the client wrote it) to the held transaction and appends its
// reply.
func (l *link) applyTx(out []byte, kind shard.TxControl, start bool, text string) []byte {
	ss := l.c.shard
	switch {
	case kind == shard.TxBegin && ss.held != nil:
		out = wire.AppendErrorResponse(out, wire.MsgNoticeResponse, "WARNING", "25001", "there is already a transaction in progress", "", "")
	case kind == shard.TxBegin:
		ss.held, ss.heldN = wire.AppendQuery(nil, text), 1
	case kind.HeldInTransaction():
		ss.held = wire.AppendQuery(ss.held, text)
		ss.heldN++
	default: // COMMIT or ROLLBACK of the held transaction
		ss.held, ss.heldN, ss.local = nil, 0, shard.Pin{}
		ss.pins++
	}
	return wire.AppendCommandComplete(out, kind.Tag(start))
}

// stmtHeld reports a prepared-statement name the client has in the
// mapping.
func (c *client) stmtHeld(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, held := c.mu.stmts[name]
	return held
}

// holdTxStmt gives the client's name for a transaction-control statement
// the pooler answered to the mapping, as a Parse a server had run would:
// the router read it whole, so Postgres will parse it.
func (c *client) holdTxStmt(name, text string, types []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	def := c.svc.stmts.Acquire(text, types, c.svc.settings().PreparedStatementBudget)
	if def == nil {
		return // over prepared_statement_budget: a later Bind finds no name
	}
	def.MarkValidated()
	c.holdNameLocked(name, def)
}
