package pooler

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/loginfail"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/sessionattrs"
	"github.com/pgturnstile/pgturnstile/wire"
)

// poolKey identifies a pool: the [databases] entry a client named and the
// user the servers log in as.
type poolKey struct{ db, user string }

// serverPool is the set of server connections for one (database, user) and the
// clients waiting for them. All fields below mu are guarded by it; no I/O
// happens while it is held.
type serverPool struct {
	svc *Service
	key poolKey
	// target is where new servers log in (the [databases] entry, its
	// address and startup packet), replaced as a whole when RELOAD changes
	// the entry (retarget); each server keeps the one it dialled.
	target atomic.Pointer[poolTarget]
	log    *slog.Logger
	// view: the pool's settings and limits under the generation in force
	// (poolsettings.go).
	view atomic.Pointer[poolView]

	dbLimit, userLimit *limiter
	stats              poolStats
	metrics            poolMetrics

	// Guarded by Service.mu (poolfree.go): pins counts the poolFor
	// callers not done with the pool yet; unusedSince is when the janitor
	// first found it unused (zero: in use).
	pins        int
	unusedSince time.Time

	mu sync.Mutex
	// cred logs new servers in; auth_query and SCRAM pass-through update
	// it at client logins.
	cred auth.ServerCredentials
	// eff are the limits of the view last installed (poolFor, swap),
	// which growth, shrinking and the gate's capacity keep to.
	eff config.Effective
	// The server lists and counts, one per state (pool.go); only
	// setServerStateLocked writes them.
	idle          []*server // LIFO stack (or FIFO with server_round_robin)
	active        int
	connecting    int // servers logging in (serverLogin)
	beingCanceled int
	total         int // connecting + idle + active + beingCanceled, what pool_size caps

	// clientsIn counts the pool's clients by state, clients their sum
	// (one load for a reader, never caught mid-move); only
	// client.setStateLocked writes them (clientstate.go), under the
	// client's lock, hence atomics: the pool's lock and a client's never
	// nest.
	clientsIn [numClientStates]atomic.Int32
	clients   atomic.Int32

	// queue holds the clients waiting for a server, oldest first.
	queue waitQueue
	// queued is queue.Len() for readers without mu (hasWaiters); set
	// under mu after every change to queue.
	queued atomic.Int32
	// replWaiting counts replication clients waiting for room for their
	// own server (pool_replication.go): a server going idle wakes them,
	// as one they may evict.
	replWaiting atomic.Int32
	welcome     map[string]string
	// paramSets interns clients' parameter maps (loginParams): most
	// clients of a pool log in with the same parameters, and thousands of
	// idle clients then share one read-only map.
	paramSets map[string]map[string]string
	// byStartup finds a client's interned map by its startup parameters
	// alone (pgsetting.Key of them), once the pool has its welcome, with
	// the welcome's ParameterStatus messages for it.
	byStartup map[string]loginParamSet
	// lastLoginErr is the error of the last failed server login, replayed
	// to clients for server_login_retry instead of hammering Postgres.
	lastLoginErr   error
	lastLoginErrAt time.Time
	lastUsed       time.Time
	// hosts chooses the host of each login (hosts.go).
	hosts hostChoice
	// servers are all of the pool's server connections, for SHOW SERVERS.
	servers map[*server]struct{}
	// paused (PAUSE, KILL): no server is handed out or kept; clients wait.
	paused bool
	// dials are the connections of logins in flight; true once shrink
	// aborted one.
	dials map[net.Conn]bool
	// closed: a [pools] line or SET POOL gave this pool pool_size=0 (the
	// fork's way to shut a tenant out): no servers at all, clients wait.
	closed bool
	// freed: the janitor took the pool out of the service (poolfree.go);
	// it opens no server again.
	freed bool
	// gate is the admission gate under an admission_file policy, nil
	// without one (admission.go).
	gate *poolGate

	// Connection safeguards (safeguards.go). creates paces new servers
	// (server_connect_rate/burst), closes the closing of healthy ones
	// (server_close_rate). When growth waits for a token, growTimer (one
	// per pool) fires at growAt, when the next token is due; zero growAt
	// means it is not armed. tokenWaitSince is when growth started to wait
	// for a token (zero: not waiting), for the wait counter.
	creates, closes bucket
	growTimer       timer
	growAt          time.Time
	tokenWaitSince  time.Time
	drainCancelPath chan struct{} // drainCancelSlots: cancels of drains in flight
	// launch starts the login of s, which the caller accounted for (go
	// p.connect(s) when nil); unit tests replace it to watch pacing
	// without a network.
	launch func(s *server)
}

func newPool(svc *Service, key poolKey, db *config.Database, cred auth.ServerCredentials) (*serverPool, error) {
	p := &serverPool{
		svc:      svc,
		key:      key,
		cred:     cred,
		log:      svc.log.With("pool", key.db+"/"+key.user),
		lastUsed: svc.clock.Now(),

		drainCancelPath: make(chan struct{}, drainCancelSlots),
	}
	p.target.Store(newPoolTarget(db, key.user))
	return p, nil
}

// acquire returns an idle or new server for a client, waiting in the queue
// until a server is free, query_wait_timeout passes (the janitor's
// expireWaitersLocked) or cancel is signalled. A nil cancel leaves
// cancelling to cancelWaiter, which keeps the wait free of timers: at 500
// clients on 20 servers every transaction waits, and a select over a timer
// and a cancel channel cost about 2% of the pooler's CPU there. A client's
// waiter also hears its notify channel (query_wait_notify, signalled by the
// janitor), a select over two channels and no timer.
// The returned server is active and owned by the caller until release. w
// is the caller's waiter, reused from one wait to the next (nil: a fresh
// one); it is free again when acquire returns.
func (p *serverPool) acquire(cancel <-chan struct{}, w *poolWaiter) (*server, error) {
	for {
		s, err := p.acquireOnce(cancel, w)
		if err != nil {
			return nil, err
		}
		if reason := p.checkServer(s); reason != "" {
			p.discard(s, reason)
			continue
		}
		return s, nil
	}
}

func (p *serverPool) acquireOnce(cancel <-chan struct{}, w *poolWaiter) (*server, error) {
	st := p.svc.settings()
	now := p.svc.clock.Now()
	p.mu.Lock()
	p.lastUsed = now
	if s := p.nextIdleLocked(); s != nil && !p.paused {
		p.setServerStateLocked(s, serverActive)
		p.mu.Unlock()
		return s, nil
	}
	if p.lastLoginErr != nil && loginfail.FailsWaiters(p.lastLoginErr) && now.Sub(p.lastLoginErrAt) < st.ServerLoginRetry && p.connecting == 0 {
		// Postgres refused the last login (a wrong password, a missing
		// database): the error is told at once, not after a wait. A
		// server that could not be reached is waited for instead.
		err := p.lastLoginErr
		p.mu.Unlock()
		return nil, loginfail.Cached(err)
	}
	if w == nil {
		w = &poolWaiter{}
	}
	if w.grant == nil {
		w.grant = make(chan grant, 1)
	}
	w.loop.Store(nil)
	p.queueLocked(w, now)
	p.mu.Unlock()
	return p.awaitGrant(cancel, w)
}

// queueLocked puts w at the back of the queue for a new wait.
func (p *serverPool) queueLocked(w *poolWaiter, now time.Time) {
	w.newWaitLocked()
	w.enqueued = now
	p.queue.push(w)
	p.queued.Store(int32(p.queue.len()))
	p.growLocked(now, false)
}

// awaitGrant waits for the queued w's grant, telling the client it is
// queued when the janitor says so (query_wait_notify).
func (p *serverPool) awaitGrant(cancel <-chan struct{}, w *poolWaiter) (*server, error) {
	if cancel == nil && w.notify == nil {
		g := <-w.grant
		return g.s, g.err
	}
	for {
		select {
		case g := <-w.grant:
			return g.s, g.err
		case <-cancel:
			return p.abandon(w, errWaitCanceled)
		case <-w.notify: // nil for a waiter that is never told
			w.onQueued()
		}
	}
}

// acquireOrQueue is acquire for the event loop, which cannot wait: an
// idle server now (checked as acquire checks it), or w queued (queued)
// with its grants and notices told to the loop of conn (poolWaiter.give),
// or the error a wait would end with at once.
func (p *serverPool) acquireOrQueue(w *poolWaiter, conn *netpoll.Conn) (s *server, queued bool, err error) {
	st := p.svc.settings()
	for {
		now := p.svc.clock.Now()
		p.mu.Lock()
		p.lastUsed = now
		if s = p.nextIdleOnLocked(conn); s != nil && !p.paused {
			p.setServerStateLocked(s, serverActive)
			p.mu.Unlock()
			if reason := p.checkServer(s); reason != "" {
				p.discard(s, reason)
				continue
			}
			return s, false, nil
		}
		if p.lastLoginErr != nil && loginfail.FailsWaiters(p.lastLoginErr) && now.Sub(p.lastLoginErrAt) < st.ServerLoginRetry && p.connecting == 0 {
			err := p.lastLoginErr
			p.mu.Unlock()
			return nil, false, loginfail.Cached(err)
		}
		if w.grant == nil {
			w.grant = make(chan grant, 1)
		}
		w.loop.Store(conn)
		p.queueLocked(w, now)
		p.mu.Unlock()
		return nil, true, nil
	}
}

// hasWaiters reports whether clients are queued for this pool's servers,
// without taking the pool's lock: a hint, stale as soon as it is read.
func (p *serverPool) hasWaiters() bool { return p.queued.Load() > 0 }

// release returns a clean, idle server (ReadyForQuery 'I', nothing
// outstanding) from a client to the pool. A server that a cancel request
// is still on its way to waits in being_canceled until cancelDone, as
// PgBouncer's release_server does: handed out now, it could have the next
// client's query cancelled.
func (p *serverPool) release(s *server) {
	// Taken now: once handed off, the server carries its next holder's.
	defer releaseTicket(s.takeTicket())
	st := p.settings()
	now := p.svc.clock.Now()
	p.mu.Lock()
	if s.state != serverActive {
		p.mu.Unlock()
		panic("BUG: server " + s.String() + ": release of a server that is not active: " + s.state.String())
	}
	if s.cancels.Load() > 0 {
		s.lastUsed = now
		p.setServerStateLocked(s, serverBeingCanceled)
		p.mu.Unlock()
		return
	}
	reason := p.reuseOrCloseLocked(s, st, now)
	p.mu.Unlock()
	p.reused(s, reason)
}

// reused ends release's rule (reuseOrCloseLocked) once p.mu is released,
// for release and cancelDone alike: the server is closed for reason, or,
// kept, it may now be idle, which a replication client waiting for room
// must hear (it evicts an idle server). Before, cancelDone did not say
// so, and a waiter heard it only because the cancel request's connection
// ended just after (every client's end wakes the service's waiters).
func (p *serverPool) reused(s *server, reason string) {
	if reason != "" {
		p.closeServer(s, reason)
	} else if p.replWaiting.Load() > 0 {
		p.svc.changes.Notify()
	}
}

// reuseOrCloseLocked applies release's rule to a server no client holds
// any more (active, or being_canceled with its cancels done): it is
// closed when closeReasonLocked says so and a close token allows, and the
// reason is returned for closeServer, to be called once p.mu is released;
// otherwise it goes to the next waiter or idle, and "" is returned.
func (p *serverPool) reuseOrCloseLocked(s *server, st *config.Settings, now time.Time) string {
	if reason := p.closeReasonLocked(s, st, now, false, 0); reason != "" && p.mayCloseLocked(reason, now) {
		p.setServerStateLocked(s, serverClosed)
		p.growLocked(now, false)
		return reason
	}
	s.lastUsed = now
	s.reused = true
	p.handOffLocked(s)
	return ""
}

// closeReasonLocked says why a server coming back from a client (idle
// false) or sitting in the pool (idle true) must be closed, or "" to keep
// it. closing is how many of the pool's servers are already being closed,
// so min_pool_size is kept.
func (p *serverPool) closeReasonLocked(s *server, st *config.Settings, now time.Time, idle bool, closing int) string {
	aboveMin := p.total-closing > p.eff.MinPoolSize
	switch {
	case p.paused:
		return "pause"
	case s.wrongRole():
		// Its host changed role (a failover): new servers find the
		// host that suits target_session_attrs.
		return sessionattrs.Reason
	case s.closeNeeded:
		if s.doomReason != "" {
			return s.doomReason
		}
		if idle {
			// PgBouncer's janitor says it so; its release, "close_needed".
			return reasonConfigChanged
		}
		return "close_needed"
	case !idle && p.overLimitLocked():
		// A limit was lowered while this server was busy (or logging in).
		return "limit lowered"
	case idle && st.ServerIdleTimeout > 0 && now.Sub(s.lastUsed) > st.ServerIdleTimeout && aboveMin:
		return "server idle timeout"
	case st.ServerLifetime == 0 && !idle && s.linkedTo.Load() != 0 && aboveMin:
		// server_lifetime = 0: each server serves one client, then
		// closes, as PgBouncer's life_over on release. The check-out
		// for a pool's first welcome links no client and is no use.
		return "server lifetime over"
	case st.ServerLifetime > 0 && now.Sub(s.created) > jitteredLifetime(st.ServerLifetime, st.ServerLifetimeJitter, s.lifeDraw) && aboveMin:
		return "server lifetime over"
	}
	return ""
}

// discard closes a server that its holder found unusable. Such closes are
// emergencies: they take no close token.
func (p *serverPool) discard(s *server, reason string) {
	p.mu.Lock()
	if s.state == serverActive {
		defer releaseTicket(s.takeTicket())
	}
	p.setServerStateLocked(s, serverClosed)
	p.growLocked(p.svc.clock.Now(), false)
	p.mu.Unlock()
	p.closeServer(s, reason)
}

// checkServer runs server_check_query on a server that sat idle longer than
// server_check_delay (with 0, on every reuse); a reason means it is dead,
// in PgBouncer's words: "server conn crashed?" for one Postgres closed
// while it sat idle (as PgBouncer's event loop says when it sees that),
// "server check failed" for one whose check query failed.
func (p *serverPool) checkServer(s *server) (reason string) {
	st := p.svc.settings()
	idle := p.svc.clock.Since(s.lastUsed)
	// A server that sat idle may have been closed by Postgres (restart,
	// pg_terminate_backend, idle_session_timeout): PgBouncer's event loop
	// sees that at once; we look before handing it out. Servers reused
	// within deadPeekAfter skip the look, so a busy pool pays nothing.
	if idle > deadPeekAfter && s.closedByPeer() {
		return "server conn crashed?"
	}
	q := st.ServerCheckQuery
	switch q {
	case "":
		// An empty server_check_query turns the check off.
		return ""
	case config.EmptyQueryCheck:
		q = ""
	}
	// server_check_delay = 0 checks on every reuse, as PgBouncer: a server
	// fresh from its login (never released) was just proven alive by it.
	if st.ServerCheckDelay == 0 {
		if !s.reused {
			return ""
		}
	} else if idle < st.ServerCheckDelay {
		return ""
	}
	if res, err := s.exec(q, st.ServerConnectTimeout); err != nil || res.err != nil || res.status != wire.TxIdle {
		return "server check failed"
	}
	return ""
}

// deadPeekAfter is how long a server must have been idle before checkout
// looks whether Postgres closed it. It is short: after pg_terminate_backend
// or a restart, a server last used more than this before is not handed to a
// client that would get the backend's FATAL instead of its answer (the
// look is one non-blocking recvfrom; a busy pool reuses servers sooner).
const deadPeekAfter = time.Millisecond

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

// idleLookOn is how far down the idle stack nextIdleOnLocked looks.
const idleLookOn = 4

// nextIdleOnLocked is nextIdleLocked for a client on the event loop
// (conn): of the few most recently used idle servers, one whose socket is
// registered on conn's poller already (netpoll.Watch.HomedWith), which a
// wait there arms with no system call, where any other costs two (the
// registration moved); the top when none is.
func (p *serverPool) nextIdleOnLocked(conn *netpoll.Conn) *server {
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	if p.svc.settings().ServerRoundRobin {
		return p.idle[0]
	}
	for i := n - 1; conn != nil && i >= max(0, n-idleLookOn); i-- {
		if w := p.idle[i].loopWatch; w != nil && w.HomedWith(conn) {
			return p.idle[i]
		}
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
		w.give(grant{s: s})
		return
	}
	s.lastUsed = p.svc.clock.Now()
	p.setServerStateLocked(s, serverIdle)
}

// closeServer closes the socket and returns the cap slots; called without
// p.mu after the server left every list.
func (p *serverPool) closeServer(s *server, reason string) {
	s.close()
	s.stmts.Clear(p.svc.stmts)
	p.mu.Lock()
	delete(p.servers, s)
	p.mu.Unlock()
	p.svc.changes.Notify() // for PAUSE and WAIT_CLOSE (console.go)
	p.dbLimit.Give()
	p.userLimit.Give()
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

// takeTicket removes the holder's admission ticket from a server that goes
// back to the pool; releaseTicket then gives it back to its gate, after the
// server is idle (or gone), so the next grant finds it.
func (s *server) takeTicket() admission.Ticket {
	t := s.ticket
	s.ticket = admission.Ticket{}
	return t
}

func releaseTicket(t admission.Ticket) {
	if t.Valid() {
		t.Release()
	}
}
