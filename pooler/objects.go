package pooler

import (
	"fmt"
	"slices"
)

// Server states and the pool's server lists, after PgBouncer's objects.c:
// a change of state is a move between lists, and setServerStateLocked is
// the only code that makes it. It is the only writer of server.state and
// of the pool's per-state counts (connecting, idle, active, beingCanceled
// and total), so SHOW POOLS, SHOW SERVERS, the gauges and the caps all read
// one truth and cannot drift apart.
//
// The legal moves (serverTransitions):
//
//	free           -> login                  (startConnectLocked)
//	login          -> idle, active, closed   (connect: ready, handed to a waiter, failed)
//	idle           -> active, closed         (checkout; idle timeout, lifetime, eviction)
//	active         -> idle, closed           (release; discard)
//	active         -> being_canceled         (release while a cancel is in flight)
//	being_canceled -> idle, active, closed   (its cancels done: release's rule)
//
// A server that release hands straight to a waiter stays active. closed
// is the end: the socket is closed outside the lock (closeServer).
//
// Cancellation follows PgBouncer too: a server whose client has a cancel
// request in flight stays active, linked to that client (server.cancels
// marks it); only when the client lets it go before the cancel is done
// does it become being_canceled. PgBouncer's active_cancel is the
// connection that carries a cancel request; here that is a bare socket in
// sendCancel, not a pool server, so SHOW POOLS' sv_active_cancel stays 0.

// serverState is a server connection's place in its pool.
type serverState int

const (
	// serverFree: allocated, not yet accounted for by any pool (the zero
	// value; PgBouncer's SV_FREE).
	serverFree serverState = iota
	// serverLogin: connecting and logging in (SV_LOGIN; SHOW SERVERS
	// would call it "new", but lists only logged-in servers).
	serverLogin
	// serverIdle: in the pool's idle list, ready (SV_IDLE).
	serverIdle
	// serverActive: held by a client, a drain, or the pooler's own query
	// (SV_ACTIVE).
	serverActive
	// serverBeingCanceled: its client let it go while a cancel request for
	// it was still on its way to Postgres; it is handed to nobody until
	// that cancel is done, so the cancel cannot hit the next client's query
	// (SV_BEING_CANCELED).
	serverBeingCanceled
	// serverClosed: out of every list; its socket is being or has been
	// closed.
	serverClosed

	numServerStates
)

// String is the state's name in BUG messages and logs.
func (s serverState) String() string {
	switch s {
	case serverFree:
		return "free"
	case serverLogin:
		return "login"
	case serverIdle:
		return "idle"
	case serverActive:
		return "active"
	case serverBeingCanceled:
		return "being_canceled"
	case serverClosed:
		return "closed"
	}
	return fmt.Sprintf("serverState(%d)", int(s))
}

// show is the state as PgBouncer's SHOW SERVERS names it.
func (s serverState) show() string {
	if s == serverLogin {
		return "new"
	}
	return s.String()
}

// serverTransitions is the table of legal moves: serverTransitions[from][to].
var serverTransitions = [numServerStates][numServerStates]bool{
	serverFree:          {serverLogin: true},
	serverLogin:         {serverIdle: true, serverActive: true, serverClosed: true},
	serverIdle:          {serverActive: true, serverClosed: true},
	serverActive:        {serverIdle: true, serverBeingCanceled: true, serverClosed: true},
	serverBeingCanceled: {serverIdle: true, serverActive: true, serverClosed: true},
	serverClosed:        {},
}

// setServerStateLocked moves s to state to: out of its old list or count,
// into the new one. Entering idle pushes s on top of the idle stack;
// leaving idle takes it out wherever it is. total counts every state but
// free and closed, which is what pool_size caps. An impossible move is a
// bug in the pooler, not a condition to survive: it panics. p.mu is held.
func (p *serverPool) setServerStateLocked(s *server, to serverState) {
	from := s.state
	if s.pool != p {
		panic(fmt.Sprintf("BUG: server %s: %s -> %s in a pool it does not belong to", s, from, to))
	}
	if from < 0 || from >= numServerStates || to < 0 || to >= numServerStates || !serverTransitions[from][to] {
		panic(fmt.Sprintf("BUG: server %s: %s -> %s is not a legal transition", s, from, to))
	}
	switch from {
	case serverFree:
		p.total++
	case serverLogin:
		p.connecting--
	case serverIdle:
		p.removeIdleLocked(s)
	case serverActive:
		p.active--
	case serverBeingCanceled:
		p.beingCanceled--
	}
	s.state = to
	switch to {
	case serverLogin:
		p.connecting++
	case serverIdle:
		p.idle = append(p.idle, s)
	case serverActive:
		p.active++
	case serverBeingCanceled:
		p.beingCanceled++
	case serverClosed:
		p.total--
	}
}

// newLoginLocked makes the object of a server about to log in: from this
// moment the pool counts it (in login, and in total). It takes its id
// (S-n) now, as PgBouncer numbers a socket when it makes it, so the log
// lines of its login name it. p.mu is held.
func (p *serverPool) newLoginLocked() *server {
	s := &server{pool: p, target: p.target.Load(), id: p.svc.socketIDs.Add(1)}
	s.ep = p.pickEndpointLocked(s.target)
	p.setServerStateLocked(s, serverLogin)
	return s
}

// removeIdleLocked takes s out of the idle stack, keeping the order of the
// others. Checkout takes the top (or, with server_round_robin, the bottom),
// so those two places are looked at first.
func (p *serverPool) removeIdleLocked(s *server) {
	n := len(p.idle)
	if n > 0 && p.idle[n-1] == s {
		// The top: every checkout without server_round_robin.
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		return
	}
	i := slices.Index(p.idle, s)
	if i < 0 {
		panic(fmt.Sprintf("BUG: server %s: idle but not in the idle list", s))
	}
	copy(p.idle[i:], p.idle[i+1:])
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
}

// nextIdleLocked is the idle server checkout would take: the most recently
// used (LIFO), or the longest idle with server_round_robin; nil if none.
func (p *serverPool) nextIdleLocked() *server {
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	if p.svc.settings().ServerRoundRobin {
		return p.idle[0]
	}
	return p.idle[n-1]
}

// handOffLocked gives a ready server (new, released, or done being
// cancelled) to the next waiter, or puts it idle.
func (p *serverPool) handOffLocked(s *server) {
	if w := p.queue.pop(); w != nil {
		p.queued.Store(int32(p.queue.len()))
		if s.state != serverActive {
			p.setServerStateLocked(s, serverActive)
		}
		w.grant <- grant{s: s}
		return
	}
	s.lastUsed = p.svc.clock.Now()
	p.setServerStateLocked(s, serverIdle)
}

// closeServer closes the socket and returns the cap slots; called without
// p.mu after the server left every list.
func (p *serverPool) closeServer(s *server, reason string) {
	s.close()
	s.stmts.clear(p.svc.stmts)
	p.mu.Lock()
	delete(p.servers, s)
	p.mu.Unlock()
	p.svc.changes.notify() // for PAUSE and WAIT_CLOSE (console.go)
	p.dbLimit.give()
	p.userLimit.give()
	p.metrics.count("pgturnstile_server_closes_total", "reason", reason)
	if p.svc.logDisconnections() {
		p.serverLogger(s).Info("closing because: " + reason + " (age=" + formatAge(p.svc.clock.Since(s.created)) + ")")
	}
	p.svc.wakeLimited(p.dbLimit, p.userLimit)
}

// cancelStarted marks s as the target of a cancel request about to be
// sent. The caller holds the mu of the client s is linked to: that client
// clears its link under the same lock before it lets s go, so release
// always sees the mark, and a server with a cancel in flight is never
// handed to another client (see release).
func (s *server) cancelStarted() { s.cancels.Add(1) }

// cancelDone ends a cancel request that cancelStarted marked. A server its
// client let go meanwhile (being_canceled) goes on by release's rule once
// its last cancel is done; one still held stays with its holder.
func (p *serverPool) cancelDone(s *server) {
	st := p.svc.settings()
	now := p.svc.clock.Now()
	p.mu.Lock()
	if s.cancels.Add(-1) > 0 || s.state != serverBeingCanceled {
		p.mu.Unlock()
		return
	}
	reason := p.reuseOrCloseLocked(s, st, now)
	p.mu.Unlock()
	p.reused(s, reason)
}
