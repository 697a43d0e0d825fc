package pooler

import (
	"fmt"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The event loop.
//
// A logged-in client between transactions rests on its socket's poller
// (internal/netpoll: one epoll set and one goroutine per core) instead of
// in a goroutine blocked in a read. When its request has arrived whole,
// the poller's goroutine runs it with serve's own stages (readNext,
// route, forward) and a server taken from the pool without blocking: an
// idle one, or the client is queued (state loopWait) and the message runs
// again when the pool's grant posts to the poller (link.acquireFor,
// poolWaiter.give). The server's socket is then watched on the same
// poller, and when the reply is in whole its messages are relayed by the
// pump's own pumpRun, which releases the server at ReadyForQuery (to the
// next waiter, whichever loop or goroutine it is). No goroutine wakes for
// any of it.
//
// What the loop does not do it hands to a goroutine at a message
// boundary, with everything where serve's loop expects it (leave): an
// admission gate, SHUTDOWN WAIT_FOR_SERVERS, a server whose parameters
// must be set first (handed over with it, link.serve.granted), a wait
// pulled off the loop (the goroutine takes it up), a reply larger than the
// server's read buffer or one that starts COPY, a transaction block
// (the pump takes over after its first ReadyForQuery), pipelined
// requests, timeouts to enforce, TLS, session mode, the sharding router,
// and every request from other goroutines (KILL, park, SUSPEND, the
// service stopping), which post to the loop (pull). The goroutine rests
// on the loop again at its next idle point.
//
// One writer: a client on the loop (loopRest, loopWait or loopAwait) is
// touched only by its poller's goroutine; the goroutine that put it there
// let go when it set the handler, and the one it is handed to starts
// after the handler was taken off.

// loopState is where a client is with the loop. Written by whoever owns
// the client: its goroutine while loopOff, the poller's goroutine else.
type loopState uint8

const (
	loopOff   loopState = iota // a goroutine serves the client
	loopRest                   // on the loop, waiting for a request
	loopWait                   // on the loop, queued for a server for the message typ, n
	loopAwait                  // on the loop, waiting for the server's reply
)

// loopOffBatches is how many requests a client that had to leave the
// loop for want of what it offers serves on its goroutine before it
// tries to rest on the loop again: a client whose requests never suit
// the loop does not pay a hand-over for each.
const loopOffBatches = 16

// clientLoop is a client's loop state, made when it first rests on the
// loop with its current socket (a resumed parked client gets a new one).
type clientLoop struct {
	c    *client
	conn *netpoll.Conn // immutable
	h    func(ev uint32)

	// The poller's goroutine's, while on the loop.
	state loopState
	srv   *server // awaited
	// typ and n are the message that waits for a server (loopWait).
	typ byte
	n   int
	// drained: the client's socket had nothing more at the last read.
	drained bool
	// more: the client's socket turned readable while loopAwait.
	more bool
	// offFor counts down loopOffBatches (the client's goroutine's).
	offFor int

	// pull asks the client off the loop (any goroutine; then Post).
	pull atomic.Bool
}

// loopCont is where the goroutine a client is handed to takes up.
type loopCont uint8

const (
	contRead    loopCont = iota // read the next message
	contMessage                 // route the message Next returned (typ, n)
	contAwait                   // read the server's reply (srv)
	contPump                    // leave the reply to a pump, read the client
	contEnd                     // the client ended on the loop
)

// restOnLoop puts c on its poller's loop if nothing keeps it off; true
// when it did, and serve's goroutine must end now without touching c.
func (c *client) restOnLoop(lv *loopVars) bool {
	if !netpoll.CanLoop || !lv.st.EventLoop || lv.loginGrace || lv.timeouts || c.svc.loopsOff.Load() {
		return false
	}
	conn, ok := c.conn.(*netpoll.Conn)
	if !ok {
		return false
	}
	lp := c.loopOf(conn)
	if lp.offFor > 0 {
		lp.offFor--
		return false
	}
	if c.r.Buffered() > 0 || !c.loopable(lv.st) ||
		c.parkWanted.Load() || c.killed.Load() || c.svc.parker.suspended.Load() {
		return false
	}
	c.mu.Lock()
	l := c.mu.link
	idle := c.mu.state == clientIdle && l.mu.srv == nil && !l.mu.skipToSync && !l.serve.pumpStarted
	if done := l.mu.pumpDone; idle && done != nil {
		// The last link's pump may still be writing to the client.
		select {
		case <-done:
		default:
			idle = false
		}
	}
	c.mu.Unlock()
	// The client's writer only after the link's pump is known done: it
	// writes there while it runs.
	if !idle || c.w.Buffered() > 0 {
		return false
	}
	c.r.DropBuffer()
	lp.pull.Store(false)
	lp.state = loopRest
	lp.drained = false
	conn.SetWriteBehind(true)
	conn.SetHandler(&lp.h)
	// Bytes that came before the handler was set woke no one: the loop
	// looks once (and a pull that came meanwhile is seen there).
	conn.Post()
	return true
}

// loopOf is c's loop state for conn, made on first use.
func (c *client) loopOf(conn *netpoll.Conn) *clientLoop {
	if lp := c.lp.Load(); lp != nil && lp.conn == conn {
		return lp
	}
	lp := &clientLoop{c: c, conn: conn}
	lp.h = lp.onClient
	c.lp.Store(lp)
	return lp
}

// loopable says whether c's requests may run on the loop under st:
// event_loop on, transaction or statement mode, a pool's client over plain TCP, no
// router, no timeout that a blocked read or the pump enforces.
func (c *client) loopable(st *config.Settings) bool {
	return st.EventLoop && (c.mode == config.PoolModeTransaction || c.mode == config.PoolModeStatement) &&
		!c.tls && c.repl == replNone && c.pool != nil && c.dbName != adminDB && c.shard == nil &&
		st.QueryTimeout == 0 && st.ClientIdleTimeout == 0 && st.IdleTransactionTimeout == 0 &&
		st.TransactionTimeout == 0 && st.ClientMessageTimeout == 0
}

// pullFromLoop asks c off the loop, if it is on it: its goroutine comes
// back (KILL, a park request, SUSPEND, the service stopping). Any
// goroutine.
func (c *client) pullFromLoop() {
	if lp := c.lp.Load(); lp != nil {
		lp.pull.Store(true)
		lp.conn.Post()
	}
}

// wakeAwaiter tells the loop waiting for s's reply, if any, to look at s
// again: its socket was closed by another goroutine (eviction, a close),
// which the loop's watch cannot see.
func (s *server) wakeAwaiter() {
	if a := s.awaiter.Load(); a != nil {
		a.Post()
	}
}

// onClient is the handler of the client's socket events and posts.
func (lp *clientLoop) onClient(ev uint32) {
	defer lp.recoverPanic()
	switch lp.state {
	case loopRest:
		if lp.pull.Load() {
			lp.leave(contRead, 0, 0)
			return
		}
		if ev != netpoll.EvPost && !netpoll.Readable(ev) {
			return // writable only
		}
		lp.drained = false
		lp.serveRequests()
	case loopWait:
		switch {
		case ev == netpoll.EvPost && lp.pull.Load():
			// The goroutine takes up the wait (link.serve.loopWait).
			lp.leave(contMessage, lp.typ, lp.n)
		case ev == netpoll.EvPost:
			lp.granted()
		case netpoll.Readable(ev):
			lp.more = true
		}
	case loopAwait:
		switch {
		case ev == netpoll.EvPost:
			// A pull waits for the reply; a closed server is looked at.
			lp.serverReady(false)
		case lp.conn.HungUp():
			lp.leave(contPump, 0, 0)
		case netpoll.Readable(ev):
			lp.more = true // read after the reply, as serve would
		}
	}
}

// onLoopEvent is the handler of s's socket events while a loop awaits its
// reply: that client's loop's.
func (s *server) onLoopEvent(ev uint32) {
	if lp := s.loopLP; lp != nil {
		lp.onServer(netpoll.HungUp(ev))
	}
}

// onServer handles the awaited server's socket turning readable; hup:
// the event said Postgres closed it (its FATAL and the end often come in
// one edge).
func (lp *clientLoop) onServer(hup bool) {
	defer lp.recoverPanic()
	if lp.state == loopAwait {
		lp.serverReady(hup)
	}
}

// recoverPanic ends the client as serveLoggedIn does after a panic.
func (lp *clientLoop) recoverPanic() {
	if r := recover(); r != nil {
		c := lp.c
		c.logger().Error(fmt.Sprintf("panic in client: %v", r))
		if lp.state != loopOff {
			lp.off()
			c.mu.link.dropLoopWait()
			c.conn.Close()
			c.svc.clientClosed(c)
		}
	}
}

// serveRequests reads the client's socket and runs each whole request,
// until one awaits its server, the socket is drained, or the client is
// handed off.
func (lp *clientLoop) serveRequests() {
	c := lp.c
	for {
		if !lp.drained {
			drained, err := c.r.FillNow(lp.conn.HungUp())
			if err != nil {
				// The goroutine's read meets the end or the error.
				lp.leave(contRead, 0, 0)
				return
			}
			lp.drained = drained
		}
		switch c.r.Scan(wire.RequestRole, true) {
		case wire.ScanOther:
			lp.leave(contRead, 0, 0)
			return
		case wire.ScanPartial:
			if lp.drained {
				if c.r.Buffered() == 0 {
					c.r.DropBuffer()
					// At rest between requests: the client may move to
					// another poller (netpoll's placement), and its
					// next event then runs there. Nothing touches lp
					// after this, here or in the callers.
					lp.conn.Rebalance()
				}
				return // at rest until the rest arrives
			}
			continue
		}
		if !lp.runRequest() {
			return
		}
	}
}

// runRequest runs one whole request with serve's stages; true when the
// pooler answered it without a server and the loop goes on.
func (lp *clientLoop) runRequest() bool {
	c := lp.c
	st := c.settings()
	if !c.loopable(st) || lp.pull.Load() || c.parkWanted.Load() || c.killed.Load() || c.svc.parker.suspended.Load() {
		lp.leave(contRead, 0, 0)
		return false
	}
	lv := loopVars{st: st}
	return lp.runMessages(&lv)
}

// runMessages runs the buffered messages of a request, one by one; true
// when the pooler answered them all without a server and the loop goes
// on.
func (lp *clientLoop) runMessages(lv *loopVars) bool {
	c := lp.c
	l := c.mu.link
	for {
		l.serve.onLoop = true
		typ, n, step := c.readNext(lv)
		l.serve.onLoop = false
		switch step {
		case stepOn:
			if !lp.runMessage(lv, typ, n) {
				return false
			}
		case stepEnd:
			lp.leave(contEnd, 0, 0)
			return false
		case stepParked:
			lp.off()
			return false
		}
		if c.r.Buffered() == 0 {
			return true
		}
	}
}

// runMessage routes and forwards one message with serve's stages; true
// when the loop goes on with the next.
func (lp *clientLoop) runMessage(lv *loopVars, typ byte, n int) bool {
	l := lp.c.mu.link
	// onLoop is cleared before anything hands the client over: the
	// goroutine that takes it up reads the link's serve fields.
	l.serve.onLoop = true
	step := l.runMessage(lv, typ, n)
	l.serve.onLoop = false
	switch step {
	case stepLeaveLoop:
		lp.leave(contMessage, typ, n)
		return false
	case stepLoopWait:
		lp.state, lp.typ, lp.n, lp.more = loopWait, typ, n, false
		return false
	case stepEnd:
		lp.leave(contEnd, 0, 0)
		return false
	case stepParked:
		lp.off() // parked by SUSPEND on its way (restNow)
		return false
	case stepAwait:
		lp.await(l.serve.awaited)
		return false
	}
	return true
}

// granted runs the message that waits for a server again, once the pool
// has told the loop (a grant, or a notice to send): it links the server
// granted, or waits on.
func (lp *clientLoop) granted() {
	c := lp.c
	lv := loopVars{st: c.settings()}
	lp.state = loopRest
	if !lp.runMessage(&lv, lp.typ, lp.n) {
		return
	}
	if c.r.Buffered() > 0 && !lp.runMessages(&lv) {
		return
	}
	if lp.more {
		lp.more, lp.drained = false, false
	}
	lp.serveRequests()
}

// await watches s for the reply to the request just sent, unless the
// client has hung up: then a pump relays the reply while the client's
// goroutine reads it to its end, as serve does. A client that hangs up
// may have left a request whose reply never ends (an error in an
// extended-protocol batch without a Sync: the server skips the rest,
// a Query too, until one comes); the loop, which reads the client only
// after the reply, would wait on it for good. So would a client still
// there whose Sync comes after such a Query (link.serve.unsynced).
func (lp *clientLoop) await(s *server) {
	rc := s.loopConn()
	lp.srv = s
	if lp.conn.HungUp() || lp.c.mu.link.serve.unsynced {
		lp.leave(contPump, 0, 0)
		return
	}
	if rc == nil {
		lp.leave(contAwait, 0, 0)
		return
	}
	lp.state = loopAwait
	lp.more = false
	s.awaiter.Store(lp.conn)
	if s.loopWatch == nil {
		s.loopH = s.onLoopEvent
		s.loopWatch = netpoll.NewWatch(&s.loopH)
	}
	s.loopLP = lp
	if err := s.loopWatch.Start(lp.conn, rc); err != nil {
		s.loopLP = nil
		lp.leave(contAwait, 0, 0)
	}
	// A reply there already is reported at once.
}

// loopConn is s's socket for a loop's Watch, made once; nil for TLS.
func (s *server) loopConn() syscall.RawConn {
	if s.loopRC == nil {
		switch s.conn.(type) {
		case *net.TCPConn, *net.UnixConn:
		default:
			return nil
		}
		rc, err := s.conn.(syscall.Conn).SyscallConn()
		if err != nil {
			return nil
		}
		s.loopRC = rc
	}
	return s.loopRC
}

// serverReady reads the awaited server and relays its reply once it is
// in whole. hup: the socket's last edge came (the server closed it), so a
// read that got bytes is followed by another, which meets the end.
func (lp *clientLoop) serverReady(hup bool) {
	s := lp.srv
	for {
		drained, err := s.r.FillNow(hup)
		if err != nil {
			lp.leave(contAwait, 0, 0) // the pump's read meets the error
			return
		}
		switch s.r.Scan(wire.ReplyRole, false) {
		case wire.ScanOther:
			lp.leave(contAwait, 0, 0)
			return
		case wire.ScanPartial:
			if drained {
				// The rest is yet to come: its arrival is the watch's
				// next edge (the socket was read until it had no more).
				return
			}
			continue
		}
		lp.relay()
		return
	}
}

// relay relays the reply in s's buffer with the pump's pumpRun, which
// ends the link at ReadyForQuery (the common case) or hands over.
func (lp *clientLoop) relay() {
	c := lp.c
	s := lp.srv
	lp.stopWatch()
	lp.srv = nil
	lp.state = loopRest
	l := c.mu.link
	l.serve.onLoop = true
	stop := l.pumpRun(s, true)
	l.serve.onLoop = false
	if stop != pumpLinkOver {
		// A transaction block (or COPY): its pump relays the rest, and
		// serve's goroutine reads the client meanwhile.
		l.startPump(s)
		lp.leave(contRead, 0, 0)
		return
	}
	c.svc.loopRelays.Add(1)
	if lp.conn.Behind() > 0 || lp.pull.Load() {
		lp.leave(contRead, 0, 0)
		return
	}
	if lp.more {
		lp.more, lp.drained = false, false
	}
	lp.serveRequests()
}

// stopWatch stops watching the awaited server.
func (lp *clientLoop) stopWatch() {
	if s := lp.srv; s != nil {
		s.awaiter.Store(nil)
		s.loopLP = nil
		if s.loopWatch != nil && s.loopWatch.Watching() {
			s.loopWatch.Stop()
		}
	}
}

// off takes the client off the loop: its socket's events go to waits
// again. The poller's goroutine's.
func (lp *clientLoop) off() {
	lp.stopWatch()
	lp.state = loopOff
	lp.pull.Store(false)
	lp.conn.SetWriteBehind(false)
	lp.conn.SetHandler(nil)
}

// leave hands the client to a goroutine, which takes up at cont.
func (lp *clientLoop) leave(cont loopCont, typ byte, n int) {
	s := lp.srv
	pulled := lp.pull.Load()
	lp.off()
	lp.srv = nil
	if !pulled && cont != contEnd {
		lp.offFor = loopOffBatches
	}
	c := lp.c
	c.svc.workers.Run(func() { c.serveAfterLoop(lp.conn, cont, s, typ, n) })
}

// serveAfterLoop is serve's goroutine for a client the loop handed over:
// what the loop kept unsent goes first, then serve goes on at cont.
func (c *client) serveAfterLoop(conn *netpoll.Conn, cont loopCont, s *server, typ byte, n int) {
	parked := false
	defer c.endServe(&parked)
	if err := conn.FlushBehind(); err != nil || cont == contEnd {
		return
	}
	st := c.settings()
	lv := loopVars{st: st, timeouts: st.ClientIdleTimeout > 0 || st.IdleTransactionTimeout > 0 || st.TransactionTimeout > 0}
	l := c.mu.link
	switch cont {
	case contMessage:
		switch step := l.runMessage(&lv, typ, n); step {
		case stepEnd:
			return
		case stepParked:
			parked = true
			return
		}
	case contAwait:
		if l.pumpRun(s, true) != pumpLinkOver {
			l.startPump(s)
		}
	case contPump:
		l.startPump(s)
	}
	parked = c.serveLoop(&lv)
}

// stopLoops ends resting on the event loop when Serve returns: every
// client on it goes back to a goroutine, as parked clients resume.
func (s *Service) stopLoops() {
	s.loopsOff.Store(true)
	for _, c := range s.allClients() {
		c.pullFromLoop()
	}
}

// loopConn is the client's socket on the event loop, for the pool to tell
// the loop of a grant (poolWaiter.loop). The poller's goroutine's.
func (c *client) loopConn() *netpoll.Conn {
	if lp := c.lp.Load(); lp != nil {
		return lp.conn
	}
	return nil
}

// dropLoopWait ends a wait for a server that the event loop began and
// nobody took up, the client having ended first: the waiter leaves the
// queue, and a server granted meanwhile goes back to its pool. Whoever
// owns the client, as it ends.
func (l *link) dropLoopWait() {
	if s := l.serve.granted; s != nil {
		l.serve.granted = nil
		s.pool.release(s)
	}
	if !l.serve.loopWait {
		return
	}
	l.serve.loopWait = false
	c := l.c
	c.mu.Lock()
	p, w := l.mu.pool, l.mu.poolWait
	c.mu.Unlock()
	if p != nil && w != nil {
		p.abandon(w, nil)
	}
}
