package pooler

import (
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/internal/linkstate"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/shard/pause"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The link: what a client needs while it is served beyond its session
// (client.go), and linking a server to it (linkServer: the admission gate,
// the checkout from the pool, the parameters), relaying its first reply
// inline or starting the pump (relayOrPump, pump.go), and ending the link
// on purpose (unlinkAndClose); the drain ends it when the client left
// (abandonLink, drain.go).

// newLink returns an empty link of client c, whose conditions wait on
// c's mu.
func newLink(c *client) *link {
	l := &link{c: c}
	l.mu.writerDone.L = &c.mu.Mutex
	l.mu.releaseDone.L = &c.mu.Mutex
	return l
}

// link is the part of a client that serves its requests: the linked
// server and the protocol position on it, the pump's lifetime, the writer
// hand-over, the wait for a server and the drain after the client left.
// It is reached as c.mu.link (nil while the client is parked), and the
// transaction path is its methods: route and forward (serve.go), linking
// and release (here), relaying (pump.go), draining (drain.go) and the
// prepared-statement mapping (relay_*.go).
//
// Its fields are grouped by who may touch them: mu, what the client's mu
// guards (the link has no lock of its own; serve, the pump and other
// goroutines share these); serve, what only serve's goroutine touches;
// pump, what only the link's relay touches (the pump goroutine, or serve
// relaying inline, which is then the pump).
//
// The buffers for messages between a client and its servers (serve.out,
// serve.splices, pump.out) are here too: they serve only the
// relaying, and go with the link when the client parks, as the reader's
// buffer does.
type link struct {
	c *client // the client served; fixed

	mu struct {
		// srv is the linked server, nil when none.
		srv *server
		// pool is the transaction's pool: the one whose admission gate
		// and queue the client waits at and whose server is linked
		// (pool == srv.pool while srv is set). linkServer sets it at the
		// start of each wait, to route or else the client's own pool
		// (c.pool), and it stays until the next wait. It may differ from
		// c.pool, which keeps what belongs to the client: its counts,
		// caps, settings and SHOW CLIENTS row. What acts on the linked
		// server (release, discard, a drain's cancel) uses the server's
		// own pool, srv.pool, the only one that may take it back; the
		// transaction's statistics (see stats.go) and its admission
		// decisions count in pool. Read by serve, by the pump under mu
		// while the server is linked, and by a cancel request under mu.
		pool *serverPool
		// route is the pool the client's next transaction is to run on,
		// set by linkTo (the router) and taken by the next linkServer;
		// nil: the client's own pool.
		route *serverPool
		// shardTx is the logical shards a cluster client's transaction
		// touches, from the router's choice of route until its server
		// goes back (or its wait ends without one): what PAUSE SHARD
		// waits for (shardpause.go).
		shardTx pause.Span
		// refusal is the router's 0A000 for a Bind it replaced by one the
		// server fails (shardtx.go); the pump gives it to the client in
		// place of the server's error, and forgets it at ReadyForQuery.
		refusal []byte
		// gen is the configuration generation the link runs under, taken
		// once by linkServer (the gate it was admitted through was built
		// from gen's policy and pool settings); set before the pump
		// starts, which reads it without mu.
		gen *generation
		ls  linkstate.State // protocol position on the link
		// ops are the replies the linked server owes, for mapping
		// (prepared.go).
		ops opQueue
		// retry is the request that began the current implicit
		// transaction, kept to be run again once if its statement's plan
		// was stale (relay_retry.go).
		retry retryCapture
		// skipToSync drops client messages up to the next Sync after an
		// error the pooler raised itself, as Postgres does after its own
		// errors.
		skipToSync bool
		// writing is set while serve may still touch the linked server's
		// writer (between recording a message and flushing the batch).
		// The pump never releases the server while it is set: the
		// server's next holder would share the writer. writerDone is
		// signalled when it goes false.
		writing    bool
		writerDone sync.Cond
		// releasing is set while the pump, about to release the server
		// at the end of a transaction, flushes the last replies with mu
		// released; releaseDone is broadcast when it is over. serve waits
		// for it before routing the client's next message, so that the
		// next transaction gets a server from the pool (after a RELOAD,
		// one of the new target) rather than the one being released.
		releasing   bool
		releaseDone sync.Cond
		// pumpDone is closed when the link's pump exits; nil until it
		// starts.
		pumpDone chan struct{}
		// pumpFreed tells serve that the link's pump writes no more to
		// the client, before the pump ends: a drain may go on for
		// drainTimeout, and a client closed for bad input (closeBadInput)
		// hears why at once. nil until the pump starts, as pumpDone; the
		// pump signals it without mu.
		pumpFreed *pumpFreed
		// detach: serve is closing the link on purpose; detachReason is
		// logged when serve closes the linked server.
		detach       bool
		detachReason string
		// parking: serve stops the pump to park the client with its
		// server (park.go, stopSessionPump); the pump's expired read is
		// not a timeout then.
		parking  bool
		resetDue bool // server_reset_query still to run before release
		// drain is the progress of bringing the server back after the
		// client left (drain.go); nil until the client leaves mid-link.
		drain *drainState
		// xactStart is the start of the current transaction (queryStart
		// is the client's): written by serve before the request goes
		// out, read by the pump after its reply.
		xactStart time.Time
		// While serve waits for a server (clientWaiting), at the
		// admission gate or in the pool's queue, a cancel request signals
		// cancelWait, which the gate hears, and ends the pool wait
		// through serverPool.cancelWaiter. waitStart is when the wait
		// began.
		waitStart  time.Time
		cancelWait chan struct{}
		// poolWait is serve's waiter in the pool's queue, made at the
		// first wait and reused; linkServer numbers each wait in it.
		poolWait *poolWaiter
	}

	serve struct {
		// pumpStarted: the link has a pump goroutine (see relayOrPump).
		pumpStarted bool
		// unsynced: an extended-protocol message went to the server
		// since the last Sync. A Query after it is not answered if that
		// message failed (the server skips to the next Sync), so its
		// reply is not awaited inline or on the loop, which would read
		// the client's Sync only after it: a pump relays it.
		unsynced bool
		// onLoop: serve's stages run on the event loop, which must not
		// wait (loop.go); awaited is the server whose reply it waits for.
		onLoop  bool
		awaited *server
		// loopWait: the event loop began this link's wait for a server
		// (beginWait; queued, or granted); whoever runs the message
		// next ends it. granted is a server the loop was given and
		// hands to a goroutine with the message.
		loopWait bool
		granted  *server
		// recvBytes is the batch's byte count, added to the pool's
		// statistics when the batch is flushed.
		recvBytes int64
		out       []byte // rewritten messages on their way to a server
		// splices are the long texts a rewrite in out carries by
		// reference (relay_prepared.go, writeRewrite). The pump uses
		// them too, under mu, in retryLocked, which runs only while
		// serve is not writing.
		splices []splice
	}

	pump struct {
		// replies counts the server's replies that complete an
		// extended-protocol message (linkstate.CompletesExtended)
		// since its last ReadyForQuery, for ServerError and
		// CopyStarted.
		replies int
		// sentBytes is the count of bytes sent to the client since the
		// last ReadyForQuery.
		sentBytes int64
		out       []byte // the pump's own messages to the client
		// swallow counts the ReadyForQuery of held BEGINs (shardroute.go)
		// still to come, whose replies the client had from the pooler.
		swallow int
		// asHeld: the link runs outside the client's held transaction;
		// its ReadyForQuery 'I' goes to the client as 'T'.
		asHeld bool
		// heldBegun counts the held statements answered; heldErr is the
		// error of one that failed, given to the client in place of the
		// next error (pumpSwallow).
		heldBegun int
		heldErr   []byte
	}
}

// linkTo sends the client's next transaction to pool p rather than to its
// own: the router's choice (a shard) for the transaction whose first
// message serve routes next. The client stays counted, capped and shown
// in its own pool (c.pool), whose settings (pool_mode, timeouts) it keeps;
// it waits at p's admission gate and in p's queue, and a server of p runs
// the transaction, goes back to p and counts it in p's statistics. The
// transaction after it runs on the client's own pool again unless linkTo
// is called again. The caller keeps p from being freed (poolfree.go)
// until the transaction has begun. It reports false for a parked client
// (no link), which routes nothing until its loop starts again.
func (c *client) linkTo(p *serverPool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.link == nil {
		return false
	}
	c.mu.link.mu.route = p
	return true
}

// linkSrvLocked links s, which its pool has handed to this client, and
// makes s's pool the transaction's. c.mu must be held.
func (l *link) linkSrvLocked(s *server) {
	l.mu.srv = s
	l.mu.pool = s.pool
}

// unlinkAndClose closes the linked server on purpose and waits for its pump
// to stop, after which serve owns the client socket again.
func (l *link) unlinkAndClose(reason string) {
	c := l.c
	c.mu.Lock()
	s := l.mu.srv
	l.mu.detach = true
	l.mu.detachReason = reason
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.conn.Close()
	l.startPump(s) // the pump reports the closed server and ends the link
	<-l.mu.pumpDone
}

// linkServer checks a server out for this client, brings its tracked parameters
// in line with the client's, and starts the pump.
func (l *link) linkServer(typ byte, n int) (*server, error) {
	c := l.c
	onLoop := l.serve.onLoop
	if onLoop && !l.serve.loopWait && !l.loopMayLink() {
		// What the event loop does not do begins on a goroutine.
		return nil, errLeaveLoop
	}
	if !l.serve.loopWait {
		l.beginWait()
	}
	c.mu.Lock()
	start, p := l.mu.waitStart, l.mu.pool
	c.mu.Unlock()
	// The link runs under one generation, taken once here: its admission
	// policy and its pool's settings are of the same RELOAD.
	gen := c.svc.gen.Load()
	// Under an admission policy the transaction first needs a ticket; the
	// pool's own queue then only covers servers still logging in. (Never
	// on the event loop, nor after a wait it began: loopMayLink.)
	var ticket admission.Ticket
	if gen.adm != nil && !onLoop && !l.serve.loopWait {
		if pg := p.gateFor(gen); pg != nil {
			gen = pg.gen
			t, err := l.admit(pg.gate, pg.policy, typ, n)
			if err != nil {
				l.endWait()
				var se *admission.ShedError
				if errors.As(err, &se) {
					return nil, &shedError{se, pg.policy}
				}
				return nil, err
			}
			ticket = t
		}
	}
	s, err := l.acquireFor(p)
	if err == errLoopWaiting {
		return nil, err
	}
	if err != nil {
		l.endWait()
		if ticket.Valid() {
			ticket.Release()
		}
		return nil, err
	}
	if onLoop && !s.paramsMatch(c.params) {
		// Setting parameters waits for the server: a goroutine does
		// it, with this server.
		l.serve.granted, l.serve.loopWait = s, true
		return nil, errLeaveLoop
	}
	return l.linked(s, p, gen, ticket, start)
}

// beginWait marks the client waiting for a server of its pool, for a new
// wait: the start of linkServer, done once even when the event loop
// begins the wait and a goroutine ends it.
func (l *link) beginWait() {
	c := l.c
	start := c.svc.clock.Now()
	c.mu.Lock()
	l.newWaitLocked(start)
	p := c.pool
	if l.mu.route != nil {
		p, l.mu.route = l.mu.route, nil
	}
	l.mu.pool = p
	c.mu.Unlock()
}

// newWaitLocked marks the client waiting from start, in a new wait: a
// stale cancel for an earlier one is dropped, and the waiter's number
// moves on so that cancels of earlier waits miss this one. c.mu is held.
func (l *link) newWaitLocked(start time.Time) {
	c := l.c
	c.setStateLocked(clientWaiting)
	l.mu.waitStart = start
	if l.mu.cancelWait == nil {
		l.mu.cancelWait = make(chan struct{}, 1)
	}
	select {
	case <-l.mu.cancelWait: // a stale cancel for an earlier wait
	default:
	}
	if l.mu.poolWait == nil {
		l.mu.poolWait = &poolWaiter{notify: make(chan struct{}, 1), onQueued: c.sendQueuedNotice}
	}
	l.mu.poolWait.seq.Add(1)
}

// linked ends a wait that got s: it brings s's parameters in line with
// the client's and links it.
func (l *link) linked(s *server, p *serverPool, gen *generation, ticket admission.Ticket, start time.Time) (*server, error) {
	c := l.c
	if s.pool != p {
		panic("BUG: server " + s.String() + " of another pool handed out by pool " + p.key.db + "/" + p.key.user)
	}
	s.ticket = ticket
	waited := c.svc.clock.Since(start)
	p.stats.serverAssignments.Add(1)
	p.stats.waitTime.Add(int64(waited / time.Microsecond))
	p.metrics.waitDuration.Update(waited.Seconds())
	if err := l.syncParamsUnlessMatch(s); err != nil {
		l.endWait()
		var pe *pgerror.Error
		if !errors.As(err, &pe) {
			// The server failed under the SET: the detail is for the
			// log, the client hears PgBouncer's word for it.
			c.logger().Warn("server failed while setting parameters: " + err.Error())
			p.discard(s, "var change failed")
			return nil, pgerror.New(pgerror.ServerCrashed)
		}
		p.discard(s, "invalid server parameter")
		return nil, err
	}
	c.noisef("linking client to %s", s)
	s.linkedTo.Store(c.id)
	// The wait ends where the link begins, under one lock: a cancel
	// request in between finds no query to cancel either way.
	c.mu.Lock()
	c.setStateLocked(clientActive)
	l.linkSrvLocked(s)
	l.mu.gen = gen
	if !c.tracking {
		// The client's unnamed Parse is not watched: the server's
		// unnamed statement is nobody's known one any more.
		s.unnamedOwner = 0
	}
	l.mu.ls.Reset()
	l.pump.replies = 0
	l.pump.swallow, l.pump.asHeld, l.pump.heldBegun, l.pump.heldErr = 0, false, 0, nil
	l.mu.ops.reset()
	l.mu.retry.reset()
	l.mu.skipToSync = false
	l.mu.pumpDone = nil
	l.mu.pumpFreed = nil
	l.serve.pumpStarted = false
	l.serve.unsynced = false
	l.mu.detach = false
	c.mu.Unlock()
	// No pump yet: serve relays the answer itself when the first batch
	// ends with a Sync or Query (see relayOrPump).
	return s, nil
}

// errLeaveLoop is linkServer's answer on the event loop for a link it
// does not make: the message is run again on a goroutine (loop.go), which
// takes up a wait the loop began (link.serve.loopWait).
var errLeaveLoop = errors.New("the link needs a goroutine: off the event loop")

// errLoopWaiting is linkServer's answer on the event loop when the client
// is queued for a server: the loop runs the message again when the pool
// grants one (poolWaiter.give posts to it).
var errLoopWaiting = errors.New("queued for a server on the event loop")

// loopMayLink reports whether the event loop may link a server for the
// client itself: no admission gate (tickets wait), no SHUTDOWN
// WAIT_FOR_SERVERS, no pool chosen by a route.
func (l *link) loopMayLink() bool {
	c := l.c
	if c.svc.waitForServers.Load() {
		return false
	}
	c.mu.Lock()
	routed := l.mu.route != nil
	c.mu.Unlock()
	if routed {
		return false
	}
	gen := c.svc.gen.Load()
	return gen.adm == nil || c.pool.gateFor(gen) == nil
}

// acquireFor takes a server of p for the client: one granted already, the
// end of a wait the event loop began, or acquire's. On the loop a wait
// that has not ended is errLoopWaiting, and a new one is begun without
// blocking (acquireOrQueue).
func (l *link) acquireFor(p *serverPool) (*server, error) {
	c := l.c
	w := l.mu.poolWait
	for {
		if s := l.serve.granted; s != nil {
			l.serve.granted, l.serve.loopWait = nil, false
			return s, nil
		}
		var s *server
		var err error
		switch {
		case l.serve.loopWait && l.serve.onLoop:
			select {
			case g := <-w.grant:
				s, err = g.s, g.err
			default:
				if w.notify != nil {
					select {
					case <-w.notify:
						w.onQueued()
					default:
					}
				}
				return nil, errLoopWaiting
			}
		case l.serve.loopWait:
			s, err = p.awaitGrant(nil, w)
		case l.serve.onLoop:
			var queued bool
			if s, queued, err = p.acquireOrQueue(w, c.loopConn()); queued {
				l.serve.loopWait = true
				return nil, errLoopWaiting
			}
			return s, err
		default:
			return l.acquire(p)
		}
		l.serve.loopWait = false
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

// endWait marks a wait for a server that ended without a link.
func (l *link) endWait() {
	c := l.c
	c.mu.Lock()
	c.setStateLocked(clientIdle)
	l.forgetShardTxLocked()
	c.mu.Unlock()
}

// relayOrPump runs after serve flushed a complete batch to the linked
// server. A batch that ends with Sync or Query, on a link without a pump,
// is answered inline: serve reads the reply and relays it itself, which
// saves a goroutine, its wake-ups and a hand-over per transaction; when the
// reply ends the link (an autocommit statement in transaction mode, the
// common case) serve goes straight back to reading the client. Anything
// else — a link still held after the reply (a transaction block), COPY IN,
// a batch ending in Flush — gets a pump of its own, as before, so a client
// idle in a transaction still hears at once about its server going away.
// While serve relays inline it reads nothing from the client; what the
// client sends meanwhile waits in the socket, as it would with Postgres.
//
// relayed reports that the reply was relayed inline and the link is over.
func (l *link) relayOrPump(s *server, typ byte) (relayed bool) {
	c := l.c
	if c.r.Pending() || l.serve.pumpStarted {
		return false
	}
	if typ != wire.MsgSync && (typ != wire.MsgQuery || l.serve.unsynced) {
		l.startPump(s)
		return false
	}
	if l.pumpRun(s, true) == pumpLinkOver {
		return true
	}
	l.startPump(s)
	return false
}

// startPump starts the link's pump goroutine unless it runs already.
// Called by serve only.
func (l *link) startPump(s *server) {
	c := l.c
	if l.serve.pumpStarted {
		return
	}
	l.serve.pumpStarted = true
	// Made here, not at link: most links end with the inline relay and
	// never have a pump to wait for.
	done := make(chan struct{})
	freed := &pumpFreed{ch: make(chan struct{})}
	c.mu.Lock()
	l.mu.pumpDone = done
	l.mu.pumpFreed = freed
	c.mu.Unlock()
	go l.pumpGoroutine(s, done, freed)
}

// pumpFreed is closed once by a link's pump when it stops writing to the
// client: when it sees the client gone (it discards the server's output
// from then on) or when it exits, whichever is first. Only that pump
// calls signal; serve waits on ch.
type pumpFreed struct {
	ch       chan struct{}
	signaled bool
}

// signal closes ch unless it was. nil (no pump: serve relays inline)
// does nothing.
func (f *pumpFreed) signal() {
	if f != nil && !f.signaled {
		f.signaled = true
		close(f.ch)
	}
}

// unlinkServerLocked records that the linked server left the link
// (released, closed or lost). An active client becomes idle; a draining or
// closed one stays as it is. c.mu must be held.
func (l *link) unlinkServerLocked() {
	c := l.c
	l.mu.srv = nil
	if c.mu.state == clientActive {
		c.setStateLocked(clientIdle)
	}
	l.forgetShardTxLocked()
}

// acquire is linkServer's checkout from p, the transaction's pool
// (link.mu.pool). During SHUTDOWN WAIT_FOR_SERVERS (shutdown.go) it
// refuses at once, and a wait that the shutdown ended
// (failWaitersForShutdown) is logged as PgBouncer logs the close. The
// error closes the client (FATAL).
func (l *link) acquire(p *serverPool) (*server, error) {
	if l.c.svc.waitForServers.Load() {
		return nil, pgerror.New(pgerror.ServerShuttingDown)
	}
	s, err := p.acquire(nil, l.mu.poolWait)
	var e *pgerror.Error
	if errors.As(err, &e) && e.Code == pgerror.ServerShuttingDown {
		// fail logs the close as PgBouncer does ("closing because:
		// server shutting down").
		return nil, e
	}
	return s, err
}

// sameMap reports whether a and b are the same map (not equal contents).
// Parameter maps are never changed once made, so the same map means the
// same parameters; syncedWith holds the map, so its address is not reused.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// syncParamsUnlessMatch brings s's tracked parameters to the client's
// (syncParams, linkparams.go) unless they are known to match: s last
// matched this very map (clients with the same parameters share one) and
// nothing changed on s since, which is the common case.
func (l *link) syncParamsUnlessMatch(s *server) error {
	if s.paramsMatch(l.c.params) {
		return nil
	}
	return l.syncParams(s)
}

// paramsMatch reports whether s's tracked parameters are params, as far as
// the pooler knows: s last matched that map and has changed nothing since.
func (s *server) paramsMatch(params map[string]string) bool {
	return !s.unreportedDirty && s.syncedGen == s.paramsGen && s.syncedWith != nil && sameMap(s.syncedWith, params)
}
