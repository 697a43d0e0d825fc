package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The server messages the pump looks inside besides ReadyForQuery
// (pumpLook, pump.go): ParameterStatus, the start of a COPY, an
// ErrorResponse, and the replies of prepared-statement mapping.

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

// pumpCopyStarted applies a CopyInResponse or CopyBothResponse to the link
// (linkstate.State.CopyStarted) and the mapping queue. gone: the client had
// left when the message was read.
func (l *link) pumpCopyStarted(s *server, gone, inline bool) replyAct {
	c := l.c
	c.mu.Lock()
	if dropped, consumed := l.mu.ls.CopyStarted(l.pump.replies); c.tracking {
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
// (linkstate.State.ServerError) and, when the server now skips to a Sync
// not yet sent, makes serve skip the client's messages up to it too.
func (l *link) pumpError(s *server, inline bool) replyAct {
	c := l.c
	act := replyForward
	// Read before c.mu is taken: the message may still be arriving.
	stalePlan := c.tracking && isStalePlan(s)
	c.mu.Lock()
	replies := l.pump.replies
	skip, synced := l.mu.ls.ServerError(replies)
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
	var stale *stmtcache.Def
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
	c.noisef("%s had a stale plan on %s: prepared again, request sent again", stale.Name, s)
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
