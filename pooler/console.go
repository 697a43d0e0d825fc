package pooler

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/pause"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The pooler's side of the admin console: the view admin.Console is, and
// its snapshots for SHOW; the commands are console_commands.go's.
// Everything here reads state under the locks that guard it and returns
// copies.

var _ admin.Console = consoleView{}

// consoleView is the Service as the admin console sees it: the SHOW
// snapshots and the commands. They live on this view rather than on
// *Service so that the Service's own exported API stays the few methods
// a program embedding the pooler needs (New, Listen, Serve, Shutdown...),
// and the console's long list is reached only through Console.
type consoleView struct{ s *Service }

// Console returns the admin console's view of the service.
func (s *Service) Console() admin.Console { return consoleView{s} }

func (v consoleView) Config() *config.Config { return v.s.config() }
func (v consoleView) Version() string        { return v.s.version }

// Shutdown is the console's SHUTDOWN: the reply goes out at once, the
// wait (if any) runs on with no deadline, as PgBouncer's does.
func (v consoleView) Shutdown(mode admin.ShutdownMode) {
	v.s.Shutdown(context.Background(), mode)
}

func (s *Service) allPools() []*serverPool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*serverPool, 0, len(s.pools))
	for _, p := range s.pools {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key.db != out[j].key.db {
			return out[i].key.db < out[j].key.db
		}
		return out[i].key.user < out[j].key.user
	})
	return out
}

func (s *Service) allClients() []*client {
	s.cancelMu.Lock()
	out := make([]*client, 0, len(s.cancels))
	for _, c := range s.cancels {
		out = append(out, c)
	}
	s.cancelMu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (v consoleView) Pools() []admin.Pool {
	s := v.s
	now := s.clock.Now()
	// The console's own pool, as PgBouncer lists it.
	consoles := 0
	for _, c := range s.allClients() {
		if c.dbName == adminDB {
			consoles++
		}
	}
	out := []admin.Pool{{Database: adminDB, User: adminDB, ClActive: consoles, PoolMode: "statement"}}
	for _, p := range s.allPools() {
		p.mu.Lock()
		// The server columns are the pool's per-state counts
		// (pool.go); sv_used and sv_tested have no state here:
		// checkout checks a server itself (checkServer).
		//
		// The client columns are PgBouncer's lists: cl_waiting its
		// waiting_client_list, the clients that found no server and
		// queued for one (the pool's queue, a first client's login
		// included); cl_active every other client that joined the pool,
		// idle, parked and linked alike (PgBouncer's active_client_list,
		// where an idle logged-in client sits too). The clients in the
		// pool are its per-state counts (clientstate.go). Their waiting
		// state is wider than the queue: it also covers the admission
		// gate, taking an idle server and setting its parameters, which
		// PgBouncer does with the client active, so cl_waiting does not
		// count it, or a pool with no queue would show waiting clients
		// under load. Nor do cl_waiting_cancel_req and
		// cl_active_cancel_req count anything: cancel requests are
		// forwarded at once (Service.cancel), not held as clients.
		row := admin.Pool{
			Database:         p.key.db,
			User:             p.key.user,
			ClWaiting:        p.queue.len(),
			SvActive:         p.active,
			SvBeingCanceled:  p.beingCanceled,
			SvIdle:           len(p.idle),
			SvLogin:          p.connecting,
			PoolMode:         p.eff.PoolMode.String(),
			LoadBalanceHosts: p.dbEntry().LoadBalance(),
			PoolSize:         p.eff.PoolSize,
		}
		// The queue can hold waits that are no pool client's (an
		// auth_query's): cl_active never goes below zero for them.
		row.ClActive = max(p.clientsInPool()-row.ClWaiting, 0)
		if w := p.queue.oldest(); w != nil {
			row.MaxWait = now.Sub(w.enqueued)
		}
		p.mu.Unlock()
		out = append(out, row)
	}
	return out
}

func (v consoleView) Clients() []admin.Conn {
	s := v.s
	var out []admin.Conn
	now := s.clock.Now()
	for _, c := range s.allClients() {
		row := admin.Conn{
			Type: "C", User: c.user, Database: c.dbName, Replication: c.repl.show(),
			ConnectTime: c.connectedAt(), Ptr: c.String(), ID: c.id,
		}
		row.Addr, row.Port = c.addrParts(c.raddr)
		row.LocalAddr, row.LocalPort = c.addrParts(c.laddr)
		if c.tls {
			row.TLS = c.tlsVersion()
		}
		c.mu.Lock()
		linked := c.mu.link != nil && c.mu.link.mu.srv != nil
		idle := c.mu.state == clientIdle && !linked
		row.State = c.mu.state.show(linked)
		switch {
		case c.mu.state == clientWaiting:
			row.Wait = now.Sub(c.mu.link.mu.waitStart)
		case linked:
			// active, or draining after the client left
			row.Link = c.mu.link.mu.srv.String()
		}
		row.RequestTime = c.mu.queryStart
		row.ApplicationName = c.params["application_name"]
		row.PreparedStatements = len(c.mu.stmts)
		c.mu.Unlock()
		if idle && c.saidGoodbye() {
			continue
		}
		out = append(out, row)
	}
	return out
}

func (v consoleView) Servers() []admin.Conn {
	s := v.s
	var out []admin.Conn
	for _, p := range s.allPools() {
		p.mu.Lock()
		for srv := range p.servers {
			row := admin.Conn{
				Type: "S", User: p.key.user, Database: p.key.db, Replication: srv.repl.show(),
				State: srv.state.show(), ConnectTime: srv.created, RequestTime: srv.lastUsed,
				CloseNeeded: srv.closeNeeded, Ptr: srv.String(), RemotePID: int(srv.pid), ID: srv.id,
				PreparedStatements: srv.stmts.Shown(),
			}
			if id := srv.linkedTo.Load(); id != 0 && srv.state == serverActive {
				row.Link = "C-" + strconv.FormatUint(id, 10)
			}
			row.Addr, row.Port = admin.AddrColumns(srv.conn.RemoteAddr())
			row.LocalAddr, row.LocalPort = admin.AddrColumns(srv.conn.LocalAddr())
			row.ApplicationName = srv.shownAppName()
			out = append(out, row)
		}
		p.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (v consoleView) Databases() []admin.Database {
	s := v.s
	cfg := s.config()
	st := &cfg.Settings
	names := map[string]*config.Database{}
	for name, d := range cfg.Databases {
		if name != "*" {
			names[name] = d
		}
	}
	for _, p := range s.allPools() {
		if _, ok := names[p.key.db]; !ok {
			names[p.key.db] = p.dbEntry() // auto-created from "*"
		}
	}
	clientsByDB, _ := s.caps.Snapshot()
	out := []admin.Database{{
		Name: "pgbouncer", Port: st.ListenPort, Database: "pgbouncer", ForceUser: "pgbouncer",
		PoolSize: 2, PoolMode: "statement", ReservePoolSize: 0,
		MaxClientConnections: cfg.MaxDBClients(nil), CurrentClientConnections: clientsByDB[adminDB],
	}}
	for name, d := range names {
		eff := cfg.Resolve(d, d.User)
		row := admin.Database{
			Name: name, Host: d.Host, Port: d.Port, Database: d.ServerDBName(), ForceUser: d.User,
			PoolSize: eff.PoolSize, MinPoolSize: eff.MinPoolSize, ReservePoolSize: eff.ReservePoolSize,
			ServerLifetime: eff.ServerLifetime, PoolMode: eff.PoolMode.String(),
			MaxConnections: eff.MaxDBConnections, CurrentClientConnections: clientsByDB[name],
			MaxClientConnections: cfg.MaxDBClients(d),
		}
		if row.Port == 0 {
			row.Port = 5432
		}
		row.LoadBalanceHosts = d.LoadBalance()
		if d.PoolMode == config.PoolModeUnset {
			row.PoolMode = ""
		}
		s.mu.Lock()
		if l := s.dbLimits[name]; l != nil {
			row.CurrentConnections = l.Count()
		}
		if ds := s.dbStates[name]; ds != nil {
			row.Paused, row.Disabled = ds.paused, ds.disabled
		}
		s.mu.Unlock()
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (v consoleView) Users() []admin.User {
	s := v.s
	g := s.gen.Load()
	cfg := g.cfg
	_, clientsByUser := s.caps.Snapshot()
	var out []admin.User
	for _, u := range g.users.Users() {
		row := admin.User{Name: u.Name, PoolSize: -1, ReservePoolSize: -1,
			MaxUserConnections: cfg.Settings.MaxUserConnections, CurrentClientConnections: clientsByUser[u.Name],
			MaxUserClientConnections: cfg.MaxUserClients(u.Name)}
		if cu := cfg.Users[u.Name]; cu != nil {
			row.PoolSize, row.ReservePoolSize = cu.PoolSize, cu.ReservePoolSize
			row.PoolMode = cu.PoolMode.String()
			if cu.MaxUserConnections > 0 {
				row.MaxUserConnections = cu.MaxUserConnections
			}
		}
		s.mu.Lock()
		if l := s.userLimits[u.Name]; l != nil {
			row.CurrentConnections = l.Count()
		}
		s.mu.Unlock()
		out = append(out, row)
	}
	return out
}

// ConsoleQuery counts a console query in the pgbouncer database's stats.
func (v consoleView) ConsoleQuery() {
	v.s.consoleStats.queries.Add(1)
	v.s.consoleStats.xacts.Add(1)
}

func (v consoleView) Stats() []admin.Stats {
	s := v.s
	// The console's own database is listed, as PgBouncer lists its pool.
	byDB := map[string]*admin.Stats{adminDB: {
		Database: adminDB, Total: s.consoleStats.totals(), Average: s.consoleStats.averages(),
	}}
	for _, p := range s.allPools() {
		st := byDB[p.key.db]
		if st == nil {
			st = &admin.Stats{Database: p.key.db}
			byDB[p.key.db] = st
		}
		st.Total = st.Total.Add(p.stats.totals())
		st.Average = st.Average.Add(p.stats.averages())
	}
	out := make([]admin.Stats, 0, len(byDB))
	for _, st := range byDB {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Database < out[j].Database })
	return out
}

func (v consoleView) State() admin.State {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	suspended := s.isSuspended()
	return admin.State{Active: !s.pausedAll && !suspended, Paused: s.pausedAll, Suspended: suspended}
}

func (v consoleView) Lists() admin.Lists {
	s := v.s
	g := s.gen.Load()
	cfg := g.cfg
	pools := s.allPools()
	l := admin.Lists{Databases: len(v.Databases()), Users: len(g.users.Users()), Pools: len(pools)}
	l.UsedClients = len(s.allClients())
	l.LoginClients = int(s.clientCount.Load()) - l.UsedClients
	if l.LoginClients < 0 {
		l.LoginClients = 0
	}
	for _, p := range pools {
		p.mu.Lock()
		l.UsedServers += len(p.servers)
		p.mu.Unlock()
	}
	l.Peers, l.PeerPools = len(cfg.Peers), s.peers.Count()
	l.DNSNames, l.DNSZones, l.DNSQueries = s.dns.Counts()
	return l
}

// PeerPools is SHOW PEER_POOLS (admin.PeerPools).
func (v consoleView) PeerPools() []admin.PeerPool { return v.s.peers.Rows() }

// DNSHosts is SHOW DNS_HOSTS (admin.DNSCache).
func (v consoleView) DNSHosts() []admin.DNSHost { return v.s.dns.HostRows() }

// DNSZones is SHOW DNS_ZONES (admin.DNSCache).
func (v consoleView) DNSZones() []admin.DNSZone { return v.s.dns.ZoneRows() }

// Shards is SHOW SHARDS: every range of every colocation of the map in
// force.
func (v consoleView) Shards() []admin.ShardRow {
	g := v.s.gen.Load()
	if g.shards == nil {
		return nil
	}
	paused := v.s.shardPauses.Snapshot()
	var rows []admin.ShardRow
	for _, cl := range g.shards.Clusters() {
		for _, co := range cl.Colos() {
			pr := paused[pause.Ref{Cluster: cl.Name, Colo: co.Name}]
			for _, r := range co.Ranges() {
				for _, part := range pause.Split(pause.Range{First: r.First, Last: r.Last}, pr) {
					rows = append(rows, admin.ShardRow{Cluster: cl.Name, Colo: co.Name, KeyType: co.KeyType.String(),
						Range: fmt.Sprintf("%d-%d", part.Range.First, part.Range.Last), Database: r.Database, Generation: g.seq,
						Paused: part.Paused, Waiting: part.Waiting, Source: g.shards.File, Revision: g.shardRev})
				}
			}
		}
	}
	return rows
}

// Routes is SHOW ROUTES: the decisions counted so far.
func (v consoleView) Routes() []admin.RouteRow {
	counts := v.s.routes.Snapshot()
	rows := make([]admin.RouteRow, 0, len(counts))
	for _, n := range counts {
		row := admin.RouteRow{Cluster: n.Cluster, Colo: n.Colo, Source: n.Source.String(), Count: n.N}
		if n.Source == shard.SourceRefused {
			row.Reason = n.Reason.Text()
		}
		rows = append(rows, row)
	}
	return rows
}

// saidGoodbye reports an idle client whose socket holds a Terminate or
// its end, that its goroutine has not yet read: the client has left, and
// SHOW CLIENTS does not list it. PgBouncer's one loop handles a closed
// client's events before the next statement on the console, so a
// console session that follows another one's close (psql run twice, a
// test's KILL then SHOW CLIENTS) never sees it; goroutines give no such
// order. A TLS client's bytes are records, not messages, and are not
// looked at; a parked client's close is the parker's to see.
func (c *client) saidGoodbye() bool {
	p := c.sock.Load()
	return !c.tls && p != nil && netpoll.PeekLeft(*p, wire.MsgTerminate)
}
