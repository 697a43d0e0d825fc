package pooler

import (
	"fmt"
)

// clientState is where a client is in its life. Every change goes through
// client.setStateLocked, which checks it against clientTransitions:
//
//	login    -> welcome                 joined its pool (joinPool: enterPool)
//	welcome  -> idle                    logged in (startLoop)
//	idle     -> waiting                 a message needs a server (linkServer)
//	waiting  -> active | idle           linked, or the wait ended without (endWait)
//	active   -> idle                    server released, lost or closed (unlinkServerLocked)
//	active   -> draining                the client left while linked (abandonLink, relayFailed)
//	idle     -> parked -> idle          park.go: tryPark; startLoop after resume
//	active   -> parked -> active        the same for a session-mode client
//	                                    parked with its idle server (SUSPEND)
//	any      -> closed                  the client's goroutine ended (Service.clientClosed)
//
// SHOW CLIENTS shows login, welcome, idle and parked as PgBouncer's "idle",
// waiting as "waiting", active (and draining while the server is still
// linked) as "active" (clientState.show).
//
// setStateLocked also keeps the pool's client counts (serverPool.clientsIn,
// one per state), which SHOW POOLS and the pool gauges read: a client
// counts in its pool from welcome until closed (inPool).
type clientState uint8

const (
	// clientLogin: the startup packet, authentication and welcome. An
	// admin console client stays here: its session runs inside login
	// (admin.Serve).
	clientLogin clientState = iota
	// clientWelcome: authenticated and one of its pool's clients
	// (c.pool set); the welcome is being sent, after, for a pool's first
	// client, a wait in the pool's queue for the server login whose
	// parameters the welcome carries (joinPool). Not yet in the service's
	// cancel map, so SHOW CLIENTS and cancel requests do not see it.
	clientWelcome
	// clientIdle: logged in, no server linked, not waiting for one.
	clientIdle
	// clientWaiting: serve waits for a server, at the admission gate or
	// in the pool's queue (linkServer); a cancel request ends the wait.
	clientWaiting
	// clientActive: a server is linked (c.mu.link.mu.srv).
	clientActive
	// clientParked: the client's goroutine ended and its socket waits in
	// the service's epoll set (park.go); c.mu.link is nil, until resume makes
	// a new one for the goroutine that takes the client up again.
	clientParked
	// clientDraining: the client left while its server was linked; the
	// pump brings the server back to clean (drain.go). The server may
	// already be released: the client stays draining until its goroutine
	// ends.
	clientDraining
	// clientClosed: the client's goroutine ended (Service.clientClosed);
	// a drain may still run on its last link.
	clientClosed

	numClientStates = iota
)

var clientStateNames = [...]string{
	clientLogin:    "login",
	clientWelcome:  "welcome",
	clientIdle:     "idle",
	clientWaiting:  "waiting",
	clientActive:   "active",
	clientParked:   "parked",
	clientDraining: "draining",
	clientClosed:   "closed",
}

func (s clientState) String() string {
	if int(s) < len(clientStateNames) {
		return clientStateNames[s]
	}
	return fmt.Sprintf("clientState(%d)", s)
}

// show is the state as SHOW CLIENTS names it, PgBouncer's words: a client
// linked to a server is "active" (also while its server drains after it
// left, which PgBouncer does not have: linked says whether the drain still
// holds the server), one queued for a server "waiting", any other "idle".
func (s clientState) show(linked bool) string {
	switch {
	case s == clientWaiting:
		return "waiting"
	case s == clientActive, s == clientDraining && linked:
		return "active"
	}
	return "idle"
}

// clientTransitions are the legal changes of state: clientTransitions[from]
// has bit 1<<to set when from -> to may happen.
var clientTransitions = [...]uint8{
	// login -> closed: the login failed before the client joined a pool
	// (or an admin console session ended: it never leaves login).
	clientLogin: 1<<clientWelcome | 1<<clientClosed,
	// welcome -> closed: the first server login, or the welcome, failed.
	clientWelcome: 1<<clientIdle | 1<<clientClosed,
	// idle -> draining: never; a client leaves an idle link as closed.
	clientIdle:    1<<clientWaiting | 1<<clientParked | 1<<clientClosed,
	clientWaiting: 1<<clientIdle | 1<<clientActive | 1<<clientClosed,
	// active -> idle: the server was released, lost or closed while the
	// client stays; active -> closed only when serve's goroutine ended
	// with a server linked (a panic it recovered).
	// active -> parked: a session-mode client parked with its server
	// while suspended (park.go, parkedSrv).
	clientActive: 1<<clientIdle | 1<<clientDraining | 1<<clientParked | 1<<clientClosed,
	// parked -> idle: the loop of a resumed client starts; parked ->
	// active: the same, with the server it parked with linked again.
	clientParked:   1<<clientIdle | 1<<clientActive | 1<<clientClosed,
	clientDraining: 1 << clientClosed,
	clientClosed:   0,
}

// setStateLocked moves c to state to; the only writer of c.mu.state, of
// c.gone and of the pool's client counts (serverPool.clientsIn). c.mu must
// be held.
//
// The state is a plain field under c.mu rather than an atomic: its
// readers (SHOW CLIENTS, the janitor's park scan, a cancel request) read
// the link with it and hold c.mu anyway, and its changes go together with
// changes of the link (a server linked or unlinked) that must be seen at
// once. The one reader that must not lock, the pump on every server
// message, reads gone, which this method keeps.
//
// The pool's counts are atomics written here, under c.mu, not under the
// pool's mu: a client's lock and its pool's never nest (pooler/doc.go),
// and a transition is made where the pool's lock is not held. Their sum,
// what SHOW POOLS shows, is kept apart (serverPool.clients) and changes
// only when a client joins or leaves the pool, so that a client moving
// between states is never seen twice or not at all.
//
// An impossible transition is a bug in the pooler: it panics, with c.mu
// still held and nothing changed. On the pump's goroutine that ends the
// process, as any panic there does; on serve's, its recover logs the
// panic and the goroutine then blocks on c.mu in clientClosed, leaving the
// client and a goroutine dump that shows where, rather than a client in a
// state nobody knows.
func (c *client) setStateLocked(to clientState) {
	from := c.mu.state
	if int(from) >= len(clientTransitions) || clientTransitions[from]&(1<<to) == 0 {
		panic(fmt.Sprintf("BUG: client %s: %s -> %s is not a legal transition", c, from, to))
	}
	p := c.pool
	if p == nil && to.inPool() {
		panic(fmt.Sprintf("BUG: client %s: %s -> %s with no pool to count it in", c, from, to))
	}
	c.mu.state = to
	if to == clientDraining {
		c.gone.Store(true)
	}
	if p != nil {
		if to.inPool() {
			p.clientsIn[to].Add(1)
		}
		if from.inPool() {
			p.clientsIn[from].Add(-1)
		}
		if d := b2i(to.inPool()) - b2i(from.inPool()); d != 0 {
			p.clients.Add(int32(d))
		}
	}
}

// inPool says whether a client in state s counts in its pool's client
// counts: from the moment it joined the pool (welcome) until it is gone
// (closed). A client still in login has no pool yet, as in PgBouncer,
// whose SHOW POOLS does not count clients logging in.
func (s clientState) inPool() bool {
	return s != clientLogin && s != clientClosed
}

// enterPool moves a client that has just joined c.pool (joinPool) into
// the pool's counts: login -> welcome.
func (c *client) enterPool() {
	c.mu.Lock()
	c.setStateLocked(clientWelcome)
	c.mu.Unlock()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// clientsInPool is the number of the pool's clients, from their joining
// (welcome) until they are gone, parked and draining ones included: what
// SHOW POOLS splits into cl_active and cl_waiting. It needs no lock; the
// count is setStateLocked's.
func (p *serverPool) clientsInPool() int { return int(p.clients.Load()) }
