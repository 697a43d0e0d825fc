package pooler

import (
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
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
	// The server lists and counts, one per state (objects.go); only
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
	// alone (paramSetKey of them), once the pool has its welcome, with
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

// serverTLSChanged follows a change of server_tls_* (SET, RELOAD), after
// which PgBouncer tags every pool dirty: no server keeps a connection made
// with the old settings (a plaintext one once TLS is required). Servers
// logging in are closed by loggedIn, whose check sees their serverTLS
// stale. The cached login error is forgotten: the change may have fixed
// its cause.
func (p *serverPool) serverTLSChanged() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastLoginErr = nil
	p.doomAllLocked()
}

// doomAllLocked marks every logged-in server for closing because the
// configuration it connected with changed: idle ones close at the pool's
// next maintain, busy ones when released, without waiting for a close
// token (mayCloseLocked).
func (p *serverPool) doomAllLocked() {
	for s := range p.servers {
		if !s.closeNeeded {
			s.closeNeeded = true
			s.doomReason = reasonConfigChanged
		}
	}
}

// poolWaiter is a client waiting in the queue for a server. The waiter,
// its channel and its wait count are reused from one wait to the next: a
// client waits for a server on most transactions when clients outnumber
// servers, and that path must not allocate.
type poolWaiter struct {
	// enqueued is when the wait began; prev, next and queued link the
	// waiter into its pool's waitQueue.
	enqueued   time.Time
	prev, next *poolWaiter
	queued     bool
	grant      chan grant // buffered(1): the pool never blocks handing over
	// seq numbers the client's waits, so a cancel request aimed at one
	// wait cannot end a later one that reuses the waiter (cancelWaiter).
	seq atomic.Uint64
	// query_wait_notify (queuenotice.go): the janitor signals notify,
	// once per wait (notified, under the pool's mu), and the waiting
	// goroutine calls onQueued. nil for a waiter that is never told.
	notify   chan struct{}
	notified bool
	onQueued func()
}

type grant struct {
	s   *server
	err error
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
		if p.checkServer(s) {
			return s, nil
		}
		p.discard(s, "server check failed")
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
	if p.lastLoginErr != nil && failsWaiters(p.lastLoginErr) && now.Sub(p.lastLoginErrAt) < st.ServerLoginRetry && p.connecting == 0 {
		// Postgres refused the last login (a wrong password, a missing
		// database): the error is told at once, not after a wait. A
		// server that could not be reached is waited for instead.
		err := p.lastLoginErr
		p.mu.Unlock()
		return nil, loginFailing(err)
	}
	if w == nil {
		w = &poolWaiter{}
	}
	if w.grant == nil {
		w.grant = make(chan grant, 1)
	}
	w.newWaitLocked()
	w.enqueued = now
	p.queue.push(w)
	p.queued.Store(int32(p.queue.len()))
	p.growLocked(now, false)
	p.mu.Unlock()

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

// cancelWaiter ends w's wait number seq with errWaitCanceled, if that wait
// is still queued; a wait that has been granted, or a later one, is left
// alone.
func (p *serverPool) cancelWaiter(w *poolWaiter, seq uint64) {
	p.mu.Lock()
	if w.seq.Load() != seq || !p.queue.remove(w) {
		p.mu.Unlock()
		return
	}
	p.queued.Store(int32(p.queue.len()))
	p.mu.Unlock()
	w.grant <- grant{err: errWaitCanceled}
}

// expireWaitersLocked takes the waiters that have waited query_wait_timeout
// out of the queue and returns them, to be told after mu is released. The
// janitor calls it every 100 ms, which is the timeout's resolution (PgBouncer
// checks it once a second).
func (p *serverPool) expireWaitersLocked(now time.Time, timeout time.Duration) []*poolWaiter {
	if timeout <= 0 {
		return nil
	}
	var expired []*poolWaiter
	for w := p.queue.oldest(); w != nil && now.Sub(w.enqueued) >= timeout; w = p.queue.oldest() {
		p.queue.remove(w)
		expired = append(expired, w)
	}
	if expired != nil {
		p.queued.Store(int32(p.queue.len()))
	}
	return expired
}

// abandon takes w out of the queue when its cancel channel fired. A grant
// that raced the cancel is handed back to the pool at once, so no server is
// lost; an error grant that raced it (the janitor's query_wait_timeout) is
// dropped, since the wait ends with reason anyway.
func (p *serverPool) abandon(w *poolWaiter, reason error) (*server, error) {
	p.mu.Lock()
	removed := p.queue.remove(w)
	p.queued.Store(int32(p.queue.len()))
	p.mu.Unlock()
	if !removed {
		g := <-w.grant
		if g.s != nil {
			p.release(g.s)
		}
	}
	return nil, reason
}

// loginFailing wraps a cached server login error as PgBouncer reports it:
// the server's message or PgBouncer's short reason, never the Go error
// (logged when the login failed).
func loginFailing(err error) error {
	return newError(CodeServerLoginFailing, loginReason(err))
}

// fastFail is PgBouncer's check at a client's login: while the pool's last
// server login failed less than server_login_retry ago and it has no
// logged-in server, a new client is refused at once with the cached error
// rather than queued behind a server that is down. Clients already
// connected, and the ones already waiting, keep waiting instead; so does a
// new client of a pool that has served before (it has its welcome) while
// its server is only unreachable (refused, timed out, starting up or
// shutting down: not failsWaiters): a client reconnecting during a
// Postgres restart waits for it like the connected ones, up to
// query_wait_timeout, instead of failing once per server_login_retry.
func (p *serverPool) fastFail() error {
	now := p.svc.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastLoginErr == nil {
		return nil // the common case, without failsWaiters' allocations
	}
	if p.welcome != nil && !failsWaiters(p.lastLoginErr) {
		return nil
	}
	if p.loginRetryPendingLocked(now) && p.total-p.connecting == 0 {
		return loginFailing(p.lastLoginErr)
	}
	return nil
}

// growLocked starts server logins for waiters that no login in flight will
// serve, within pool_size (plus reserve_pool_size when useReserve), the
// database and user caps, server_max_parallel_connects (a finishing login
// grows again) and the create bucket (the grow timer retries when the next
// token is due).
func (p *serverPool) growLocked(now time.Time, useReserve bool) {
	if p.paused || p.closed || p.freed || p.loginRetryPendingLocked(now) {
		return
	}
	// Clients queued at the admission gate are demand too: the gate's
	// capacity grows with the servers opened for them.
	defer p.syncGateLocked()
	need := p.queue.len() + p.gateWaitingLocked() - p.connecting
	for need > 0 {
		limit := p.eff.PoolSize
		if useReserve {
			limit += p.eff.ReservePoolSize
		}
		if limit > 0 && p.total >= limit {
			return
		}
		if !p.mayConnectLocked(now) || p.probingLocked() {
			return
		}
		// Eviction locks sibling pools, so it runs outside p.mu.
		if !p.dbLimit.tryTake() {
			go p.svc.evictFor(p, p.dbLimit)
			return
		}
		if !p.userLimit.tryTake() {
			p.dbLimit.give()
			go p.svc.evictFor(p, p.userLimit)
			return
		}
		// Past pool_size, the login is the reserve pool's (logged as
		// PgBouncer does, when it starts).
		p.startConnectLocked(now, limit > p.eff.PoolSize && p.total >= p.eff.PoolSize)
		need--
	}
}

// regrowLocked continues growth after a login ended: it freed a slot of
// server_max_parallel_connects that waiters or min_pool_size may need.
func (p *serverPool) regrowLocked(now time.Time) {
	if p.queue.len() > 0 || p.gateWaitingLocked() > 0 {
		p.growLocked(now, p.reserveDueLocked(now))
	}
	p.syncGateLocked()
	p.fillMinLocked(now)
}

// isServerGoingAway: the server refused a login only because it is
// starting up or shutting down ("the database system is starting up" /
// "is shutting down", 57P03), or ended the backend mid-login for a
// shutdown (57P01 admin_shutdown, "terminating connection due to
// administrator command"; 57P02 crash_shutdown). A restart sends all
// three, depending on where each login is when it begins.
func isServerGoingAway(err error) bool {
	var se *auth.ServerError
	if !errors.As(err, &se) {
		return false
	}
	switch se.Fields.Code {
	case "57P01", "57P02", "57P03":
		return true
	}
	return false
}

// failsWaiters reports whether a failed server login fails the clients
// waiting for it, as in PgBouncer: when the server answered and refused or
// broke the login (an ErrorResponse other than "the database system is
// starting up", a password the server's method cannot use, a required TLS
// the server refused, a protocol violation). A server that could not be
// reached (connect refused or timed out, DNS), whose TLS handshake failed
// (PgBouncer loses such a server before its login) or that hung up
// mid-login is retried every server_login_retry while its clients keep
// waiting, up to query_wait_timeout: a restart or failover costs them
// latency, not errors.
func failsWaiters(err error) bool {
	if isServerGoingAway(err) {
		return false
	}
	switch loginReason(err) {
	case "connect failed", "connect timeout", "server DNS lookup failed", "server conn crashed?", "TLS startup failed",
		sessionAttrsReason:
		return false
	}
	return true
}

// loginRetryPendingLocked: the last login failed less than
// server_login_retry ago, so no new one starts yet; the janitor's pass
// grows the pool again once the interval is over.
func (p *serverPool) loginRetryPendingLocked(now time.Time) bool {
	return p.lastLoginErr != nil && now.Sub(p.lastLoginErrAt) < p.svc.settings().ServerLoginRetry
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
		p.svc.changes.notify()
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
		return sessionAttrsReason
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
// server_check_delay (with 0, on every reuse); false means it is dead.
func (p *serverPool) checkServer(s *server) bool {
	st := p.svc.settings()
	idle := p.svc.clock.Since(s.lastUsed)
	// A server that sat idle may have been closed by Postgres (restart,
	// pg_terminate_backend, idle_session_timeout): PgBouncer's event loop
	// sees that at once; we look before handing it out. Servers reused
	// within deadPeekAfter skip the look, so a busy pool pays nothing.
	if idle > deadPeekAfter && s.closedByPeer() {
		return false
	}
	q := st.ServerCheckQuery
	switch q {
	case "":
		// An empty server_check_query turns the check off.
		return true
	case config.EmptyQueryCheck:
		q = ""
	}
	// server_check_delay = 0 checks on every reuse, as PgBouncer: a server
	// fresh from its login (never released) was just proven alive by it.
	if st.ServerCheckDelay == 0 {
		if !s.reused {
			return true
		}
	} else if idle < st.ServerCheckDelay {
		return true
	}
	res, err := s.exec(q, st.ServerConnectTimeout)
	return err == nil && res.err == nil && res.status == wire.TxIdle
}

// deadPeekAfter is how long a server must have been idle before checkout
// looks whether Postgres closed it. It is short: after pg_terminate_backend
// or a restart, a server last used more than this before is not handed to a
// client that would get the backend's FATAL instead of its answer (the
// look is one non-blocking recvfrom; a busy pool reuses servers sooner).
const deadPeekAfter = time.Millisecond

// kick retries growth for waiters, after a cap freed a slot.
func (p *serverPool) kick() {
	p.mu.Lock()
	if p.queue.len() > 0 {
		now := p.svc.clock.Now()
		p.growLocked(now, p.reserveDueLocked(now))
	}
	p.mu.Unlock()
}

func formatAge(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 0, 64) + "s"
}

func (p *serverPool) effective() config.Effective {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eff
}

func (p *serverPool) hasWelcome() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.welcome != nil
}

// welcomeParams returns the parameters of the pool's first server login,
// sent to every client at login. The map is never modified after it is set.
func (p *serverPool) welcomeParams() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.welcome
}

// loginParamSet is an interned parameter map and the ParameterStatus
// messages a client with it is welcomed with (appendParamStatus).
type loginParamSet struct {
	params map[string]string
	status []byte
}

// loginParams are a new client's tracked parameters: the pool's defaults,
// overridden by what the client's startup packet asked for. The map is
// shared with other clients that have the same parameters and must not be
// changed (client.setParamLocked copies it). With it come the welcome's
// ParameterStatus messages for the map where the pool knows its welcome
// (nil before): built once per set of startup parameters, not at each
// login.
func (p *serverPool) loginParams(startup map[string]string) (map[string]string, []byte) {
	// Most logins ask for what an earlier one asked for: their map is
	// found by the startup parameters alone, without building the merge
	// and its key again.
	skey := paramSetKey(startup)
	p.mu.Lock()
	if e, ok := p.byStartup[skey]; ok {
		p.mu.Unlock()
		return e.params, e.status
	}
	welcome := p.welcome
	p.mu.Unlock()
	out := map[string]string{}
	for canon := range p.svc.tracked {
		name := p.svc.tracked[canon]
		if v, ok := welcome[name]; ok {
			out[name] = v
		}
	}
	for k, v := range startup {
		out[k] = v
	}
	key := paramSetKey(out)
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.paramSets[key]
	if !ok {
		m = out
		if p.paramSets == nil {
			p.paramSets = map[string]map[string]string{}
		}
		if len(p.paramSets) < maxParamSets {
			p.paramSets[key] = out
		}
	}
	// The pool's welcome is set once, by its first server, and the
	// tracked names are fixed when the service starts: from then on the
	// same startup parameters always give the same map.
	if welcome == nil {
		return m, nil
	}
	status := appendParamStatus(nil, welcome, m)
	if len(p.byStartup) < maxParamSets {
		if p.byStartup == nil {
			p.byStartup = map[string]loginParamSet{}
		}
		p.byStartup[skey] = loginParamSet{params: m, status: status}
	}
	return m, status
}

// appendParamStatus appends the ParameterStatus messages of a client's
// welcome: the pool's welcome parameters with the client's values where
// it has its own, then the client's other parameters; by name, so that
// every client of a pool sees the same order.
func appendParamStatus(out []byte, welcome, params map[string]string) []byte {
	names := make([]string, 0, len(welcome)+len(params))
	for name := range welcome {
		names = append(names, name)
	}
	for name := range params {
		if _, ok := welcome[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		value, ok := params[name]
		if !ok {
			value = welcome[name]
		}
		out = wire.AppendParameterStatus(out, name, value)
	}
	return out
}

// maxParamSets bounds a pool's interned parameter maps: clients that each
// send a different application_name get maps of their own.
const maxParamSets = 64

// paramSetKey is a canonical string of a parameter map: sorted name=value
// pairs, each part length-prefixed so no two maps share a key.
func paramSetKey(m map[string]string) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	size := 0
	for _, k := range names {
		size += len(k) + len(m[k]) + 2*(2+1) // two lengths of (usually) up to 2 digits, two colons
	}
	var b strings.Builder
	b.Grow(size) // one allocation, not one per growth
	var num [20]byte
	for _, k := range names {
		b.Write(strconv.AppendInt(num[:0], int64(len(k)), 10))
		b.WriteByte(':')
		b.WriteString(k)
		b.Write(strconv.AppendInt(num[:0], int64(len(m[k])), 10))
		b.WriteByte(':')
		b.WriteString(m[k])
	}
	return b.String()
}

// setCredentials updates the secret new servers log in with, and the SCRAM
// ClientKey a client proved against it (kept until a new secret comes).
func (p *serverPool) setCredentials(secret *auth.Secret, clientKey []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cred.Secret == nil || !sameSecret(p.cred.Secret, secret) {
		p.cred.Secret = secret
		p.cred.ClientKey = nil
	}
	if len(clientKey) > 0 {
		p.cred.ClientKey = clientKey
	}
}

func sameSecret(a, b *auth.Secret) bool {
	return a.Kind == b.Kind && a.Plain == b.Plain && a.MD5 == b.MD5 &&
		a.Iterations == b.Iterations && string(a.Salt) == string(b.Salt) &&
		string(a.StoredKey) == string(b.StoredKey) && string(a.ServerKey) == string(b.ServerKey)
}

func (p *serverPool) credentials() auth.ServerCredentials {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cred
}

// startDial registers a login in flight; false if the pool is over its
// limit already (the login is not worth starting).
func (p *serverPool) startDial(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.dials == nil {
		p.dials = map[net.Conn]bool{}
	}
	p.dials[conn] = false
	return true
}

// endDial forgets a login and reports whether shrink aborted it.
func (p *serverPool) endDial(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	aborted := p.dials[conn]
	delete(p.dials, conn)
	return aborted
}
