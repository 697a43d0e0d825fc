package pooler

import (
	"crypto/tls"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/parking"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Parking idle clients.
//
// A logged-in client normally costs a goroutine blocked in a read (its
// stack) and a read buffer, even when it sends nothing for hours, and
// applications keep thousands of such connections open. A client that has
// been idle for parkAfter (no server, nothing buffered, plain TCP or Unix
// socket, no client_idle_timeout to enforce) is parked instead: its read
// buffer goes back to the pool it was lent from (wire.NewPooledReader, as
// its write buffer does after each flush), its socket is watched by one
// epoll set for the whole service, and its goroutine ends. When the
// socket becomes readable (a request, or the client hanging up), a new
// goroutine picks the client up where it was. Busy clients never park, so
// the hot path pays nothing: the janitor asks an idle client to park by
// expiring its read deadline. A client that has just logged in gets that
// deadline at once, set parkAfterLogin ahead (client.startLoop).
//
// The epoll set of parked descriptors, the descriptor duplication and the
// stand-in for a parked client's conn are internal/parking's. Where it has
// none (netpoll.CanPark is false: systems other than Linux) parking is off: the janitor asks no client to park and a client that
// has just logged in gets no early deadline, so every client keeps its
// goroutine as any Go server's would.

// parkAfter is how long a client must have been idle before it is parked.
const parkAfter = time.Second

// parkAfterLogin is how long a client that has just logged in may stay
// silent before it parks, without waiting for parkAfter and the janitor.
// Applications and connection pools open connections in bursts and leave
// most of them idle; a burst of thousands would otherwise hold a goroutine,
// its stack and buffers per connection for one to two seconds, and the
// runtime keeps the metadata of that peak heap. A client that queries right
// after its login (within a round trip, the usual case) never parks.
const parkAfterLogin = 100 * time.Millisecond

// parkScanEvery is how often the janitor looks for clients to park.
const parkScanEvery = time.Second

// returnAfterWorkers is how many idle client goroutines ending at once
// (workers.Pool.Shrink: stacks of 8–32 KiB) return memory to the OS by
// themselves.
const returnAfterWorkers = 8

// parker is the service's epoll set of parked clients. It lives from the
// first park to the end of Serve (stop).
type parker struct {
	// suspended is SUSPEND's flag (suspend.go): a parked client whose
	// socket becomes readable stays parked, held out of the epoll set.
	suspended atomic.Bool
	lot       parking.Lot[*client]
}

// start creates the epoll set and its goroutine on first use. A client
// whose socket woke is resumed on a goroutine of its own.
func (pk *parker) start() error {
	return pk.lot.Start(func(fd int, c *client) { go c.resume(fd) }, pk.suspended.Load)
}

// stop ends the epoll set when the service stops (Serve returns), and
// resumes the clients parked then: each goes on with a goroutine of its
// own, as a client that never parked does, and ends when it hangs up. A
// client that parks meanwhile finds the set closed and resumes at once
// (tryPark); none parks after stop.
func (pk *parker) stop() { pk.lot.Stop() }

// rewatchHeld puts the clients held while suspended back in the epoll set
// (RESUME): those with something to read wake at once.
func (pk *parker) rewatchHeld() { pk.lot.Rewatch() }

// parkedNow returns the parked clients (with their descriptors).
func (pk *parker) parkedNow() map[int32]*client { return pk.lot.Parked() }

// release takes c out of the parker for good, without resuming it: its
// descriptor is the caller's now. false if c is not parked.
func (pk *parker) release(c *client) (fd int, ok bool) { return pk.lot.Take(c) }

// requestParks asks every client idle for parkAfter to park; called by the
// janitor. It also returns memory to the OS when many clients parked since
// the last time (true when it did).
func (s *Service) requestParks(now time.Time) bool {
	if !netpoll.CanPark {
		return false // parking is off on this system
	}
	if st := s.settings(); st.ClientIdleTimeout > 0 {
		return false // the idle timeout is enforced by the blocked read
	}
	for _, c := range s.allClients() {
		// A request whose deadline serve cleared before reading is
		// simply made again.
		if c.tls {
			continue
		}
		c.mu.Lock()
		idle := c.mu.state == clientIdle && !c.mu.link.mu.skipToSync &&
			now.Sub(c.connectedAt()) >= parkAfter && (c.mu.queryStart.IsZero() || now.Sub(c.mu.queryStart) >= parkAfter) &&
			c.settings().ClientIdleTimeout == 0 // a [users] client_idle_timeout: as above
		if idle {
			c.parkWanted.Store(true)
			// Wakes serve's blocked read; it parks if nothing arrived.
			c.conn.SetReadDeadline(now)
		}
		c.mu.Unlock()
		if idle {
			c.pullFromLoop() // on the loop: its goroutine comes back to park
		}
	}
	return s.parker.lot.AfterScan()
}

// tryPark parks c after its read timed out on a park request; true when
// serve's goroutine must end now without touching c again.
//
// The parked client keeps its socket as a bare descriptor (a duplicate of
// net's): the net.Conn, its addresses and the runtime's poll descriptor are
// freed, and resume makes a new net.Conn from the descriptor. Anything that
// may run meanwhile treats c.conn as closed: dropClient sets c.killed and
// then closes c.sock, and resume checks c.killed after setting c.sock.
//
// A session-mode client linked to an idle server parks only while
// suspended, and with its server (stopSessionPump): see client.parkedSrv.
func (c *client) tryPark() bool {
	c.parkWanted.Store(false)
	c.conn.SetReadDeadline(time.Time{})
	srv, ok := c.stopSessionPump()
	if !ok {
		return false
	}
	// keep gives up parking: a server stopped for it is watched again.
	keep := func() bool {
		if srv != nil {
			c.mu.link.serve.pumpStarted = false
			c.mu.link.startPump(srv)
		}
		return false
	}
	c.mu.Lock()
	idle := (c.mu.state == clientIdle || srv != nil && c.mu.state == clientActive && c.mu.link.mu.srv == srv) &&
		!c.mu.link.mu.skipToSync && !c.killed.Load()
	pumpDone := c.mu.link.mu.pumpDone
	c.mu.Unlock()
	if pumpDone != nil {
		// The last link's pump may still be finishing its writes.
		select {
		case <-pumpDone:
		default:
			return keep()
		}
	}
	if !idle || c.w.Buffered() > 0 || !c.r.DropBuffer() {
		return keep()
	}
	if _, ok := c.conn.(syscall.Conn); !ok {
		return keep()
	}
	pk := &c.svc.parker
	if pk.start() != nil {
		return keep()
	}
	fd, ok := parking.Detach(c.conn)
	if !ok {
		return keep()
	}
	// From here on the client lives on fd alone. Parked before its conn
	// closes: the janitor's park scan no longer touches it.
	c.mu.Lock()
	c.setStateLocked(clientParked)
	c.mu.parkedSrv = srv
	c.mu.Unlock()
	c.setSocket(nil)
	c.conn.Close() // the socket stays open through fd
	// The reader, writer and scratch buffer go too (the first two are
	// empty); resume makes new ones.
	c.r, c.w, c.scratch = nil, nil, nil
	c.mu.Lock()
	c.conn = parkedConn{} // drops net's conn, addresses and poll descriptor
	c.mu.link = nil       // and the link state and its buffers
	c.mu.Unlock()

	// Held, not watched, while suspended (until rewatchHeld).
	if err := pk.lot.Park(fd, c); err != nil {
		go c.resume(fd) // cannot watch it: carry on as if it woke at once
		return true
	}
	// A KILL_CLIENT that came while the client was between its conn and
	// the epoll set found nothing to unpark: end it now.
	if c.killed.Load() {
		c.svc.unpark(c)
	}
	return true
}

// resume brings a parked client back on a new goroutine: a net.Conn again
// from its descriptor, then the relay loop.
func (c *client) resume(fd int) {
	conn, err := parking.Attach(fd, c.settings().EventLoop)
	if err != nil {
		c.logger().Warn("resuming a parked client: " + err.Error())
		c.svc.clientClosed(c)
		return
	}
	sio := wire.SocketIO(conn)
	c.r = wire.NewPooledReader(sio, clientReadBuffer)
	c.r.SetMaxMessageSize(clientMaxMessage(c.svc.settings()))
	c.r.SetBudget(c.svc.held)
	c.w = wire.NewPooledWriter(sio, wire.DefaultBufferSize)
	c.mu.Lock()
	c.conn = conn
	// Still parked until its loop starts (startLoop), which links the
	// server it parked with, if any, again.
	c.mu.link = newLink(c)
	c.mu.Unlock()
	c.setSocket(conn)
	if c.killed.Load() { // after setSocket: see client.killed
		conn.Close()
		c.svc.clientClosed(c)
		return
	}
	c.serveLoggedIn(false)
}

// stopSessionPump readies a session-mode client linked to an idle server
// for parking with it, while suspended: the link's pump, blocked reading
// the server, is stopped (an expired read deadline, link.parking), and
// the server returned, still linked, with nothing of it buffered. For a
// client with no server linked it returns nil, true (the plain park);
// false when the client cannot park now.
func (c *client) stopSessionPump() (*server, bool) {
	c.mu.Lock()
	if c.mu.state != clientActive {
		c.mu.Unlock()
		return nil, true
	}
	s := c.mu.link.mu.srv
	if !c.svc.parker.suspended.Load() || !c.sessionIdleLocked() {
		c.mu.Unlock()
		return nil, false
	}
	started, done := c.mu.link.serve.pumpStarted, c.mu.link.mu.pumpDone
	if started {
		c.mu.link.mu.parking = true
		s.conn.SetReadDeadline(time.Now())
	}
	c.mu.Unlock()
	if !started {
		return s, true
	}
	<-done
	c.mu.Lock()
	c.mu.link.mu.parking = false
	still := c.mu.link.mu.srv == s && c.sessionIdleLocked()
	if still {
		// Under mu, as abandonLink's: the server is this link's.
		s.conn.SetReadDeadline(time.Time{})
	}
	c.mu.Unlock()
	if !still {
		return nil, false // the pump ended the link: the next read sees why
	}
	if s.r.Buffered() > 0 || c.w.Buffered() > 0 {
		// The server said something as the pump stopped: it goes on.
		c.mu.link.serve.pumpStarted = false
		c.mu.link.startPump(s)
		return nil, false
	}
	return s, true
}

// sessionIdleLocked says whether c is a session-mode client, of the kind
// that can be handed over, whose linked server is idle: its last
// ReadyForQuery said 'I', nothing is outstanding or half-sent, no COPY,
// no cancel in flight, and the server is neither TLS (its session cannot
// leave crypto/tls) nor a replication connection. Such a client parks
// with its server while suspended. c.mu must be held.
func (c *client) sessionIdleLocked() bool {
	if c.mode != config.PoolModeSession || c.mu.state != clientActive || c.mu.link == nil ||
		c.tls || c.repl != replNone || c.pool == nil || c.dbName == adminDB {
		return false
	}
	l := c.mu.link
	s := l.mu.srv
	if s == nil || l.mu.writing || l.mu.releasing || l.mu.detach || l.mu.drain != nil || l.mu.skipToSync ||
		!l.mu.ls.Clean() {
		return false
	}
	if s.repl != replNone || s.cancels.Load() > 0 {
		return false
	}
	_, isTLS := s.conn.(*tls.Conn)
	return !isTLS
}

// unpark resumes c if it is parked, before its socket is closed from
// outside (KILL_CLIENT): its goroutine then sees c.killed or the closed
// socket and ends the client as usual. Takes the parker's lock only,
// never c.mu.
func (s *Service) unpark(c *client) {
	if fd, ok := s.parker.release(c); ok {
		go c.resume(fd)
	}
}

// ParkedClients is how many clients are parked now.
func (s *Service) ParkedClients() int { return s.parker.lot.Len() }

// parkedConn stands in for a parked client's net.Conn (parking.ClosedConn).
type parkedConn = parking.ClosedConn
