package pooler

import (
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/listener"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// SUSPEND: bringing every client to rest, for an online restart.
//
// A suspended service accepts nothing (new connections wait in the
// listening sockets' backlogs) and reads nothing from its clients: every
// client that can be handed to another process is parked (park.go) as
// soon as it is between transactions, with nothing buffered, and a parked
// client whose socket becomes readable stays parked (held) instead of
// resuming. What a parked client is, is then complete in its struct and
// its bare descriptor: that is what SHOW FDS describes and an online
// restart hands over (takeover.go). RESUME undoes all of it.
//
// A session-mode client keeps its server between transactions: when that
// server is idle (its last ReadyForQuery said 'I', nothing outstanding,
// no COPY, not TLS), the client parks with it, still linked
// (client.parkedSrv): the link's pump is stopped, and an online restart
// hands the pair over, PgBouncer 1.18's linked client and server.
//
// A client that cannot be handed over is left alone: a TLS client (its
// session keys live in crypto/tls and cannot be moved), a replication
// connection, a console session, and a session-mode client in a
// transaction or whose server is busy or TLS. SUSPEND does not wait for
// them; after a takeover they stay with the old process, which serves
// them until they leave (a session client that finishes its transaction
// while still suspended parks with its server then, and stays too).
//
// PgBouncer's SUSPEND also flushes and stops its servers; pgturnstile's
// servers are idle once their clients are parked, and stay where they
// are.

// suspendState is SUSPEND's state. on is mirrored in parker.suspended,
// which serve's loop reads before each message. mu is a leaf: nothing is
// locked under it (holdServer runs under a pool's mu).
type suspendState struct {
	mu sync.Mutex
	on bool
	// resumed is closed by RESUME: the accept loops wait on it.
	resumed chan struct{}
	// held are the idle servers a SHOW FDS took out of their pools for
	// the hand-over (takeover.go); RESUME gives them back.
	held []*server
}

// holdServer records a server taken for the hand-over.
func (ss *suspendState) holdServer(srv *server) {
	ss.mu.Lock()
	ss.held = append(ss.held, srv)
	ss.mu.Unlock()
}

// takeHeldServers returns the held servers and forgets them.
func (ss *suspendState) takeHeldServers() []*server {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	held := ss.held
	ss.held = nil
	return held
}

// errAlreadySuspended is SUSPEND's answer when the service is suspended
// already (PgBouncer's words).
var errAlreadySuspended = &admin.Error{SQLState: "08P01", Message: "already suspended/paused"}

// suspendPoll is how often Suspend asks the clients still running to park.
const suspendPoll = 5 * time.Millisecond

// Suspend stops accepting and reading, and waits until every client that
// can be handed over is parked, at most suspend_timeout (PgBouncer's
// SUSPEND). It reports how many such clients were still running when it
// gave up (0: all at rest).
func (s *Service) Suspend() (running int, err error) {
	if !netpoll.CanPark {
		return 0, &admin.Error{SQLState: "0A000", Message: "SUSPEND is not supported on this system"}
	}
	if s.ShuttingDown() {
		return 0, &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "pooler is shutting down"}
	}
	ss := &s.susp
	ss.mu.Lock()
	if ss.on {
		ss.mu.Unlock()
		return 0, errAlreadySuspended
	}
	ss.on = true
	ss.resumed = make(chan struct{})
	s.parker.suspended.Store(true)
	// Accept returns at once with a timeout; the loop then waits for
	// RESUME (acceptPaused). Under ss.mu, so that a RESUME's clearing
	// comes after.
	for _, ln := range s.listenersNow() {
		listener.SetDeadline(ln, time.Unix(1, 0))
	}
	ss.mu.Unlock()

	timeout := s.settings().SuspendTimeout
	began := time.Now()
	deadline := began.Add(timeout)
	for {
		running = s.requestRest()
		if running == 0 {
			s.log.Info("SUSPEND: every client at rest after " + time.Since(began).Round(time.Millisecond).String())
			return 0, nil
		}
		if timeout > 0 && !time.Now().Before(deadline) {
			s.log.Warn("SUSPEND: " + strconv.Itoa(running) + " clients did not come to rest within suspend_timeout")
			return running, nil
		}
		if !s.isSuspended() {
			return running, nil // RESUMEd meanwhile
		}
		time.Sleep(suspendPoll)
	}
}

// requestRest asks every client that can be handed over and is not parked
// yet to park, and returns how many there are. An idle client blocked in a
// read is woken by an expired deadline (as the janitor's park request); a
// client in a transaction parks when it is next between transactions
// (client.restNow).
func (s *Service) requestRest() int {
	n := 0
	now := time.Now()
	for _, c := range s.allClients() {
		c.mu.Lock()
		sessionIdle := c.sessionIdleLocked()
		if c.mu.state == clientParked || c.mu.state == clientClosed || !c.movableLocked() && !sessionIdle {
			c.mu.Unlock()
			continue
		}
		n++
		pull := c.mu.state == clientIdle || sessionIdle
		if pull {
			c.parkWanted.Store(true)
			c.conn.SetReadDeadline(now)
		}
		c.mu.Unlock()
		if pull {
			c.pullFromLoop()
		}
	}
	return n
}

// movableLocked says whether c can be handed to another process on its
// own: a logged-in client of a pool, over plain TCP or the Unix socket,
// that holds no server between transactions. A session-mode client that
// holds an idle one moves with it (sessionIdleLocked). c.mu must be held.
func (c *client) movableLocked() bool {
	if c.tls || c.repl != replNone || c.pool == nil || c.dbName == adminDB {
		return false
	}
	switch c.mu.state {
	case clientLogin, clientWelcome, clientDraining, clientClosed:
		return false
	}
	// A session-mode client keeps its server between transactions.
	return !(c.mu.link != nil && c.mu.link.mu.srv != nil && c.mode == config.PoolModeSession)
}

// restNow parks a client of a suspended service before it reads its next
// message, if it is between transactions with nothing buffered; true when
// it parked and serve's goroutine must end.
func (c *client) restNow() bool {
	if !c.svc.parker.suspended.Load() || c.r.Buffered() > 0 {
		return false
	}
	c.mu.Lock()
	movable := c.movableLocked() || c.sessionIdleLocked()
	var pumpDone chan struct{}
	if c.mu.state == clientIdle {
		pumpDone = c.mu.link.mu.pumpDone
	}
	c.mu.Unlock()
	if !movable {
		return false
	}
	if pumpDone != nil {
		// The last link's pump has released its server and is
		// finishing its writes: wait for it here, or the client would
		// block in its read and start its next transaction before it
		// could park.
		<-pumpDone
	}
	return c.tryPark()
}

// isSuspended reports whether SUSPEND is in force.
func (s *Service) isSuspended() bool { return s.parker.suspended.Load() }

// ResumeSuspended ends a SUSPEND: accepting goes on and the clients held
// parked meanwhile go back to the epoll set (those with something to read
// resume at once). false if the service was not suspended.
func (s *Service) ResumeSuspended() bool {
	ss := &s.susp
	ss.mu.Lock()
	if !ss.on {
		ss.mu.Unlock()
		return false
	}
	ss.on = false
	s.parker.suspended.Store(false)
	close(ss.resumed)
	for _, ln := range s.listenersNow() {
		listener.SetDeadline(ln, time.Time{})
	}
	ss.mu.Unlock()
	for _, srv := range ss.takeHeldServers() {
		srv.pool.unholdServer(srv)
	}
	s.parker.rewatchHeld()
	return true
}

// acceptPaused is called by the accept loop when Accept failed with a
// timeout, which only SUSPEND's deadline causes: while suspended it waits
// for RESUME (or the service's end). Either way the deadline is gone when
// it returns and the loop accepts again.
func (s *Service) acceptPaused(ln net.Listener) {
	ss := &s.susp
	ss.mu.Lock()
	on, resumed := ss.on, ss.resumed
	if !on {
		listener.SetDeadline(ln, time.Time{})
	}
	ss.mu.Unlock()
	if !on {
		return
	}
	select {
	case <-resumed:
	case <-s.stopped.Done():
	}
}

// listenersNow is the listeners, under s.mu.
func (s *Service) listenersNow() []net.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.listeners)
}
