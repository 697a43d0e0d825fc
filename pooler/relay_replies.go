package pooler

import (
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The pump's side of prepared-statement mapping (prepared.go): what each
// reply of the server does to the op queue (link.mu.ops) and to both sides'
// statement caches. All called with c.mu held.

// replyLocked pops the op a ParseComplete or CloseComplete answers and
// reports whether the pooler injected it (the reply is swallowed).
func (l *link) replyLocked(s *server) (swallow bool) {
	c := l.c
	o := l.mu.ops.peek()
	if o == nil || o.kind == opSync || o.kind == opError || o.kind == opDeallocate || o.kind == opBind || o.kind == opDescribe {
		// Not ours to account for (e.g. a client sending Close in a way
		// we did not track): pass it through.
		return false
	}
	popped := l.mu.ops.pop()
	if popped.kind == opCloseInjected && popped.def != nil {
		c.svc.stmts.Release(popped.def)
	}
	if (popped.kind == opParse || popped.kind == opParseInjected) && popped.def != nil {
		popped.def.MarkValidated()
	}
	return popped.kind == opParseInjected || popped.kind == opCloseInjected
}

// errorLocked applies an ErrorResponse: the ops of the messages the server
// will not answer are dropped and the caches undone. Those are the ones up
// to the failed request's end: with skip (an extended-protocol message
// failed, linkstate.State.ServerError), every message up to the next Sync,
// Queries and FunctionCalls included; otherwise up to the Query,
// FunctionCall or Sync that failed.
//
// A Parse that failed, or that the server skipped after an error, keeps
// the client's name, as in PgBouncer, which keeps a client's names
// whatever the server did with them: a client may not know which messages
// of an aborted pipeline failed or were skipped (psycopg's pipeline mode
// counts them all as prepared and binds them later), so the name stays and
// the statement is prepared on the server again at its next Bind or
// Describe (where a statement that still fails gets Postgres's error for
// it again). A client that does know and parses the name again gets no
// error for it (unconfirmed).
func (l *link) errorLocked(s *server, skip bool) {
	for o := l.mu.ops.peek(); o != nil; o = l.mu.ops.peek() {
		if o.kind == opSync && (!skip || o.msg == wire.MsgSync) {
			break
		}
		l.undoLocked(s, l.mu.ops.pop(), true)
	}
}

// consumedByCopyLocked applies a Parse, Close, Bind or Describe (typ) that
// a COPY IN consumed as the error ending it (linkstate.State.CopyStarted):
// the server never ran it, so its op goes and what it would have changed is
// undone. Its op is the first op of its kind in the queue: the messages
// between the COPY's start and it are COPY data and Syncs, whose ops are
// gone.
func (l *link) consumedByCopyLocked(s *server, typ byte) {
	for i := 0; i < l.mu.ops.Len(); i++ {
		o := l.mu.ops.At(i)
		switch {
		case (typ == wire.MsgParse || typ == wire.MsgClose) &&
			(o.kind == opParse || o.kind == opParseInjected || o.kind == opClose || o.kind == opCloseInjected),
			typ == wire.MsgBind && o.kind == opBind,
			typ == wire.MsgDescribe && o.kind == opDescribe:
			d := *o
			o.kind = opDead
			l.undoLocked(s, d, false)
			return
		}
	}
}

// undoLocked undoes what the message of op d would have changed, for a
// message the server did not run. keepName: a Parse's name stays the
// client's, unconfirmed (errorLocked).
func (l *link) undoLocked(s *server, d op, keepName bool) {
	c := l.c
	if d.unnamed {
		// Whether the server got this unnamed statement is unknown.
		s.unnamedOwner = 0
	}
	switch d.kind {
	case opParse, opParseInjected:
		if d.def != nil {
			// A statement the server has stale was closed before this
			// Parse (prepareLocked): if that Close was skipped too, its
			// undo put the stale copy back, which is still there (an
			// older epoch than this Parse's).
			if epoch, ok := s.stmts.CopyEpoch(d.def); !d.reused && ok && epoch == d.epoch {
				s.stmts.Remove(c.svc.stmts, d.def)
			}
			if cs := c.mu.stmts[d.clientName]; d.clientName != "" && cs != nil && cs.Def == d.def {
				if keepName {
					c.unconfirmLocked(d.clientName)
				} else {
					c.dropNameLocked(d.clientName)
				}
			}
		}
	case opDeallocate:
		// DEALLOCATE failed (an aborted transaction): Postgres keeps
		// the statement, so the client keeps its name, unless it has
		// prepared the name anew since.
		if _, taken := c.mu.stmts[d.clientName]; !taken {
			if c.mu.stmts == nil {
				c.mu.stmts = map[string]*stmtcache.ClientStmt{}
			}
			c.mu.stmts[d.clientName] = d.name
		} else {
			c.svc.stmts.Release(d.def)
		}
	case opCloseInjected:
		if d.def != nil {
			// Skipped: the statement is still on the server, as it was.
			s.stmts.Add(c.svc.stmts, d.def, d.epoch)
			c.svc.stmts.Release(d.def)
		}
	}
}

// commandCompleteLocked clears both sides' statements after DISCARD ALL or
// DEALLOCATE ALL.
func (l *link) commandCompleteLocked(s *server, tag []byte) {
	c := l.c
	t := string(tag)
	if t != "DISCARD ALL" && t != "DEALLOCATE ALL" {
		return
	}
	s.stmts.Clear(c.svc.stmts)
	s.unnamedOwner = 0
	if len(c.mu.discarded)+len(c.mu.stmts) > maxDiscarded {
		c.mu.discarded = nil
	}
	for name := range c.mu.stmts {
		if len(c.mu.discarded) == maxDiscarded {
			break
		}
		if c.mu.discarded == nil {
			c.mu.discarded = map[string]struct{}{}
		}
		c.mu.discarded[name] = struct{}{}
	}
	c.clearStmtsLocked()
}

// maxDiscarded bounds the names a client's DISCARD ALL and DEALLOCATE ALL
// are remembered for (client.discarded); a name past it gets PgBouncer's
// 08P01 instead of Postgres's 26000.
const maxDiscarded = 4096

// holdNameLocked gives the client the name for def (a Parse of it), at
// def's current shape epoch: the client's description of it comes from a
// server's copy parsed at that epoch or later (stmtcache.Cache.Has).
func (c *client) holdNameLocked(name string, def *stmtcache.Def) {
	if c.mu.stmts == nil {
		c.mu.stmts = map[string]*stmtcache.ClientStmt{}
	}
	c.mu.stmts[name] = stmtcache.NewClientStmt(def)
	delete(c.mu.unconfirmed, name)
	delete(c.mu.discarded, name)
}

func (c *client) clearStmtsLocked() {
	for name, cs := range c.mu.stmts {
		c.svc.stmts.Release(cs.Def)
		delete(c.mu.stmts, name)
	}
	c.mu.unconfirmed = nil
}

// dropNameLocked lets go of the client's statement name.
func (c *client) dropNameLocked(name string) {
	if cs := c.mu.stmts[name]; cs != nil {
		delete(c.mu.stmts, name)
		c.svc.stmts.Release(cs.Def)
	}
	delete(c.mu.unconfirmed, name)
}

// unconfirmLocked marks the client's name as one whose Parse the server
// did not run (failed or skipped): kept, but a Parse of it again replaces
// it without an error (heldLocked).
func (c *client) unconfirmLocked(name string) {
	if c.mu.unconfirmed == nil {
		c.mu.unconfirmed = map[string]bool{}
	}
	c.mu.unconfirmed[name] = true
}

// heldLocked reports whether a Parse of name must be refused because the
// client holds it; an unconfirmed name is dropped instead, and the Parse
// takes it anew.
func (c *client) heldLocked(name string) bool {
	if _, held := c.mu.stmts[name]; !held {
		return false
	}
	if c.mu.unconfirmed[name] {
		c.dropNameLocked(name)
		return false
	}
	return true
}
