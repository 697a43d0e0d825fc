package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// A link that ends badly: its server failed (serverLost), or a read
// deadline on it passed (pumpTimeout: query_timeout, transaction_timeout).
// The pump tells the client, waits until serve writes no more to the
// server, and closes it.

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
	code, reason := pgerror.QueryTimeout, "query timeout"
	if !queryOver && txTimed && txLeft <= 0 {
		code, reason = pgerror.TransactionTimeout, "transaction timeout"
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
func (l *link) lostReasonLocked(s *server) (string, pgerror.Code) {
	reason, code := "server conn crashed?", pgerror.ServerCrashed
	if l.mu.detach {
		reason = l.mu.detachReason
	}
	if s.evicted.Load() {
		reason, code = "evicted", pgerror.Evicted
	}
	if s.fastClosed.Load() {
		reason, code = reasonConfigChanged, pgerror.ConfigChanged
	}
	return reason, code
}

// awaitServeOffServerRelock waits until serve no longer writes to s, the
// linked server the pump is about to close or hand back (l.mu.writing,
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
// server, and without c.mu: while l.mu.srv is set the pump is the
// client writer's only user, and once it is nil serve owns the writer
// again and may link another server and relay its replies to that writer
// (the race detector caught the pump's error and serve's relay writing it
// together when this ran after the link ended). serve's closeBadInput
// waits for link.mu.pumpFreed, which the pump signals only after this. The
// write is bounded, as fail's is; without c.mu a client that reads nothing
// holds up nobody else meanwhile (SHOW CLIENTS, cancel requests, the
// janitor's park scan).
//
// The close is logged first, as PgBouncer logs before it tells the
// client: whoever sees the error finds the line already in the log.
func (c *client) closeClient(code pgerror.Code) {
	pe := pgerror.New(code)
	if c.svc.settings().LogPoolerErrors {
		c.logger().Warn("pooler error: " + pe.Message)
	}
	c.closingBecause(pe.Message)
	c.closeLogged.Store(true)
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.w.Write(pgerror.Append(nil, pe))
	c.w.Flush()
	c.conn.Close()
}
