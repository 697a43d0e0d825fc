package pooler

import (
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Statements made stale by a migration (issue 32).
//
// Postgres keeps a prepared statement's plan and, when a DDL change (ALTER
// TABLE … ADD COLUMN under a SELECT *) would change the statement's result,
// refuses to run it: ERROR 0A000 "cached plan must not change result type",
// at its Bind or at a Describe of it. Directly, a client recovers by
// preparing the text again, under a new name (pgjdbc) or the same one after
// a Close (pgx's statement cache), or a new connection does. Through the
// pooler every client's name for the text is the one server statement
// PGTS_n, so before this each of them kept failing on that server until it
// was closed (PgBouncer's documentation says to RECONNECT).
//
// Now, when such an error answers a Bind or Describe of a statement the
// pooler prepared, the statement's shape epoch is bumped
// (stmtcache.Cache.MarkStale, Def.Epoch): every server's copy parsed before
// the bump is stale, and its next use on that server, by any client, closes
// it and prepares it again (prepareLocked), so that a client which prepared
// the text again does not meet the old plan on another server.
//
// Shape epochs also keep the other clients right. Each client's name
// carries the epoch of the description it has (stmtcache.ClientStmt): once
// another client's use has prepared the server's statement again, a client
// whose description is older would be sent rows of the new shape by a Bind,
// Execute without a Describe, and could decode them wrongly (a column
// dropped and added with another type under its name). Directly, its own
// statement would fail with 0A000 until it prepared the text again; so a
// Bind or Describe of a name older than its statement's epoch gets that
// error from the pooler, in order, and nothing runs on the server
// (refuseStaleLocked). A Parse gives a name the current epoch; a Describe
// in a request sent again (below) brings the name up to the epoch of the
// copy it described (replyOpLocked).
//
// The error reaches the client as Postgres sent it, except in
// one case where nothing has happened yet that the client could see or that
// running it again could repeat: the failed message was the first of an
// implicit transaction, and the request it began is kept whole (below). The
// pooler then swallows the error and the ReadyForQuery of the failed
// request, sends Close and Parse of the statement and the request again,
// once, and the client gets the replies of that second run as if it had
// been the only one.
//
// The request must tell the client the result's new shape in its own
// replies, or the client would read rows of a shape other than the one it
// has cached, which is what Postgres's error protects it from: so only
//
//	Bind (of the mapped statement), Describe portal, Execute…, Sync
//	Describe statement (of the mapped statement), Sync
//
// (with Flush anywhere) are run again; a Bind followed by an Execute with no
// Describe (pgx's statement cache, pgjdbc once a statement is prepared)
// gets the error, as it would directly, and heals as it would directly. In
// a transaction block the error always reaches the client: the block is
// aborted, and ROLLBACK is the client's to send.
//
// Keeping the request: serve copies the messages of a request that starts
// a transaction (recordLocked, captureLocked) into link.retry while it
// relays them, up to retryKeepLimit bytes and only messages of the shapes
// above, each whole in the read buffer; any other message ends the copy.
// The copy is armed when its Sync is recorded, and disarmed by any message
// recorded after that Sync: so when it is armed at the error, nothing the
// client sent after the request is on the wire, and the pooler's second
// run comes next in the server's input and in the client's replies.

// retryKeepLimit bounds the copy of a request kept for running it again.
const retryKeepLimit = 8 << 10

type retryState uint8

const (
	retryOff       retryState = iota
	retryCapturing            // the first request of a transaction is being kept
	retryArmed                // kept whole, up to its Sync; nothing recorded since
)

// retryCapture is a link's copy of the request that began an implicit
// transaction (see above). Written by serve and the pump under c.mu.
type retryCapture struct {
	state retryState
	// def is the mapped statement the request's first message names, and
	// name the client's name for it, whose epoch a second run's Describe
	// brings up to date.
	def  *stmtcache.Def
	name *stmtcache.ClientStmt
	// described: the request describes what it runs (a Describe of the
	// portal after the Bind, or it is a Describe of the statement);
	// statementOnly: it began with a Describe of the statement.
	described, statementOnly bool
	buf                      []byte // the request's messages as sent, the server's names in them
	out                      []byte // the second run's rewrite
	// swallowReady: the failed request's ReadyForQuery is still to come
	// and goes to nobody.
	swallowReady bool
}

func (r *retryCapture) reset() {
	r.state, r.def, r.name, r.swallowReady = retryOff, nil, nil, false
	if cap(r.buf) > retryKeepLimit {
		r.buf = nil
	}
	if cap(r.out) > keptScratch {
		r.out = nil
	}
}

// captureLocked keeps the message typ of n bytes, about to be relayed, in
// the copy of the request that began a transaction, or ends the copy.
// first: nothing is open on the link and no transaction either, so typ
// begins a request that begins an implicit transaction. The first Bind or
// Describe is kept by its relay (keepFirstLocked), with the server's name.
// Called by serve with c.mu held.
func (l *link) captureLocked(typ byte, n int, first bool) {
	r := &l.mu.retry
	if first && (typ == wire.MsgBind || typ == wire.MsgDescribe) {
		r.state, r.def, r.name, r.described, r.statementOnly = retryCapturing, nil, nil, false, false
		r.buf = r.buf[:0]
		return
	}
	if r.state != retryCapturing || r.def == nil {
		r.state = retryOff
		return
	}
	switch typ {
	case wire.MsgDescribe:
		if r.statementOnly || n == 0 || !l.keepWholeLocked(typ, n) || r.buf[len(r.buf)-n] != wire.TargetPortal {
			r.state = retryOff
			return
		}
		r.described = true
	case wire.MsgExecute:
		if r.statementOnly || !r.described || !l.keepWholeLocked(typ, n) {
			r.state = retryOff
		}
	case wire.MsgFlush:
		r.buf = append(r.buf, wire.MsgFlush, 0, 0, 0, 4)
	case wire.MsgSync:
		r.buf = append(r.buf, wire.MsgSync, 0, 0, 0, 4)
		if r.described {
			r.state = retryArmed
		} else {
			r.state = retryOff
		}
	default:
		r.state = retryOff
	}
}

// keepWholeLocked appends the current client message (typ, n body bytes),
// whole in the read buffer, to the copy; false when it is not or the copy
// would pass retryKeepLimit. Called with c.mu held.
func (l *link) keepWholeLocked(typ byte, n int) bool {
	c := l.c
	r := &l.mu.retry
	if len(r.buf)+5+n > retryKeepLimit || 5+n > wire.DefaultBufferSize {
		return false
	}
	body, err := c.r.Peek(n)
	if err != nil || len(body) != n {
		return false
	}
	r.buf = wire.AppendHeader(r.buf, typ, n)
	r.buf = append(r.buf, body...)
	return true
}

// keepFirstLocked keeps the request's first message, a Bind or Describe of
// the client's mapped statement cs as the server gets it: head, and for a
// Bind the client's body from offset from (nil when the Bind was not held
// whole: the copy ends). Called by the relay with c.mu held.
func (l *link) keepFirstLocked(cs *stmtcache.ClientStmt, describe bool, head, body []byte, from int) {
	r := &l.mu.retry
	if (!describe && body == nil) || len(head)+len(body)-from > retryKeepLimit {
		r.state = retryOff
		return
	}
	r.def, r.name, r.statementOnly, r.described = cs.Def, cs, describe, describe
	r.buf = append(r.buf[:0], head...)
	if !describe {
		r.buf = append(r.buf, body[from:]...)
	}
}

// isStalePlan reports whether the server's current message, an
// ErrorResponse, is Postgres's "cached plan must not change result type",
// by its SQLSTATE and its routine (RevalidateCachedQuery, which
// lc_messages does not translate) or its English text. It reads the
// message without consuming it.
func isStalePlan(s *server) bool {
	if !s.r.Fits() {
		return false
	}
	body, err := s.r.Peek(s.r.BodyLen())
	if err != nil {
		return false
	}
	f, err := wire.ParseErrorResponse(body)
	return err == nil && f.Code == "0A000" &&
		(f.Routine == "RevalidateCachedQuery" || f.Message == "cached plan must not change result type")
}

// staleLocked applies a stale-plan error that answers a Bind or Describe of
// a mapped statement: the statement is marked stale on s and returned; nil
// when the error answers another message. replies: the extended messages
// the server completed in the failing request before the error. Called by
// the pump with c.mu held, before errorLocked pops the ops.
func (l *link) staleLocked(s *server, replies int) *stmtcache.Def {
	o := l.mu.ops.peek()
	if o == nil || (o.kind != opBind && o.kind != opDescribe) || o.def == nil || o.pos != replies {
		return nil
	}
	s.stmts.MarkStale(o.def)
	return o.def
}

// retryLocked runs the kept request again after its first message, of def,
// failed with a stale plan, when it is safe (see the top of this file):
// the copy is armed for def, the client is here, serve is not writing to
// s and nothing was sent after the request's Sync. It writes Close and
// Parse of def and the request to s, records them on the link as serve
// records the client's, and reports true; the caller swallows the error,
// and the pump the failed request's ReadyForQuery (retry.swallowReady).
// The copy is disarmed either way: a request runs again at most once.
// Called by the pump with c.mu held, after errorLocked; it writes to the
// server with c.mu held, so that serve, which records a message under c.mu
// before it writes it, cannot write in between.
func (l *link) retryLocked(s *server, def *stmtcache.Def) bool {
	c := l.c
	r := &l.mu.retry
	armed := r.state == retryArmed && r.def == def
	r.state = retryOff
	if !armed || c.gone.Load() || l.mu.writing || !s.stmts.Holds(def) ||
		!l.mu.ls.AwaitsOnlySync() {
		return false
	}
	out := l.prepareLocked(r.out[:0], s, def, opParseInjected, "")
	// The second run's Describe tells the client the shape of the copy
	// just parsed: its reply brings the client's name up to that epoch
	// (replyOpLocked). An error before it leaves the name as it was.
	epoch, _ := s.stmts.CopyEpoch(def) // held: checked above
	for b := r.buf; len(b) >= 5; {
		typ, n := b[0], 1+int(uint32(b[1])<<24|uint32(b[2])<<16|uint32(b[3])<<8|uint32(b[4]))
		l.mu.ls.FromClient(typ)
		switch typ {
		case wire.MsgBind:
			l.pushReplyOpLocked(opBind, def)
		case wire.MsgDescribe:
			if r.statementOnly {
				l.pushReplyOpLocked(opDescribe, def)
			} else {
				l.pushReplyOpLocked(opDescribe, nil)
			}
			l.mu.ops.tail().name, l.mu.ops.tail().epoch = r.name, epoch
		case wire.MsgSync:
			l.mu.ops.push(op{kind: opSync, msg: typ})
		}
		b = b[n:]
	}
	r.swallowReady = true
	err := l.writeRewrite(s.w, out)
	if err == nil {
		err = s.w.Write(r.buf)
	}
	if err == nil {
		err = s.w.Flush()
	}
	r.out = shrunk(out)
	if err != nil {
		// The pump's next read finds the server gone.
		s.conn.Close()
	}
	return true
}
