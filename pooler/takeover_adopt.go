package pooler

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"strconv"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/internal/takeover"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Online restart, the new process's side: what takeover.TakeOver received
// from the old process (takeover.Handover: listeners, and the rows of its
// clients and servers with their descriptors) becomes this service's own.
// The listeners are served as inherited ones. Every client is taken up as
// a parked client of this process, with its session whole: database,
// user, parameters, cancel key, prepared statements and the credentials
// its pool's servers log in with (SCRAM pass-through keys included). Every
// server becomes an idle server of its pool, with its parameters, backend
// key and the statements it has prepared; one that came linked to a
// session-mode client is adopted as that client's (active, not in the
// idle stack), and the session goes on on the same backend.
//
// Nothing is adopted before New has checked every row against this
// configuration (checkHandover): the old process's configuration and this
// one can differ, and a refusal there leaves the old process serving.

// WithHandover has the service serve what an online restart took over:
// its listeners (as WithListeners) and its clients, adopted when Serve
// starts.
func WithHandover(h *takeover.Handover) Option {
	return func(s *Service) {
		s.inherited = h.Listeners
		s.moved = h.Clients
		s.movedServers = h.Servers
	}
}

// adoptMoved takes up the clients an online restart handed over, each as
// a parked client of this process.
func (s *Service) adoptMoved() {
	// Servers first: their statements keep their names on Postgres, and
	// the clients' statements then map to those definitions.
	servers := s.movedServers
	s.movedServers = nil
	ns := 0
	// linked are the servers taken over linked to a client, by their
	// descriptor in the old process: each goes to its client.
	linked := map[int]*server{}
	for _, m := range servers {
		srv, err := s.adoptServer(m)
		if err != nil {
			s.log.Warn("takeover: server of " + m.User + "@" + m.Database + " not taken over: " + err.Error())
			takeover.Close(m.FD)
			continue
		}
		if m.Link != 0 {
			linked[m.OldFD] = srv
		}
		ns++
	}
	if len(servers) > 0 {
		s.log.Info("takeover: took over " + strconv.Itoa(ns) + " servers")
	}
	moved := s.moved
	s.moved = nil
	n := 0
	for _, m := range moved {
		var srv *server
		if m.Link != 0 {
			if srv = linked[m.Link]; srv == nil {
				// Its session lives on that server alone: a new one
				// would lose it without a word.
				s.log.Warn("takeover: client " + m.User + "@" + m.Database + " not taken over: its server was not")
				takeover.Close(m.FD)
				continue
			}
			delete(linked, m.Link)
		}
		if err := s.adopt(m, srv); err != nil {
			s.log.Warn("takeover: client " + m.User + "@" + m.Database + " not taken over: " + err.Error())
			takeover.Close(m.FD)
			if srv != nil {
				srv.pool.discard(srv, "client close request")
			}
			continue
		}
		n++
	}
	for _, srv := range linked {
		// checkLinks lets no linked server without its client through.
		srv.pool.discard(srv, "client close request")
	}
	if len(moved) > 0 {
		s.log.Info("takeover: took over " + strconv.Itoa(n) + " clients")
	}
}

// adopt makes one handed-over client a parked client of this process;
// srv, when not nil, is the server it came linked to (adoptServer), which
// it takes up again when it resumes (client.parkedSrv).
func (s *Service) adopt(m takeover.Row, srv *server) error {
	g := s.gen.Load()
	cfg := g.cfg
	probe := &client{svc: s, dbName: m.Database}
	db, ok := probe.clusterLogin(g) // a sharded cluster's client (shardroute.go)
	if !ok {
		db, ok = cfg.LookupDatabase(m.Database)
	}
	if !ok {
		return pgerror.New(pgerror.NoSuchDatabase, m.Database)
	}
	pool, err := s.poolFor(db, m.User)
	if err != nil {
		return err
	}
	defer s.unpin(pool)
	if err := s.parker.start(); err != nil {
		return err
	}
	if srv != nil && (pool.effective().PoolMode != config.PoolModeSession || srv.pool != pool) {
		return errors.New("linked to a server, but not a session-mode client of its pool here")
	}
	st := m.State
	c := &client{
		svc: s, id: s.socketIDs.Add(1), user: m.User, dbName: m.Database,
		connected: st.Connected.UnixNano(), local: st.Local, unixPeer: st.UnixPeer,
		params: st.Params, conn: parkedConn{}, shard: probe.shard,
	}
	if c.params == nil {
		c.params = map[string]string{}
	}
	if k, err := hex.DecodeString(st.Key); err == nil && len(k) == len(c.key) {
		copy(c.key[:], k)
	}
	c.raddr, _ = netip.ParseAddrPort(st.Raddr)
	c.laddr, _ = netip.ParseAddrPort(st.Laddr)
	if db.User == "" && st.Cred != nil && st.Cred.Secret != nil {
		pool.setCredentials(st.Cred.Secret, st.Cred.ClientKey)
	}
	// Counted in the client caps as at login, but never refused: it is
	// logged in already.
	_ = c.checkClientCaps(cfg, db, true)
	s.clientCount.Add(1)
	s.wg.Add(1)
	stl := &cfg.Settings
	c.pool = pool
	c.mode = pool.effective().PoolMode
	c.tracking = c.mapsStatements(stl)
	c.enterPool()
	c.mu.Lock()
	for _, ms := range st.Stmts {
		if c.mu.stmts == nil {
			c.mu.stmts = map[string]*stmtcache.ClientStmt{}
		}
		c.mu.stmts[ms.Name] = adoptClientStmt(s.stmts, ms)
	}
	c.mu.Unlock()
	s.registerCancel(c)
	c.mu.Lock()
	c.setStateLocked(clientIdle)
	c.setStateLocked(clientParked)
	if srv != nil {
		c.mu.parkedSrv = srv
		srv.linkedTo.Store(c.id)
	}
	c.mu.Unlock()
	if err := s.parker.lot.Park(m.FD, c); err != nil {
		go c.resume(m.FD)
	}
	return nil
}

// adoptServer makes one handed-over server an idle server of its pool
// here, with its parameters, cancel key and prepared statements; one that
// came linked to a client (m.Link) is held for it instead (active), its
// session left as it is.
func (s *Service) adoptServer(m takeover.Row) (*server, error) {
	cfg := s.config()
	db, ok := cfg.LookupDatabase(m.Database)
	if !ok {
		return nil, pgerror.New(pgerror.NoSuchDatabase, m.Database)
	}
	p, err := s.poolFor(db, m.User)
	if err != nil {
		return nil, err
	}
	defer s.unpin(p)
	target := p.target.Load()
	var ep endpoint
	found := false
	for _, e := range target.endpoints {
		if e.address == m.State.Endpoint {
			ep, found = e, true
		}
	}
	if !found {
		return nil, errors.New("its host is no longer the database's")
	}
	key, err := hex.DecodeString(m.State.Key)
	if err != nil {
		return nil, err
	}
	conn, err := takeover.FileConn(m.FD)
	if err != nil {
		return nil, err
	}
	if !p.dbLimit.TryTake() {
		conn.Close()
		return nil, errors.New("max_db_connections reached")
	}
	if !p.userLimit.TryTake() {
		p.dbLimit.Give()
		conn.Close()
		return nil, errors.New("max_user_connections reached")
	}
	p.mu.Lock()
	srv := p.newLoginLocked()
	p.mu.Unlock()
	srv.ep = ep
	srv.serverTLS = s.gen.Load().sec.ServerTLS
	sio := wire.SocketIO(conn)
	srv.conn, srv.r, srv.w = conn, wire.NewReader(sio, wire.DefaultBufferSize), wire.NewWriter(sio, wire.DefaultBufferSize)
	srv.pid, srv.cancelKey, srv.params = m.State.PID, key, m.State.Params
	if srv.params == nil {
		srv.params = map[string]string{}
	}
	srv.unreported, srv.unreportedDirty = m.State.Unreported, m.State.UnreportedDirty
	srv.noteReadOnly()
	srv.noteAppName(srv.params["application_name"])
	srv.created, srv.lastUsed = m.State.Connected, s.clock.Now()
	for _, ms := range m.State.Stmts {
		d := s.stmts.AdoptNamed(ms.Name, ms.Query, ms.Types)
		srv.stmts.Add(s.stmts, d, d.Epoch())
		s.stmts.Release(d)
	}
	if m.Link != 0 {
		// Its client's session goes on here: what it SET is not known,
		// so the parameters are set again when it next goes to another
		// client (syncParams).
		srv.unreportedDirty = true
		p.adoptLinked(srv)
		return srv, nil
	}
	p.loggedIn(srv)
	return srv, nil
}

// adoptLinked counts a server taken over linked to a client among the
// pool's servers, active: it is that client's until it leaves.
func (p *serverPool) adoptLinked(srv *server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.servers == nil {
		p.servers = map[*server]struct{}{}
	}
	p.servers[srv] = struct{}{}
	srv.lifeDraw = lifetimeDraw()
	if p.welcome == nil {
		p.welcome = make(map[string]string, len(srv.params))
		for k, v := range srv.params {
			p.welcome[k] = v
		}
	}
	p.setServerStateLocked(srv, serverActive)
}

// checkHandover refuses a takeover whose clients or servers this
// configuration would not serve (takeover.CheckConfig): New fails, the
// command aborts the takeover and the old process goes on.
func (s *Service) checkHandover() error {
	return takeover.CheckConfig(s.config(), s.moved, s.movedServers, func(user string) bool {
		_, ok := s.secret(user)
		return ok
	})
}

// adoptClientStmt is a moved client name in this process, with one
// reference to its definition. A stale one is held at an epoch older than
// its definition's, which is bumped past it if need be: the other names
// and server copies of the text adopted at that epoch go stale too, which
// costs them a 0A000 or a prepare again, never a wrong shape.
func adoptClientStmt(reg *stmtcache.Registry, ms takeover.Stmt) *stmtcache.ClientStmt {
	d := reg.Acquire(ms.Query, ms.Types, 0)
	cs := stmtcache.NewClientStmt(d)
	if ms.Stale {
		d.BumpEpoch(cs.Epoch)
	}
	return cs
}
