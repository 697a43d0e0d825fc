package pooler

import (
	"context"
	"errors"
	"net"
	"sort"
	"strconv"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
)

// The pooler's side of the admin console: snapshots for SHOW and the
// commands. Everything here reads state under the locks that guard it and
// returns copies.

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
		// (objects.go); sv_used and sv_tested have no state here:
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
			LoadBalanceHosts: shownLoadBalance(p.dbEntry()),
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

func splitAddr(a net.Addr) (string, int) {
	if a == nil {
		return "", 0
	}
	if _, ok := a.(*net.UnixAddr); ok {
		return "unix", 0
	}
	h, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func (v consoleView) Clients() []admin.Conn {
	s := v.s
	var out []admin.Conn
	now := s.clock.Now()
	for _, c := range s.allClients() {
		row := admin.Conn{
			Type: "C", User: c.user, Database: c.dbName, Replication: c.repl.show(),
			ConnectTime: c.connected, Ptr: c.String(), ID: c.id,
		}
		row.Addr, row.Port = c.addrParts(c.raddr)
		row.LocalAddr, row.LocalPort = c.addrParts(c.laddr)
		if c.tls {
			row.TLS = c.tlsVersion()
		}
		c.mu.Lock()
		linked := c.link != nil && c.link.srv != nil
		row.State = c.state.show(linked)
		switch {
		case c.state == clientWaiting:
			row.Wait = now.Sub(c.link.waitStart)
		case linked:
			// active, or draining after the client left
			row.Link = c.link.srv.String()
		}
		row.RequestTime = c.queryStart
		row.ApplicationName = c.params["application_name"]
		row.PreparedStatements = len(c.stmts)
		c.mu.Unlock()
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
				PreparedStatements: srv.stmts.shown(),
			}
			if id := srv.linkedTo.Load(); id != 0 && srv.state == serverActive {
				row.Link = "C-" + strconv.FormatUint(id, 10)
			}
			row.Addr, row.Port = splitAddr(srv.conn.RemoteAddr())
			row.LocalAddr, row.LocalPort = splitAddr(srv.conn.LocalAddr())
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
	clientsByDB, _ := s.caps.snapshot()
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
		row.LoadBalanceHosts = shownLoadBalance(d)
		if d.PoolMode == config.PoolModeUnset {
			row.PoolMode = ""
		}
		s.mu.Lock()
		if l := s.dbLimits[name]; l != nil {
			l.mu.Lock()
			row.CurrentConnections = l.n
			l.mu.Unlock()
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
	_, clientsByUser := s.caps.snapshot()
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
			l.mu.Lock()
			row.CurrentConnections = l.n
			l.mu.Unlock()
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
		st.Total = addCounters(st.Total, p.stats.totals())
		st.Average = addCounters(st.Average, p.stats.averages())
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

// dbState is the console state of one database: PAUSE/KILL and DISABLE.
type dbState struct{ paused, disabled bool }

func (s *Service) dbStateLocked(db string) *dbState {
	ds := s.dbStates[db]
	if ds == nil {
		ds = &dbState{}
		s.dbStates[db] = ds
	}
	return ds
}

// poolsOf returns the pools of db, or every pool for "".
func (s *Service) poolsOf(db string) []*serverPool {
	var out []*serverPool
	for _, p := range s.allPools() {
		if db == "" || p.key.db == db {
			out = append(out, p)
		}
	}
	return out
}

func (s *Service) checkDB(db string) error {
	if db == "" {
		return nil
	}
	if _, ok := s.config().Databases[db]; ok {
		return nil
	}
	for _, p := range s.allPools() {
		if p.key.db == db {
			return nil
		}
	}
	return &admin.Error{SQLState: "08P01", Message: "no such database: " + db}
}

// Pause stops handing out servers of db (every database for ""), waits
// until the servers in use are released, and closes them. New queries wait.
func (v consoleView) Pause(db string) error {
	s := v.s
	if err := s.checkDB(db); err != nil {
		return err
	}
	s.setPaused(db, true)
	// The console has no deadline for PAUSE: PgBouncer's waits as long as
	// a client holds a server.
	return s.waitPaused(context.Background(), db)
}

// PauseAll is SIGUSR1's PAUSE of every database in two steps: the pause
// is in force when PauseAll returns, so that a SIGUSR2 handled after it
// undoes it (signals act in the order they came); wait then waits, as
// PAUSE does, until the servers in use are released and closed, or until
// a RESUME ends the pause.
func (s *Service) PauseAll() (wait func()) {
	s.setPaused("", true)
	return func() {
		_ = s.changes.wait(context.Background(), func() bool {
			s.mu.Lock()
			paused := s.pausedAll
			s.mu.Unlock()
			return !paused || s.pausedDone("")
		})
	}
}

// waitPaused waits until the paused pools of db (every pool for "") hold
// no server: each check closes the idle ones, and released servers close
// at release (closeReasonLocked's "pause"); every close, and every login
// that ends without a server, notifies s.changes.
func (s *Service) waitPaused(ctx context.Context, db string) error {
	return s.changes.wait(ctx, func() bool { return s.pausedDone(db) })
}

// pausedDone is waitPaused's condition: it closes the idle servers of
// db's paused pools and reports whether none is left.
func (s *Service) pausedDone(db string) bool {
	busy := 0
	for _, p := range s.poolsOf(db) {
		p.maintain(s.clock.Now()) // closes the idle ones now
		p.mu.Lock()
		busy += p.total
		p.mu.Unlock()
	}
	return busy == 0
}

func (s *Service) setPaused(db string, paused bool) {
	s.mu.Lock()
	if db == "" {
		s.pausedAll = paused
		for name, ds := range s.dbStates {
			_ = name
			ds.paused = paused
		}
	} else {
		s.dbStateLocked(db).paused = paused
	}
	s.mu.Unlock()
	for _, p := range s.poolsOf(db) {
		p.mu.Lock()
		p.paused = paused
		p.mu.Unlock()
		if !paused {
			p.kick()
		}
	}
	// A PauseAll's wait ends at a RESUME.
	s.changes.notify()
}

// isPaused says whether new pools of db start paused.
func (s *Service) isPausedLocked(db string) bool {
	if s.pausedAll {
		return true
	}
	ds := s.dbStates[db]
	return ds != nil && ds.paused
}

func (v consoleView) Resume(db string) error {
	s := v.s
	if db == "" && s.ResumeSuspended() {
		return nil // RESUME after SUSPEND
	}
	if db == "" && s.ShuttingDown() {
		// SHUTDOWN WAIT_FOR_SERVERS pauses everything to drain: a
		// RESUME would undo that. PgBouncer refuses it in these words.
		return &admin.Error{SQLState: admin.CodeProtocolViolation, Message: "pooler is shutting down"}
	}
	if err := s.checkDB(db); err != nil {
		return err
	}
	s.setPaused(db, false)
	// Warm the pools back to min_pool_size now, through their create
	// buckets, rather than at the next janitor pass.
	for _, p := range s.poolsOf(db) {
		p.warm()
	}
	return nil
}

func (v consoleView) Disable(db string) error {
	s := v.s
	if db == "" {
		return &admin.Error{SQLState: "08P01", Message: "DISABLE needs a database name"}
	}
	if err := s.checkDB(db); err != nil {
		return err
	}
	s.mu.Lock()
	s.dbStateLocked(db).disabled = true
	s.mu.Unlock()
	return nil
}

func (v consoleView) Enable(db string) error {
	s := v.s
	if err := s.checkDB(db); err != nil {
		return err
	}
	s.mu.Lock()
	s.dbStateLocked(db).disabled = false
	s.mu.Unlock()
	return nil
}

// isDisabled reports whether new logins to db are refused.
func (s *Service) isDisabled(db string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ds := s.dbStates[db]
	return ds != nil && ds.disabled
}

// Reconnect marks every server of db to be closed: idle ones now, active
// ones when their client releases them.
func (v consoleView) Reconnect(db string) error {
	s := v.s
	if err := s.checkDB(db); err != nil {
		return err
	}
	for _, p := range s.poolsOf(db) {
		p.mu.Lock()
		for srv := range p.servers {
			srv.closeNeeded = true
		}
		p.mu.Unlock()
		// Closes the idle servers as close tokens allow (the others at
		// release or later passes) and warms the pool back to
		// min_pool_size through its create bucket.
		p.maintain(s.clock.Now())
	}
	return nil
}

// Kill drops every client and server of db (all databases for "") and
// leaves it paused until RESUME.
func (v consoleView) Kill(db string) error {
	s := v.s
	if err := s.checkDB(db); err != nil {
		return err
	}
	s.setPaused(db, true)
	for _, c := range s.allClients() {
		// KILL without a database kills the clients of real databases
		// only, as PgBouncer's: the console sessions (the one that
		// asked among them) stay.
		if (db == "" && c.dbName != adminDB) || c.dbName == db {
			s.dropClient(c)
		}
	}
	for _, p := range s.poolsOf(db) {
		p.mu.Lock()
		conns := make([]net.Conn, 0, len(p.servers))
		for srv := range p.servers {
			conns = append(conns, srv.conn)
		}
		p.mu.Unlock()
		// Closed after p.mu is released: closing a TLS connection writes
		// its close_notify. Each holder then sees its server fail.
		for _, conn := range conns {
			conn.Close()
		}
		p.maintain(s.clock.Now())
	}
	return nil
}

func (v consoleView) KillClient(id uint64) error {
	s := v.s
	for _, c := range s.allClients() {
		if c.id == id {
			s.dropClient(c)
			return nil
		}
	}
	return &admin.Error{SQLState: "08P01", Message: "client not found: " + strconv.FormatUint(id, 10)}
}

// WaitClose waits until no server of db (every database for "") is marked
// close_needed: RECONNECT's servers are closed as their clients release
// them and close tokens allow.
func (v consoleView) WaitClose(db string) error {
	s := v.s
	if err := s.checkDB(db); err != nil {
		return err
	}
	// A server marked close_needed leaves p.servers only in closeServer,
	// which notifies s.changes.
	return s.changes.wait(context.Background(), func() bool {
		pending := 0
		for _, p := range s.poolsOf(db) {
			p.mu.Lock()
			for srv := range p.servers {
				if srv.closeNeeded {
					pending++
				}
			}
			p.mu.Unlock()
		}
		return pending == 0
	})
}

// Reload re-reads the config file and auth files; a bad file is rejected
// as a whole and nothing changes.
func (v consoleView) Reload() error {
	s := v.s
	path := s.config().Path
	if path == "" {
		return errors.New("no config file to reload (embedded default config)")
	}
	cfg, err := config.Load(path)
	if err == nil {
		err = s.Apply(cfg, true)
	}
	var tna *tlsNotAppliedError
	switch {
	case errors.As(err, &tna):
		// The rest of the file is in force; RELOAD still fails, as
		// PgBouncer's does.
		s.log.Error(msgTLSReloadNotApplied)
	case err != nil:
		s.log.Error("RELOAD failed: " + err.Error())
	}
	s.reloaded()
	return err
}

// Set changes one [pgbouncer] setting, as from the file.
func (v consoleView) Set(key, value string) error {
	s := v.s
	cfg := s.config().Clone()
	if err := cfg.Set(key, value); err != nil {
		return &admin.Error{SQLState: "08P01", Message: err.Error()}
	}
	err := s.Apply(cfg, false)
	var tna *tlsNotAppliedError
	if errors.As(err, &tna) {
		// The value is kept (SHOW CONFIG shows it) and applied once
		// the set is consistent: the SET succeeds with a warning.
		return &admin.Notice{Message: msgTLSSetNotApplied, Detail: tna.err.Error()}
	}
	return err
}

// SetUser and SetPool are Cloudflare's runtime overrides: the settings
// given replace the user's (or pool's) entry whole, keys left out fall back
// to the defaults, and they last until a RELOAD reads a file with a line for
// the same user or pool.
func (v consoleView) SetUser(name, settings string) error {
	s := v.s
	us, err := admin.ParseUserSettings(settings)
	if err != nil {
		return &admin.Error{SQLState: "08P01", Message: err.Error()}
	}
	// The timeouts SET USER cannot set stay unset (config.NewUser).
	u := config.NewUser(name)
	u.PoolMode, u.PoolSize, u.ReservePoolSize = us.PoolMode, us.PoolSize, us.ReservePoolSize
	u.MaxUserConnections, u.MaxUserClientConnections = us.MaxUserConnections, us.MaxUserClientConnections
	known := s.knownUser(name) // before NoteConfigured lists it
	s.mu.Lock()
	s.userOverrides[name] = u
	s.mu.Unlock()
	s.gen.Load().users.NoteConfigured(name)
	if err := s.Apply(s.config(), false); err != nil {
		return err
	}
	if !known {
		return unknownUserNotice(name)
	}
	return nil
}

func (v consoleView) SetPool(user, db, settings string) error {
	s := v.s
	ps, err := admin.ParsePoolSettings(settings)
	if err != nil {
		return &admin.Error{SQLState: "08P01", Message: err.Error()}
	}
	// Known before the override is applied, which may start its pool.
	userKnown, dbKnown := s.knownUser(user), s.checkDB(db) == nil
	swapped := s.knownUser(db) && s.checkDB(user) == nil
	s.mu.Lock()
	s.poolOverrides[config.PoolKey(user, db)] = &config.Pool{User: user, Database: db, PoolSize: ps.PoolSize}
	s.mu.Unlock()
	if err := s.Apply(s.config(), false); err != nil {
		return err
	}
	// The override is kept by name whatever these say: a user or a
	// database may come later (auth_query, "*").
	var ns []error
	if !userKnown {
		ns = append(ns, unknownUserNotice(user))
	}
	if !dbKnown {
		n := &admin.Notice{Message: "no such database: " + db,
			Detail: "The setting is kept and applies to pool " + user + "." + db + " once database \"" + db + "\" is used."}
		ns = append(ns, n)
	}
	if !userKnown && !dbKnown && swapped {
		// SHOW POOLS prints the database first; SET POOL takes the
		// user first.
		ns[len(ns)-1].(*admin.Notice).Hint = "SET POOL takes user.database: did you mean SET POOL " + db + "." + user + "?"
	}
	return errors.Join(ns...)
}

// knownUser says whether name is a user the service knows now: in the
// user store (auth_file, [users], SET USER, logged in through auth_query
// or LDAP/PAM), the forced user of a database, or the user of a pool.
func (s *Service) knownUser(name string) bool {
	g := s.gen.Load()
	if _, ok := g.users.Lookup(name); ok {
		return true
	}
	cfg := g.cfg
	if _, ok := cfg.Users[name]; ok {
		return true
	}
	for _, d := range cfg.Databases {
		if d.User == name {
			return true
		}
	}
	for _, p := range s.allPools() {
		if p.key.user == name {
			return true
		}
	}
	return false
}

// unknownUserNotice is SET USER's and SET POOL's NOTICE for a user not
// known now: the override is still kept, by name.
func unknownUserNotice(name string) *admin.Notice {
	return &admin.Notice{Message: "no such user: " + name,
		Detail: "The setting is kept and applies once user \"" + name + "\" logs in."}
}

// dropClient disconnects a client for KILL/KILL_CLIENT and forgets it at
// once, so the next SHOW CLIENTS no longer lists it (its goroutine notices
// the closed socket a moment later). It takes no c.mu: whatever holds it
// may be waiting on this client, and closing the socket ends that wait.
func (s *Service) dropClient(c *client) {
	c.killed.Store(true) // before the socket is read: see client.killed
	s.unpark(c)          // its goroutine comes back to see killed
	c.closeSocket()
	s.cancelMu.Lock()
	if s.cancels[c.key] == c {
		delete(s.cancels, c.key)
	}
	s.cancelMu.Unlock()
}

// DNSHosts is SHOW DNS_HOSTS (admin.DNSCache).
func (v consoleView) DNSHosts() []admin.DNSHost { return v.s.dns.HostRows() }

// DNSZones is SHOW DNS_ZONES (admin.DNSCache).
func (v consoleView) DNSZones() []admin.DNSZone { return v.s.dns.ZoneRows() }
