package pooler

import (
	"errors"
	"unsafe"

	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/wire"
)

// maxNameMessage bounds the statement names the pooler maps: a Describe or
// Close carrying a longer one is refused from its header (judgeHeader).
const maxNameMessage = mappedNameLimit

// errUnmappedTooLong: a Describe or Close over Postgres's limit for them
// (smallMessageLimit) that names no statement the pooler maps, so it would
// go to the server as it is; the client is refused as Postgres would
// refuse it, and the server never sees it.
var errUnmappedTooLong = errors.New("unmapped Describe or Close over Postgres's message limit")

// errHeldMessage and errStatementBudget answer a Parse the pooler cannot
// hold: the client gets the error in order and stays connected.
var (
	errHeldMessage     = pgerror.New(pgerror.HeldMessageTooLarge)
	errStatementName   = pgerror.New(pgerror.StatementNameTooLong)
	errStatementBudget = pgerror.New(pgerror.StatementBudget)
	errStmtNotFound    = pgerror.New(pgerror.StatementNotFound)
	errStmtExists      = pgerror.New(pgerror.StatementExists)
	errStalePlan       = pgerror.New(pgerror.StalePlan)
)

// relayParse relays a client's Parse: an unnamed one as it is (and
// remembered), a named one mapped to the server's name, registered, and
// prepared on the server only when it does not have it yet. One function:
// its refusals (held size, name length, budget, name reuse) must answer in
// the order the protocol requires, before anything reaches the server.
func (l *link) relayParse(bodyLen int, s *server) error {
	c := l.c
	st := c.svc.settings()
	if st.MaxHeldMessageSize > 0 && bodyLen > st.MaxHeldMessageSize {
		return l.relayParseUnheld(bodyLen, s)
	}
	// A body larger than the read buffer is copied out for this message
	// alone (reserved in held_message_budget first): the pooler may keep
	// that copy as it is. A smaller one is a view of the read buffer.
	own := !c.r.Fits()
	body, err := c.r.ReadBody(nil)
	if err != nil {
		return err
	}
	nameBytes, query, types, ok := wire.DecodeParse(body)
	name := string(nameBytes)
	c.mu.Lock()
	if !ok || name == "" {
		// Unnamed statements (and malformed messages, which Postgres
		// rejects itself) pass through. The unnamed one is remembered so
		// that a Bind in a later Sync cycle can recreate it on whichever
		// server that cycle gets (lib/pq, pgx's describe-exec mode).
		remembered := ok && c.rememberUnnamedLocked(body, own, st.PreparedStatementBudget)
		l.mu.ops.push(op{kind: opParse, unnamed: ok})
		if remembered {
			c.mu.unnamedGen++
			s.unnamedOwner, s.unnamedGen = c.id, c.mu.unnamedGen
		} else {
			s.unnamedOwner = 0
		}
		c.mu.Unlock()
		return s.w.WriteMessage(wire.MsgParse, body)
	}
	// SHOW STATS' parse and bind counts are of named statements the
	// pooler maps, as PgBouncer's (client_parse_count, bind_count).
	c.pool.stats.clientParses.Add(1)
	if len(name) > maxNameMessage-2 {
		l.mu.ls.Unrecord() // answered here, not sent
		l.refuseInBatchLocked(errStatementName)
		c.mu.Unlock()
		return nil
	}
	if c.heldLocked(name) {
		l.mu.ls.Unrecord() // answered here, not sent
		l.refuseInBatchLocked(errStmtExists)
		c.mu.Unlock()
		c.logStmtRefusal("prepared statement '"+name+"' was already prepared", errStmtExists)
		return nil
	}
	var q string
	if own && len(query) > 0 {
		// The body was allocated for this message and nothing else
		// refers to it once this returns: the definition takes its text
		// without a second copy, so a long statement is held once.
		q = unsafe.String(&query[0], len(query))
	} else {
		q = string(query)
	}
	def := c.svc.stmts.Acquire(q, types, st.PreparedStatementBudget)
	if def == nil {
		l.mu.ls.Unrecord() // answered here, not sent
		l.refuseInBatchLocked(errStatementBudget)
		c.mu.Unlock()
		return nil
	}
	c.holdNameLocked(name, def)
	out := l.serve.out[:0]
	if s.stmts.Has(def) {
		l.mu.ops.push(op{kind: opParse, def: def, clientName: name, reused: true})
		l.mu.ops.push(op{kind: opCloseInjected})
		out = wire.AppendParse(out, noopStmt, "", nil)
		out = wire.AppendClose(out, wire.TargetStatement, noopStmt)
		l.mu.ls.Injected(wire.MsgClose)
	} else {
		out = l.prepareLocked(out, s, def, opParse, name)
	}
	c.mu.Unlock()
	l.serve.out = shrunk(out)
	return l.writeRewrite(s.w, out)
}

// relayParseUnheld passes on a Parse larger than max_held_message_size
// without holding it: an unnamed one is streamed to the server (and not
// remembered for a later Sync cycle, as in PgBouncer); a named one, which
// the pooler could only map by holding it, is refused in order.
func (l *link) relayParseUnheld(bodyLen int, s *server) error {
	c := l.c
	pre, err := c.r.Peek(min(bodyLen, 256))
	if err != nil {
		return err
	}
	c.mu.Lock()
	if len(pre) > 0 && pre[0] == 0 {
		c.forgetUnnamedLocked()
		s.unnamedOwner = 0
		l.mu.ops.push(op{kind: opParse})
		c.mu.Unlock()
		return c.r.Forward(s.w)
	}
	l.mu.ls.Unrecord() // answered here, not sent
	l.refuseInBatchLocked(errHeldMessage)
	c.mu.Unlock()
	return c.r.Skip()
}

// refuseUnknownLocked answers a Bind or Describe of a statement name the
// client has not prepared (nothing on any server has it under that name:
// the server's names are the pooler's). PgBouncer closes the client with
// "prepared statement did not exist"; pgturnstile sends the same error in
// order and keeps the connection, as Postgres does for its own "does not
// exist". A name the client's DISCARD ALL or DEALLOCATE ALL dropped gets
// Postgres's own error (26000), as the client would get directly. It
// returns the error sent. Called with c.mu held, for the message just
// recorded.
func (l *link) refuseUnknownLocked(name []byte) *pgerror.Error {
	c := l.c
	l.mu.ls.Unrecord() // answered here, not sent
	e := errStmtNotFound
	if _, dropped := c.mu.discarded[string(name)]; dropped {
		e = pgerror.New(pgerror.StatementDiscarded, string(name))
	}
	l.refuseInBatchLocked(e)
	return e
}

// refuseStaleLocked answers a Bind or Describe of a name whose description
// is of an older shape than its statement's (stmtcache.ClientStmt): a
// migration changed the statement's result since the client prepared it,
// and another client's use has prepared it again on the server, or will.
// Directly, the client's own statement would fail with 0A000 (cached plan
// must not change result type) until it prepared the text again; it gets
// that error, in order, and nothing runs on the server, rather than rows of
// a shape its description would misread. Drivers heal from it as from
// Postgres's own: pgx's statement cache and pgjdbc prepare the text again,
// and a fresh Parse holds the name at the current epoch. Called with c.mu
// held, for the message just recorded.
func (l *link) refuseStaleLocked() {
	l.mu.ls.Unrecord() // answered here, not sent
	l.refuseInBatchLocked(errStalePlan)
}

// logStale notes a refuseStaleLocked at NOISE. Called without c.mu.
func (c *client) logStale(name []byte, def *stmtcache.Def) {
	c.noisef("prepared statement '%s' (%s) was described before its result changed: 0A000", name, def.Name)
}

// logStmtRefusal logs a prepared-statement refusal in PgBouncer's words:
// its ERROR line for the cause and, with log_pooler_errors, the "pooler
// error" line of the text the client gets. Called without c.mu.
func (c *client) logStmtRefusal(cause string, e *pgerror.Error) {
	c.logger().Error(cause)
	if c.svc.settings().LogPoolerErrors {
		c.logger().Warn("pooler error: " + e.Message)
	}
}

// refuseInBatchLocked answers the current message with e, emitted in order
// before the ReadyForQuery of the client's next Sync, and drops the
// client's messages up to that Sync, as Postgres does after its own
// errors. Called with c.mu held.
func (l *link) refuseInBatchLocked(e *pgerror.Error) {
	l.mu.ops.push(op{kind: opError, err: e})
	l.mu.skipToSync = true
}

// rememberUnnamedLocked keeps body as the client's last unnamed Parse,
// counted in prepared_statement_budget (limit; 0 = none), and reports
// false (nothing kept) when the budget has no room. own: body was
// allocated for this message alone and is kept as it is. A small body
// reuses the previous buffer unless that is much larger: a client keeps
// no more than about its last statement. Called with c.mu held.
func (c *client) rememberUnnamedLocked(body []byte, own bool, limit int) bool {
	if old := cap(c.mu.unnamedParse); !own && c.mu.unnamedParse != nil && old >= len(body) && old <= max(2*len(body), 4096) {
		c.mu.unnamedParse = append(c.mu.unnamedParse[:0], body...)
		return true
	}
	c.forgetUnnamedLocked()
	if !c.svc.stmts.ReserveText(int64(len(body)), limit) {
		return false
	}
	if own {
		c.mu.unnamedParse = body[:len(body):len(body)]
	} else {
		c.mu.unnamedParse = make([]byte, len(body))
		copy(c.mu.unnamedParse, body)
	}
	return true
}

// forgetUnnamedLocked drops the client's remembered unnamed Parse.
func (c *client) forgetUnnamedLocked() {
	if c.mu.unnamedParse != nil {
		c.svc.stmts.ReleaseText(int64(cap(c.mu.unnamedParse)))
		c.mu.unnamedParse = nil
	}
}

// prepareLocked appends a Parse of def for server s, evicting the server's
// least recently used statements first so that its cache, with def, stays
// within max_prepared_statements, and records them all in the op queue.
// After the limit was lowered (SET, RELOAD) that closes several at once,
// shrinking the cache to the new limit on its next Parse, as PgBouncer.
// Called with c.mu held.
func (l *link) prepareLocked(out []byte, s *server, def *stmtcache.Def, kind opKind, clientName string) []byte {
	c := l.c
	if s.stmts.IsStale(def) {
		// Prepared before the definition's last shape epoch (a plan
		// Postgres refused, here or on another server): closed first,
		// so that the Parse under the same name makes a new one.
		out = l.closeInjectedLocked(out, s, def)
	}
	if limit := c.svc.settings().MaxPreparedStatements; limit > 0 {
		for s.stmts.Len() >= limit {
			old := s.stmts.Oldest()
			if old == nil {
				panic("BUG: server " + s.String() + ": statement cache not empty but has no oldest")
			}
			out = l.closeInjectedLocked(out, s, old)
		}
	}
	out = l.appendParseLocked(out, def.Name, def.Query, def.Types)
	s.pool.stats.serverParses.Add(1)
	// The epoch is read before the Parse is sent, so the copy's plan is
	// at least as new as whatever migration that epoch reflects.
	epoch := def.Epoch()
	l.mu.ops.push(op{kind: kind, def: def, clientName: clientName, epoch: epoch})
	if kind == opParseInjected {
		l.mu.ls.Injected(wire.MsgParse)
	}
	s.stmts.Add(c.svc.stmts, def, epoch)
	return out
}

// closeInjectedLocked appends a Close of the server's statement d and
// takes it out of the server's cache; the op holds d until the reply, and
// puts it back (at its epoch, stale as it was) if the server skips the
// Close. Called with c.mu held.
func (l *link) closeInjectedLocked(out []byte, s *server, d *stmtcache.Def) []byte {
	c := l.c
	out = wire.AppendClose(out, wire.TargetStatement, d.Name)
	c.svc.stmts.Ref(d) // held by the op until its reply
	epoch, _ := s.stmts.CopyEpoch(d)
	l.mu.ops.push(op{kind: opCloseInjected, def: d, epoch: epoch})
	l.mu.ls.Injected(wire.MsgClose)
	s.stmts.Remove(c.svc.stmts, d)
	return out
}

// pushReplyOpLocked records the op of a Bind or Describe just written
// (after what was injected for it), with its place in its Sync cycle.
// Called with c.mu held.
func (l *link) pushReplyOpLocked(kind opKind, def *stmtcache.Def) {
	l.mu.ops.push(op{kind: kind, def: def, pos: l.mu.ls.CyclePos()})
}

func (l *link) relayBind(bodyLen int, s *server) error {
	c := l.c
	// The whole body when it is in the buffer (it is, when it fits:
	// awaitMessage), for a copy the first request of a transaction keeps
	// (relay_retry.go); else the start, for the names.
	peek := bindPeek
	if c.r.Fits() {
		peek = bodyLen
	}
	pre, err := c.r.Peek(peek)
	if err != nil {
		return err
	}
	// Names as bytes, and map lookups by string(bytes), which Go does
	// without a copy: a Bind of a named statement is every transaction of
	// a client using prepared statements.
	portal, stmt, names, ok := wire.DecodeBindHead(pre)
	var held []byte
	if !ok && bodyLen > len(pre) {
		// The names are longer than the peek (a statement named with
		// more than bindPeek bytes): the message is held whole, as a
		// long Parse is (reserved in held_message_budget), so that the
		// server gets its own name for it.
		if held, err = c.r.ReadBody(nil); err != nil {
			return err
		}
		portal, stmt, names, ok = wire.DecodeBindHead(held)
	}
	// rest passes on what follows the names (rewritten), or the whole
	// message as the client sent it.
	rest := func(rewritten bool) error {
		switch {
		case held != nil && rewritten:
			return s.w.Write(held[names:])
		case held != nil:
			return s.w.WriteMessage(wire.MsgBind, held)
		case rewritten:
			return c.r.ForwardBodyFrom(s.w, names)
		}
		return c.r.Forward(s.w)
	}
	if !ok {
		c.mu.Lock()
		l.pushReplyOpLocked(opBind, nil)
		c.mu.Unlock()
		return rest(false)
	}
	if len(stmt) == 0 {
		c.mu.Lock()
		out := l.unnamedLocked(l.serve.out[:0], s)
		l.pushReplyOpLocked(opBind, nil)
		c.mu.Unlock()
		l.serve.out = shrunk(out)
		if err := l.writeRewrite(s.w, out); err != nil {
			return err
		}
		return rest(false)
	}
	c.mu.Lock()
	cs := c.mu.stmts[string(stmt)]
	if cs == nil {
		e := l.refuseUnknownLocked(stmt)
		c.mu.Unlock()
		c.logStmtRefusal("prepared statement '"+string(stmt)+"' not found", e)
		if held != nil {
			return nil
		}
		return c.r.Skip()
	}
	if !cs.Current() {
		l.refuseStaleLocked()
		c.mu.Unlock()
		c.logStale(stmt, cs.Def)
		if held != nil {
			return nil
		}
		return c.r.Skip()
	}
	def := cs.Def
	s.pool.stats.binds.Add(1)
	out := l.serve.out[:0]
	if !s.stmts.Has(def) {
		out = l.prepareLocked(out, s, def, opParseInjected, "")
	}
	head := len(out)
	out = wire.AppendBindHead(out, portal, def.Name, bodyLen-names)
	l.pushReplyOpLocked(opBind, def)
	if l.mu.retry.state == retryCapturing {
		body := held
		if body == nil && len(pre) == bodyLen {
			body = pre
		}
		l.keepFirstLocked(cs, false, out[head:], body, names)
	}
	c.mu.Unlock()
	l.serve.out = shrunk(out)
	if err := l.writeRewrite(s.w, out); err != nil {
		return err
	}
	return rest(true)
}

// bindPeek is how much of a Bind relayBind looks at for its portal and
// statement names without holding the message; longer names make it hold
// the Bind whole.
const bindPeek = 512

func (l *link) relayDescribe(s *server) error {
	c := l.c
	body, err := c.r.ReadBody(nil)
	if err != nil {
		return err
	}
	target, name, ok := wire.DecodeTarget(body)
	if len(body) > smallMessageLimit && (!ok || target != wire.TargetStatement || len(name) == 0 || !c.mapsName(name)) {
		return errUnmappedTooLong
	}
	if !ok || target != wire.TargetStatement {
		c.mu.Lock()
		l.pushReplyOpLocked(opDescribe, nil)
		c.mu.Unlock()
		return s.w.WriteMessage(wire.MsgDescribe, body)
	}
	c.mu.Lock()
	if len(name) == 0 {
		out := l.unnamedLocked(l.serve.out[:0], s)
		l.pushReplyOpLocked(opDescribe, nil)
		c.mu.Unlock()
		l.serve.out = shrunk(out)
		if err := l.writeRewrite(s.w, out); err != nil {
			return err
		}
		return s.w.WriteMessage(wire.MsgDescribe, body)
	}
	cs := c.mu.stmts[string(name)]
	if cs == nil {
		e := l.refuseUnknownLocked(name)
		c.mu.Unlock()
		c.logStmtRefusal("prepared statement '"+string(name)+"' not found", e)
		return nil
	}
	if !cs.Current() {
		l.refuseStaleLocked()
		c.mu.Unlock()
		c.logStale(name, cs.Def)
		return nil
	}
	def := cs.Def
	out := l.serve.out[:0]
	if !s.stmts.Has(def) {
		out = l.prepareLocked(out, s, def, opParseInjected, "")
	}
	head := len(out)
	out = wire.AppendDescribe(out, wire.TargetStatement, def.Name)
	l.pushReplyOpLocked(opDescribe, def)
	if l.mu.retry.state == retryCapturing {
		l.keepFirstLocked(cs, true, out[head:], nil, 0)
	}
	c.mu.Unlock()
	l.serve.out = shrunk(out)
	return l.writeRewrite(s.w, out)
}

// mapsName reports whether name is one of the client's mapped statements.
func (c *client) mapsName(name []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.stmts[string(name)] != nil
}

func (l *link) relayClose(s *server) error {
	c := l.c
	body, err := c.r.ReadBody(nil)
	if err != nil {
		return err
	}
	if target, name, ok := wire.DecodeTarget(body); len(body) > smallMessageLimit && (!ok || target != wire.TargetStatement || len(name) == 0 || !c.mapsName(name)) {
		return errUnmappedTooLong
	}
	c.mu.Lock()
	l.mu.ops.push(op{kind: opClose})
	if target, name, ok := wire.DecodeTarget(body); ok && target == wire.TargetStatement && len(name) > 0 {
		if cs := c.mu.stmts[string(name)]; cs != nil {
			// The client's name goes; the server's statement stays
			// for other clients. Closing a name that does not exist
			// gives the client its CloseComplete, in order.
			delete(c.mu.stmts, string(name))
			c.svc.stmts.Release(cs.Def)
			c.mu.Unlock()
			l.serve.out = wire.AppendClose(l.serve.out[:0], wire.TargetStatement, noopStmt)
			return s.w.Write(l.serve.out)
		}
	}
	c.mu.Unlock()
	return s.w.WriteMessage(wire.MsgClose, body)
}

// deallocateComplete is DEALLOCATE's CommandComplete.
var deallocateComplete = []byte{wire.MsgCommandComplete, 0, 0, 0, 4 + 11, 'D', 'E', 'A', 'L', 'L', 'O', 'C', 'A', 'T', 'E', 0}

// deallocateDoneLocked applies the CommandComplete of the stand-in: the
// client's DEALLOCATE succeeded. It reports whether the op at the head was
// a DEALLOCATE, in which case the caller sends "DEALLOCATE" as the tag.
func (l *link) deallocateDoneLocked(tag []byte) bool {
	c := l.c
	o := l.mu.ops.peek()
	if o == nil || o.kind != opDeallocate || string(tag) != "DO" {
		return false
	}
	d := l.mu.ops.pop()
	c.svc.stmts.Release(d.def)
	return true
}

// unnamedLocked appends a Parse of the client's last unnamed statement when
// server s does not hold it as its unnamed statement, for a Bind or
// Describe of "" in a later Sync cycle than the Parse. Called with c.mu held.
func (l *link) unnamedLocked(out []byte, s *server) []byte {
	c := l.c
	if c.mu.unnamedParse == nil || (s.unnamedOwner == c.id && s.unnamedGen == c.mu.unnamedGen) {
		return out
	}
	out = wire.AppendHeader(out, wire.MsgParse, len(c.mu.unnamedParse))
	out = l.appendText(out, c.mu.unnamedParse)
	l.mu.ops.push(op{kind: opParseInjected, unnamed: true})
	l.mu.ls.Injected(wire.MsgParse)
	s.unnamedOwner, s.unnamedGen = c.id, c.mu.unnamedGen
	return out
}
