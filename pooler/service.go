package pooler

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/cancelpeer"
	"github.com/pgturnstile/pgturnstile/internal/changesignal"
	"github.com/pgturnstile/pgturnstile/internal/clientcount"
	"github.com/pgturnstile/pgturnstile/internal/connlimit"
	"github.com/pgturnstile/pgturnstile/internal/dnscache"
	"github.com/pgturnstile/pgturnstile/internal/peeraddr"
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/internal/takeover"
	"github.com/pgturnstile/pgturnstile/internal/workers"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/pause"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Service is the pooler: listeners, clients, pools. "Server" in this package
// always means a Postgres backend connection.
type Service struct {
	log *slog.Logger
	// afterReload is WithReloadHook's function (reloadhook.go); nil: none.
	afterReload func(*config.Settings)

	// gen is the configuration generation in force (apply.go): the
	// configuration, users, TLS and HBA, the admission policy, published
	// together by one store. A reader that needs more than one of them
	// loads gen once and reads them all from that value.
	gen atomic.Pointer[generation]
	// genSeq numbers the generations derive makes (generation.seq).
	genSeq atomic.Uint64
	// applyMu serializes Apply and ApplyShardMap, which both publish a
	// generation made from the one in force; extShard is the document
	// of the map in force from a source (shardsource.go), under applyMu.
	applyMu  sync.Mutex
	extShard *extShardMap
	// shardSource is the shard map source other than shard_file, when
	// there is one (SetShardSource).
	shardSource atomic.Pointer[shardSourceRef]
	// tracked maps a lower-cased parameter name to its canonical spelling,
	// for the parameters that follow a client from server to server.
	tracked map[string]string

	clientCount  atomic.Int64
	shuttingDown atomic.Bool
	// waitForServers is set by SHUTDOWN WAIT_FOR_SERVERS (SIGINT): a
	// client that needs a server from then on is closed with "server
	// shutting down" rather than queued (shutdown.go).
	waitForServers atomic.Bool
	// waitForClients is set by SHUTDOWN WAIT_FOR_CLIENTS (SIGTERM); TCP
	// accept loops still running are counted in tcpAccepting
	// (shutdown.go).
	waitForClients atomic.Bool
	tcpAccepting   atomic.Int32

	mu         sync.Mutex
	pools      map[poolKey]*serverPool
	dbLimits   map[string]*limiter
	userLimits map[string]*limiter
	listeners  []net.Listener
	// inherited are listeners opened by someone else (WithListeners):
	// Listen serves them instead of binding its own.
	inherited []net.Listener

	cancelMu sync.Mutex
	cancels  map[[8]byte]*client
	// peers are the peer pools of forwarded cancel requests (peering.go).
	peers cancelpeer.Pools

	// caps counts clients by database and user (clientcaps.go).
	caps clientcount.Counts

	// stmts is the pooler-wide registry of mapped prepared statements.
	stmts *stmtcache.Registry
	// held bounds the bytes of client messages held whole at once, all
	// clients together (held_message_budget); every client reader
	// reserves in it.
	held *wire.Budget
	// routes counts the sharding router's decisions (shardroute.go).
	routes shard.Counts
	// shardPauses is PAUSE SHARD's paused ranges and their waiters
	// (shardpause.go).
	shardPauses pause.Registry
	// scatters holds a token per scatter running (shardscatter.go).
	scatters chan struct{}

	// Console state (guarded by mu): PAUSE/DISABLE per database, PAUSE
	// of everything, and the runtime overrides of SET USER / SET POOL.
	dbStates      map[string]*dbState
	pausedAll     bool
	userOverrides map[string]*config.User
	poolOverrides map[string]*config.Pool

	// metrics holds the histograms and event counters of /metrics.
	metrics *metrics.Set

	// admInstruments are the admission policy's counters (the policy is
	// the generation's adm).
	admInstruments admissionInstruments

	// parker watches the sockets of parked idle clients (park.go).
	parker parker
	// workers are the goroutines finished clients left, for the next
	// client's (internal/workers).
	workers workers.Pool
	// loopsOff is set when Serve returns: no client rests on the event
	// loop from then on (loop.go), as none parks.
	loopsOff atomic.Bool
	// loopRelays counts the replies the event loop relayed itself.
	loopRelays atomic.Uint64
	// susp is SUSPEND's state (suspend.go).
	susp suspendState
	// moved are the clients an online restart took over, adopted when
	// Serve starts; afterHandOver is WithHandOverHook's function
	// (takeover.go).
	moved         []takeover.Row
	movedServers  []takeover.Row
	afterHandOver func()
	// metricsLn is metrics_addr's listener (ServeMetrics), under mu; an
	// online restart hands it over with the others.
	metricsLn net.Listener

	// version is what SHOW VERSION reports (WithVersion).
	version string
	// cmdVerbose is the command line's -v count (WithVerbose, verbose.go).
	cmdVerbose int

	// socketIDs numbers clients and servers from one sequence, from 1 in
	// the order they are made, as PgBouncer numbers its sockets: SHOW
	// CLIENTS, SERVERS and SOCKETS, C-n and S-n in the log, and
	// KILL_CLIENT's id all use it.
	socketIDs atomic.Uint64

	// consoleStats are the admin console's SHOW STATS counters (the
	// pgbouncer database's row): its queries, each a transaction.
	consoleStats poolStats

	// autoDBs are the database names served from the "*" entry so far
	// (autodb.go), each registered once.
	autoDBs sync.Map

	// changes is notified whenever a server closes (or a login in flight
	// ends without one) and whenever a client goes: PAUSE, WAIT_CLOSE and
	// SHUTDOWN wait on it for their conditions.
	changes changesignal.Signal

	// stopped ends when a shutdown completes (stop): Serve returns, and a
	// graceful shutdown's wait gives up.
	stopped     context.Context
	markStopped context.CancelFunc

	wg sync.WaitGroup

	// clock is the pooler's time (clock.go); dial opens a connection to
	// Postgres, for logins and cancel requests (net.Dialer's DialContext;
	// tests hand back one end of a net.Pipe). Both are set by New and may
	// be replaced by tests before Serve.
	clock clock
	dial  func(ctx context.Context, network, address string) (net.Conn, error)
	// dns caches server host names for dial (internal/dnscache); soa asks a
	// zone's serial for dns_zone_check_period (dnszone.go).
	dns *dnscache.Cache
	soa func(ctx context.Context, zone string) (uint32, error)
	// zoneCheckLast is when the janitor last started a zone check (its
	// own field); zoneChecking is set while one runs.
	zoneCheckLast time.Time
	zoneChecking  atomic.Bool
}

// clientReadBuffer is the read buffer of a client connection: client
// messages are small (larger ones stream through), and idle clients are
// many, so it is kept at PgBouncer's pkt_buf default. The write buffer is
// borrowed from a pool only while there is something to send.
const clientReadBuffer = 4096

// alwaysTracked are the parameters PgBouncer always carries across servers;
// track_extra_parameters adds more.
var alwaysTracked = []string{"client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings", "application_name"}

// Option sets up a Service at New beyond what its configuration says.
type Option func(*Service)

// WithVersion sets what SHOW VERSION reports (default "pgturnstile").
// Monitoring such as pgbouncer_exporter parses a "PgBouncer x.y.z" there
// to decide which columns to expect, so the command reports the PgBouncer
// level it matches.
func WithVersion(v string) Option { return func(s *Service) { s.version = v } }

// New builds a Service for cfg; it reads auth_file.
func New(cfg *config.Config, log *slog.Logger, opts ...Option) (*Service, error) {
	s := &Service{
		log:        log,
		version:    "pgturnstile",
		tracked:    map[string]string{},
		pools:      map[poolKey]*serverPool{},
		dbLimits:   map[string]*limiter{},
		userLimits: map[string]*limiter{},
		cancels:    map[[8]byte]*client{},
		stmts:      stmtcache.NewRegistry(),
		held:       wire.NewBudget(int64(cfg.Settings.HeldMessageBudget)),
		scatters:   make(chan struct{}, maxScatters),

		dbStates:      map[string]*dbState{},
		userOverrides: map[string]*config.User{},
		poolOverrides: map[string]*config.Pool{},
		metrics:       metrics.NewSet(),
		clock:         systemClock{},
	}
	res, err := dnscache.NewResolver(cfg.Settings.ResolvConf)
	if err != nil {
		return nil, err
	}
	s.dial, s.soa = s.dialCached, s.systemSOA
	s.dns = s.newDNSCache(res)
	s.stopped, s.markStopped = context.WithCancel(context.Background())
	for _, o := range opts {
		o(s)
	}
	for _, n := range alwaysTracked {
		s.tracked[strings.ToLower(n)] = n
	}
	for _, n := range cfg.Settings.TrackExtraParameters {
		s.tracked[strings.ToLower(n)] = n
	}
	if err := s.Apply(cfg, true); err != nil {
		return nil, err
	}
	if err := s.checkHandover(); err != nil {
		return nil, err
	}
	return s, nil
}

// newDNSCache is the service's DNS cache of server host names over res:
// the TTLs in force, the service's clock, and a changed or failed answer
// told to the pools (addrGone, dnsFailed).
func (s *Service) newDNSCache(res dnscache.Resolver) *dnscache.Cache {
	d := dnscache.New(res, func() time.Time { return s.clock.Now() }, func() (time.Duration, time.Duration) {
		st := s.settings()
		return st.DNSMaxTTL, st.DNSNXDomainTTL
	})
	d.AddrGone, d.Failed = s.addrGone, s.dnsFailed
	return d
}

func (s *Service) config() *config.Config     { return s.gen.Load().cfg }
func (s *Service) settings() *config.Settings { return &s.gen.Load().cfg.Settings }
func (s *Service) logConnections() bool       { return s.settings().LogConnections }
func (s *Service) logDisconnections() bool    { return s.settings().LogDisconnections }

// trackedName returns the canonical name of a tracked parameter, or "".
func (s *Service) trackedName(name string) string { return s.tracked[strings.ToLower(name)] }

// secret returns a user's auth_file secret.
func (s *Service) secret(user string) (auth.Secret, bool) {
	u, ok := s.gen.Load().users.Lookup(user)
	if !ok || u.Secret == nil {
		return auth.Secret{}, false
	}
	return *u.Secret, true
}

// Serve accepts clients until ctx is done or the listeners close.
func (s *Service) Serve(ctx context.Context) error {
	s.workers.Start()
	defer s.workers.Stop() // after the parker's: resumed clients may use it
	// Parked clients resume; after the janitor's stop, which parks them.
	defer s.parker.stop()
	defer s.stopLoops() // clients on the event loop go back to goroutines
	jctx, stop := context.WithCancel(ctx)
	defer stop()
	s.adoptMoved() // an online restart's clients, before anything else runs
	go s.janitor(jctx)
	errc := make(chan error, len(s.listeners))
	for _, ln := range s.listeners {
		go func(ln net.Listener) { errc <- s.accept(ln) }(ln)
	}
	for {
		select {
		case <-ctx.Done():
			s.Close()
			s.stop() // ends a graceful shutdown's wait
			return nil
		case <-s.stopped.Done():
			s.Close() // the Unix socket a graceful shutdown kept open
			return nil
		case err := <-errc:
			if s.shuttingDown.Load() {
				// Listeners closed by a shutdown: wait for it to finish.
				continue
			}
			s.Close()
			return err
		}
	}
}

// Shutdown ends the service as SHUTDOWN (and the signals) ask: at once, or
// after every server was released (WAIT_FOR_SERVERS, SIGINT: everything is
// paused), or after the last client left (WAIT_FOR_CLIENTS, SIGTERM). New
// logins are refused from the start; Serve returns at the end.
//
// Shutdown returns at once and the wait runs on in a goroutine: the console
// answers SHUTDOWN WAIT_FOR_* before the end, and the command must still
// hear a second signal. ctx bounds the wait: when it ends first, the
// service stops without waiting further. The wait also ends when the
// service stops another way (an immediate SHUTDOWN, Serve's context).
func (s *Service) Shutdown(ctx context.Context, mode admin.ShutdownMode) {
	// A suspended service goes on to its shutdown: its clients are read
	// again and its accept loops see their listeners close.
	s.ResumeSuspended()
	var until func(context.Context) error
	switch mode {
	case admin.ShutdownWaitForServers:
		s.closeTCP()
		s.waitForServers.Store(true)
		s.setPaused("", true)
		until = func(ctx context.Context) error {
			// Clients already waiting are closed by a pass of
			// their own (shutdown.go), as PgBouncer's janitor's.
			go s.closeWaitersUntil(ctx)
			return s.waitPaused(ctx, "")
		}
	case admin.ShutdownWaitForClients:
		s.waitForClients.Store(true)
		s.closeTCP()
		until = func(ctx context.Context) error {
			return s.changes.Wait(ctx, s.clientsGone)
		}
	default:
		s.Close()
		s.stop()
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.stopped, cancel)
	go func() {
		until(ctx) // ctx's end is not an error here: it means stop now
		unhook()
		cancel()
		s.stop()
	}()
}

// stop completes a shutdown: Serve returns.
func (s *Service) stop() { s.markStopped() }

// serveConn starts serving one accepted client connection on a goroutine
// of its own. Tests hand it one end of a net.Pipe, without a listener.
func (s *Service) serveConn(conn net.Conn) {
	s.clientCount.Add(1)
	sio := wire.SocketIO(conn)
	c := &client{
		svc:       s,
		id:        s.socketIDs.Add(1),
		conn:      conn,
		r:         wire.NewPooledReader(sio, clientReadBuffer),
		w:         wire.NewPooledWriter(sio, wire.DefaultBufferSize),
		connected: s.clock.Now().UnixNano(),
	}
	c.r.SetBudget(s.held)
	if uc, ok := conn.(*net.UnixConn); ok {
		c.local, c.unixPeer = true, peeraddr.Unix(uc)
	}
	c.raddr, c.laddr = peeraddr.TCP(conn.RemoteAddr()), peeraddr.TCP(conn.LocalAddr())
	c.mu.link = newLink(c)
	c.setSocket(conn) // for dropClient (client.sock)
	s.wg.Add(1)
	s.workers.Run(c.serve)
}

// clientClosed forgets a client when its goroutine ends.
func (s *Service) clientClosed(c *client) {
	s.clientCount.Add(-1)
	c.releaseCaps()
	c.unpinShardPools()
	s.cancelMu.Lock()
	if s.cancels[c.key] == c {
		delete(s.cancels, c.key)
	}
	s.cancelMu.Unlock()
	c.mu.Lock()
	c.setStateLocked(clientClosed)
	c.clearStmtsLocked()
	c.mu.discarded = nil
	c.forgetUnnamedLocked()
	parkedSrv := c.mu.parkedSrv
	c.mu.parkedSrv = nil
	c.mu.Unlock()
	if parkedSrv != nil {
		// It parked with its server and ended without taking it up
		// again (killed, or its socket could not be resumed): the
		// session's state is unknown to anyone else.
		parkedSrv.pool.discard(parkedSrv, "client close request")
	}
	if c.r != nil {
		// A message it was sending is held no more, nor its read
		// buffer, which the next client's login takes.
		c.r.Release()
		c.r.FreeBuffer()
	}
	s.changes.Notify() // SHUTDOWN WAIT_FOR_CLIENTS counts clients
	s.wg.Done()
}

func (s *Service) registerCancel(c *client) {
	s.cancelMu.Lock()
	s.cancels[c.key] = c
	s.cancelMu.Unlock()
}

// cancel forwards a CancelRequest to the server running that client's
// query. The server is marked under the client's lock (cancelStarted) and
// the request is sent with no lock held: the client goes on meanwhile, and
// a server its client lets go before the cancel is done waits in
// being_canceled instead of going to another client, whose query the
// cancel could hit (release, cancelDone). Unknown keys and idle clients
// are ignored, as Postgres does.
func (s *Service) cancel(key [8]byte) {
	s.cancelMu.Lock()
	c := s.cancels[key]
	s.cancelMu.Unlock()
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.mu.link == nil {
		c.mu.Unlock()
		return // parked: nothing runs
	}
	if c.mu.state == clientWaiting {
		// The wait is at the admission gate, which hears cancelWait, or in
		// the pool's queue, which cancelWaiter ends. The pool's lock is
		// taken after the client's is released: the pool never nests them.
		select {
		case c.mu.link.mu.cancelWait <- struct{}{}:
		default:
		}
		p, w := c.mu.link.mu.pool, c.mu.link.mu.poolWait
		seq := w.seq.Load() // this wait's number: link set it under mu
		c.mu.Unlock()
		p.cancelWaiter(w, seq)
		return
	}
	srv := c.mu.link.mu.srv
	// A replication client's requests are relayed unread: its server
	// gets every cancel (replication.go).
	if srv == nil || c.mu.link.mu.ls.Outstanding() == 0 && c.repl == replNone {
		c.mu.Unlock()
		return
	}
	srv.cancelStarted()
	c.mu.Unlock()
	if err := srv.sendCancel(cancelWait(s.settings())); err != nil {
		if isTimeout(err) {
			// PgBouncer's words for a cancel that got no server in time.
			c.logger().Info("closing because: cancel_wait_timeout")
		} else {
			c.logger().Warn("cancel request failed: " + err.Error())
		}
	}
	srv.pool.cancelDone(srv)
}

// poolFor returns the pool of (db, user), creating it on first use, and
// pins it: the caller calls s.unpin once done with it (poolfree.go). A
// forced user in the [databases] entry replaces the client's user.
func (s *Service) poolFor(db *config.Database, user string) (*serverPool, error) {
	serverUser := user
	cred := auth.ServerCredentials{User: user}
	if db.User != "" {
		serverUser = db.User
		cred = auth.ServerCredentials{User: db.User, Password: db.Password}
	}
	if cred.Password == "" {
		if sec, ok := s.secret(serverUser); ok {
			cred.Secret = &sec
		}
	}
	key := poolKey{db: db.Name, user: serverUser}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pools[key]; ok {
		p.pins++
		p.unusedSince = time.Time{} // a use, even one between two janitor passes
		return p, nil
	}
	p, err := newPool(s, key, db, cred)
	if err != nil {
		return nil, err
	}
	g := s.gen.Load()
	cfg := g.cfg
	v := p.resolveView(g, db)
	p.view.Store(v)
	p.eff = v.eff
	p.dbLimit = s.limiterLocked(s.dbLimits, db.Name, p.eff.MaxDBConnections)
	p.userLimit = s.limiterLocked(s.userLimits, serverUser, p.eff.MaxUserConnections)
	p.dbLimit.Add(p)
	p.userLimit.Add(p)
	p.paused = s.isPausedLocked(db.Name)
	p.closed = poolClosed(cfg, db, serverUser)
	p.metrics = s.newPoolMetrics(db.Name, serverUser)
	s.pools[key] = p
	p.pins++
	return p, nil
}

func (s *Service) limiterLocked(m map[string]*limiter, name string, max int) *limiter {
	l, ok := m[name]
	if !ok {
		l = connlimit.New[*serverPool](max)
		m[name] = l
	}
	l.SetMax(max)
	return l
}

// evictFor closes an idle server of a sibling pool sharing a cap with p, so
// that p's waiters can get a server ("closing because: evicted").
func (s *Service) evictFor(p *serverPool, l *limiter) {
	for _, sib := range l.Members() {
		if sib != p && sib.closeIdleOne() {
			return
		}
	}
}

// wakeLimited lets pools blocked on a shared cap retry after a slot freed.
func (s *Service) wakeLimited(ls ...*limiter) {
	for _, l := range ls {
		for _, p := range l.Members() {
			p.kick()
		}
	}
}

// ShuttingDown reports whether a shutdown has begun (SHUTDOWN, a signal,
// Close): RESUME and SIGUSR2 are refused from then on.
func (s *Service) ShuttingDown() bool { return s.shuttingDown.Load() }
