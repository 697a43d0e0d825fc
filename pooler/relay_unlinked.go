package pooler

import (
	"github.com/pgturnstile/pgturnstile/wire"
)

// skipAfterError drops a client message after an error, up to the
// client's Sync, as Postgres skips them. A named Parse among them keeps
// its name, unconfirmed, as a Parse the server skipped does (errorLocked):
// whether the server skipped a message of an aborted pipeline or the
// pooler dropped it depends only on when the error came back, and a
// client that binds such names later (psycopg's pipeline mode) must get
// the same either way. Its statement is prepared on the server at its
// next Bind or Describe. A Parse too large for the read buffer is
// dropped without its name.
func (l *link) skipAfterError(typ byte, bodyLen int) error {
	c := l.c
	if typ == wire.MsgParse && c.tracking && 5+bodyLen <= wire.DefaultBufferSize {
		body, err := c.r.Peek(bodyLen)
		if err != nil {
			return err
		}
		l.keepSkippedParse(body)
	}
	return c.r.Skip()
}

// keepSkippedParse gives the client the name of a Parse dropped after an
// error, unconfirmed, unless the client holds the name already (the
// Parse, had it run, would have failed and changed nothing).
func (l *link) keepSkippedParse(body []byte) {
	c := l.c
	nameBytes, query, types, ok := wire.DecodeParse(body)
	if !ok || len(nameBytes) == 0 || len(nameBytes) > maxNameMessage-2 {
		return
	}
	name := string(nameBytes)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, held := c.mu.stmts[name]; held {
		return
	}
	def := c.svc.stmts.Acquire(string(query), types, c.svc.settings().PreparedStatementBudget)
	if def == nil {
		return // over prepared_statement_budget: a later Bind finds no name
	}
	c.holdNameLocked(name, def)
	c.unconfirmLocked(name)
}

// answerSync answers a Sync with the errors the pooler owes before it and
// ReadyForQuery 'I', and ends a skip to Sync.
func (l *link) answerSync() error {
	c := l.c
	if err := c.r.Skip(); err != nil {
		return err
	}
	c.mu.Lock()
	l.mu.skipToSync = false
	out := l.readyLocked(c.scratch[:0])
	c.mu.Unlock()
	out = wire.AppendReadyForQuery(out, c.heldStatus())
	c.scratch = out
	if err := c.w.Write(out); err != nil {
		return err
	}
	return l.flushUnlinked()
}

// answerFlush answers a Flush: the replies written so far go out.
func (l *link) answerFlush() error {
	c := l.c
	if err := c.r.Skip(); err != nil {
		return err
	}
	return c.w.Flush()
}

// answerClose answers a Close with CloseComplete; a statement's name leaves
// the client's map (a portal's needs nothing: none outlives a transaction).
func (l *link) answerClose() error {
	c := l.c
	body, err := c.r.ReadBody(nil)
	if err != nil {
		return err
	}
	if target, name, ok := wire.DecodeTarget(body); ok && target == wire.TargetStatement {
		c.mu.Lock()
		if cs := c.mu.stmts[string(name)]; cs != nil {
			delete(c.mu.stmts, string(name))
			c.svc.stmts.Release(cs.Def)
		}
		c.mu.Unlock()
	}
	if err := c.w.Write(closeComplete); err != nil {
		return err
	}
	return l.flushUnlinked()
}

// answerParse answers a named Parse of a statement some server has parsed
// successfully: the name is mapped now and ParseComplete written. It
// reports false, having consumed nothing, for a Parse that needs a server
// (unnamed, not in the buffer whole, or a statement not yet validated); a
// name the client already holds gets PgBouncer's error in order.
func (l *link) answerParse(bodyLen int) (bool, error) {
	c := l.c
	if 5+bodyLen > wire.DefaultBufferSize {
		return false, nil
	}
	body, err := c.r.Peek(bodyLen)
	if err != nil {
		return true, err
	}
	nameBytes, query, types, ok := wire.DecodeParse(body)
	if !ok || len(nameBytes) == 0 {
		return false, nil
	}
	name := string(nameBytes)
	c.mu.Lock()
	if c.heldLocked(name) {
		l.refuseInBatchLocked(errStmtExists)
		c.mu.Unlock()
		c.logStmtRefusal("prepared statement '"+name+"' was already prepared", errStmtExists)
		return true, c.r.Skip()
	}
	def := c.svc.stmts.LookupValidated(string(query), types)
	if def == nil {
		c.mu.Unlock()
		return false, nil
	}
	c.holdNameLocked(name, def)
	c.mu.Unlock()
	if err := c.r.Skip(); err != nil {
		return true, err
	}
	if err := c.w.Write(parseComplete); err != nil {
		return true, err
	}
	return true, l.flushUnlinked()
}

var (
	parseComplete = []byte{wire.MsgParseComplete, 0, 0, 0, 4}
	closeComplete = []byte{wire.MsgCloseComplete, 0, 0, 0, 4}
)

// flushUnlinked flushes local replies once the client's batch is consumed.
func (l *link) flushUnlinked() error {
	c := l.c
	if c.r.Pending() {
		return nil
	}
	return c.w.Flush()
}
