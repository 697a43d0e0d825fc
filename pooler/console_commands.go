package pooler

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/tlsset"
)

// The admin console's commands (consoleView, console.go): PAUSE, RESUME,
// DISABLE, ENABLE, RECONNECT, KILL, KILL_CLIENT, WAIT_CLOSE, RELOAD, SET,
// SET USER and SET POOL, and the per-database state PAUSE and DISABLE
// leave, which logins and pools read (dbState). SUSPEND and SHOW FDS are
// the online restart's (suspend.go, takeover.go), SHUTDOWN the service's
// (Service.Shutdown). The NOTICE and error texts are admin's.

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
		_ = s.changes.Wait(context.Background(), func() bool {
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
	return s.changes.Wait(ctx, func() bool { return s.pausedDone(db) })
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
	s.changes.Notify()
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
	return s.changes.Wait(context.Background(), func() bool {
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
	var tna *tlsset.NotAppliedError
	switch {
	case errors.As(err, &tna):
		// The rest of the file is in force; RELOAD still fails, as
		// PgBouncer's does.
		s.log.Error(tlsset.ReloadNotApplied)
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
	var tna *tlsset.NotAppliedError
	if errors.As(err, &tna) {
		// The value is kept (SHOW CONFIG shows it) and applied once
		// the set is consistent: the SET succeeds with a warning.
		return &admin.Notice{Message: tlsset.SetNotApplied, Detail: tna.Err.Error()}
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
		return admin.NoSuchUserNotice(name)
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
		ns = append(ns, admin.NoSuchUserNotice(user))
	}
	if !dbKnown {
		ns = append(ns, admin.NoSuchDatabaseNotice(user, db, !userKnown && swapped))
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
