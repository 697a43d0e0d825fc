package pooler

import (
	"errors"
	"fmt"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/tlsset"
	"github.com/pgturnstile/pgturnstile/shard"
)

// Applying a configuration (start, RELOAD, SIGHUP, SET, SET USER, SET
// POOL) in two steps: derive reads every file the configuration names and
// computes the state to install, changing nothing; swap installs it. A bad
// file fails derive, so the running state is never half replaced.

// securityState is derived from the auth and TLS settings at (re)load.
type securityState struct {
	tlsset.State           // the TLS in force, the settings last given
	hba          *auth.HBA // auth_type=hba
}

// generation is one configuration in force: everything derive computes
// that clients and pools read. It is immutable once published; swap
// publishes a new one with one store (Service.gen), so a reader that loads
// it once sees the configuration, users, security and admission policy of
// one RELOAD, never some of the next. The pools' settings and limits follow
// from it (poolView). The shard map is here too, checked against this
// generation's [databases].
type generation struct {
	cfg   *config.Config // with the runtime overrides laid over
	users *auth.Store
	sec   *securityState
	// adm is the admission policy from admission_file; nil without one
	// (PgBouncer's FIFO behaviour).
	adm *admissionPolicy
	// shards is the sharding router's map from shard_file, checked
	// against cfg's [databases]; nil without one (route.go).
	shards *shard.Map
	// shardSrc is where the map comes from, chosen at start:
	// "file" (shard_file) or "etcd" (ApplyShardMap); shardRev is the
	// etcd mod revision of the map in force (0 for a file).
	shardSrc string
	shardRev int64
	// seq numbers generations from 1 in the order they are derived; a
	// pool's gate (admission.go) is kept for the newest one it was asked
	// for.
	seq uint64
}

// derivedState is what derive computes from a configuration and swap
// installs.
type derivedState struct {
	gen *generation
	// dropUsers and dropPools are the SET USER / SET POOL overrides that
	// lines of the file just read replace (fromFile); swap forgets them
	// unless they were set again meanwhile.
	dropUsers map[string]*config.User
	dropPools map[string]*config.Pool
	// tlsNotApplied is set when the TLS settings did not load and the
	// TLS in force was kept (tlsset.Derive).
	tlsNotApplied error
}

// Apply swaps in a new configuration and re-reads auth_file, the HBA file
// and the TLS files. Nothing changes unless auth_file and the HBA file
// load: a bad file leaves the running configuration as it was. TLS
// settings that do not load are kept but not applied (internal/tlsset):
// the rest is swapped in and Apply returns a *tlsset.NotAppliedError,
// except at start, where they are an error like the others. Existing pools
// keep their servers; their limits follow the new configuration (servers
// over a lowered limit are closed: idle ones at once, busy ones when
// released).
//
// Runtime overrides (SET USER, SET POOL) are laid over cfg. fromFile says
// cfg was just read from the file (start, RELOAD, SIGHUP): then, as in
// Cloudflare's fork, an override is dropped when the file has a line for
// the same user or pool, and kept otherwise.
func (s *Service) Apply(cfg *config.Config, fromFile bool) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	next, warnings, err := s.derive(cfg, fromFile)
	// The TLS files' warnings are logged whether or not the rest loads.
	for _, w := range warnings {
		s.log.Warn(w)
	}
	if err != nil {
		return err
	}
	var old *config.Config
	if g := s.gen.Load(); g != nil {
		old = g.cfg
	}
	s.swap(next)
	s.peers.Reload(s.log, old, next.gen.cfg)
	if next.tlsNotApplied != nil {
		// The cause; the caller says what was kept in its own words.
		s.log.Error("TLS setup failed: " + errors.Unwrap(next.tlsNotApplied).Error())
	}
	return next.tlsNotApplied
}

// derive reads the files cfg names and computes the state Apply installs;
// it changes nothing. warnings are the TLS settings' (about files that
// loaded), returned with an error too.
func (s *Service) derive(cfg *config.Config, fromFile bool) (next *derivedState, warnings []string, err error) {
	// cur is nil at start, before the first generation.
	cur := s.gen.Load()
	next = &derivedState{gen: &generation{}}
	cfg, next.dropUsers, next.dropPools = s.withOverrides(cfg, fromFile)
	next.gen.cfg = cfg
	st := &cfg.Settings
	users := map[string]auth.Secret{}
	if f := st.AuthFile; f != "" {
		raw, err := config.LoadUserlist(f)
		if err != nil {
			return nil, warnings, err
		}
		for name, secret := range raw {
			sec, err := auth.ParseSecret(secret)
			if err != nil {
				return nil, warnings, fmt.Errorf("%s: user %q: %v", f, name, err)
			}
			users[name] = sec
		}
	}
	sec := &securityState{}
	var tlsWarnings []string
	var curTLS *tlsset.State
	if cs := cur.security(); cs != nil {
		curTLS = &cs.State
	}
	sec.State, tlsWarnings, next.tlsNotApplied, err = tlsset.Derive(curTLS, cfg, fromFile)
	warnings = append(warnings, tlsWarnings...)
	if err != nil {
		return nil, warnings, err
	}
	// A SET of another key keeps the admission policy (and every pool's
	// gate); the file is read again at start, RELOAD, SIGHUP, or when SET
	// admission_file names another one.
	adm := cur.admission()
	if fromFile || adm == nil && st.AdmissionFile != "" || adm != nil && adm.file != st.AdmissionFile {
		if adm, err = loadAdmission(st); err != nil {
			return nil, warnings, err
		}
	}
	next.gen.adm = adm
	// The shard file is read again with every configuration (and a map
	// from etcd checked again): its databases must be this one's, and it
	// is small. shard_source is read at start only.
	src := st.ShardSource
	if cur != nil {
		src = cur.shardSrc
	} else if src == "etcd" && st.ShardFile != "" {
		return nil, warnings, errors.New("shard_file and shard_source = etcd exclude each other (the map comes from one or the other)")
	} else if src == "etcd" && len(st.ShardEtcdEndpoints) == 0 {
		return nil, warnings, errors.New("shard_source = etcd needs shard_etcd_endpoints")
	}
	if err := s.deriveShards(next.gen, src, st.ShardFile); err != nil {
		return nil, warnings, err
	}
	if st.AuthType == "hba" {
		if st.AuthHBAFile == "" {
			return nil, warnings, errors.New("auth_type=hba needs auth_hba_file")
		}
		if sec.hba, err = auth.LoadHBA(st.AuthHBAFile); err != nil {
			return nil, warnings, err
		}
		if err := auth.LoadIdentMaps(sec.hba, st.AuthHBAFile, st.AuthIdentFile); err != nil {
			return nil, warnings, err
		}
	}
	if err := auth.CheckExternal(st.AuthType, st.AuthLDAPOptions); err != nil {
		return nil, warnings, err
	}
	next.gen.sec = sec
	configured := make([]string, 0, len(cfg.Users))
	for name := range cfg.Users {
		configured = append(configured, name)
	}
	// The new store only reads the running one (for the users auth_query
	// and the console added).
	var running *auth.Store
	if cur != nil {
		running = cur.users
	}
	next.gen.users = auth.NewStore(users, configured, running)
	next.gen.seq = s.genSeq.Add(1)
	return next, warnings, nil
}

// swap installs what derive computed: it publishes the new generation
// (the configuration, users, TLS and HBA, the admission policy) with one
// store; what follows from it comes after: the listeners' socket options,
// held_message_budget's limit, the pools' settings and limits (shrinking
// pools over a lowered one), and the pools [pools] names and those of
// forced users with a min_pool_size are created.
func (s *Service) swap(next *derivedState) {
	gen := next.gen
	cfg := gen.cfg
	st := &cfg.Settings
	s.mu.Lock()
	for name, u := range next.dropUsers {
		if s.userOverrides[name] == u {
			delete(s.userOverrides, name)
		}
	}
	for key, p := range next.dropPools {
		if s.poolOverrides[key] == p {
			delete(s.poolOverrides, key)
		}
	}
	s.mu.Unlock()
	auth.SetSCRAMIterations(st.SCRAMIterations)
	old := s.gen.Swap(gen)
	// Pauses of ranges the new map still has stay; the others go, and
	// their waiters meet the new map's routing.
	s.shardPauses.Reconcile(gen.shards)
	// loggedIn compares each new server's TLS settings with the
	// generation's, so a login that started under the old ones is
	// closed.
	tlsChanged := old != nil && tlsset.ServerChanged(old.sec.ServerTLS, gen.sec.ServerTLS)
	if old != nil && (old.cfg.Settings.TCPDeferAccept != 0) != (st.TCPDeferAccept != 0) {
		s.applyDeferAccept(st.TCPDeferAccept != 0)
	}
	if old != nil && old.cfg.Settings.TCPSocketBuffer != st.TCPSocketBuffer && st.TCPSocketBuffer != 0 {
		s.applySocketBuffers(st.TCPSocketBuffer)
	}
	// The budget is one live count of all clients' held bytes, not read
	// per transaction: its limit follows the generation.
	s.held.SetLimit(int64(st.HeldMessageBudget))
	s.mu.Lock()
	pools := make([]*serverPool, 0, len(s.pools))
	for _, p := range s.pools {
		pools = append(pools, p)
	}
	s.mu.Unlock()
	var retargeted []*serverPool
	for _, p := range pools {
		db := p.dbEntry()
		moved := false
		if nd, ok := cfg.LookupDatabase(p.key.db); ok {
			db = nd
			moved = p.retarget(db)
		}
		if tlsChanged {
			p.serverTLSChanged()
			moved = true
		}
		if moved {
			retargeted = append(retargeted, p)
		}
		v := p.resolveView(gen, db)
		p.view.Store(v)
		p.mu.Lock()
		p.eff = v.eff
		p.closed = poolClosed(cfg, db, p.key.user)
		p.syncGateLocked()
		p.mu.Unlock()
		p.dbLimit.SetMax(p.eff.MaxDBConnections)
		p.userLimit.SetMax(p.eff.MaxUserConnections)
	}
	now := s.clock.Now()
	for _, p := range retargeted {
		// The idle servers of the old target go now, not at the
		// janitor's next pass.
		p.maintain(now)
	}
	for _, p := range pools {
		p.shrink()
		p.kick()
	}
	// Pools named in [pools] (or by SET POOL) exist from the start, as in
	// the fork, so SHOW POOLS lists them before their first client.
	for _, po := range cfg.Pools {
		if db, ok := cfg.LookupDatabase(po.Database); ok && db.User == "" {
			if p, err := s.poolFor(db, po.User); err == nil {
				s.unpin(p)
			}
		}
	}
	s.createForcedPools(cfg)
	for _, w := range cfg.Warnings {
		s.log.Warn(w)
	}
}

// createForcedPools creates the pool of each database with a forced user
// and a min_pool_size, as PgBouncer's maintenance does: such a pool has no
// client to create it, and one added by RELOAD (or given a min_pool_size
// by SET) would otherwise never be filled. The janitor's next pass fills
// it to min_pool_size through its create bucket (fillMinLocked), as
// Service.Warm does at start.
func (s *Service) createForcedPools(cfg *config.Config) {
	for name, db := range cfg.Databases {
		if name == "*" || db.User == "" || cfg.Resolve(db, db.User).MinPoolSize <= 0 {
			continue
		}
		p, err := s.poolFor(db, db.User)
		if err != nil {
			s.log.Warn("pool warming: " + name + ": " + err.Error())
			continue
		}
		s.unpin(p)
	}
}

// poolClosed: the fork's pool_size=0 for a pool in [pools] / SET POOL.
func poolClosed(cfg *config.Config, db *config.Database, user string) bool {
	po := cfg.Pools[config.PoolKey(user, db.Name)]
	return po != nil && po.PoolSize == 0
}

// withOverrides lays the SET USER / SET POOL overrides over a copy of cfg
// (cfg itself when there are none). With fromFile, the overrides the file
// has a line for are left out and returned, for swap to forget.
func (s *Service) withOverrides(cfg *config.Config, fromFile bool) (_ *config.Config, dropUsers map[string]*config.User, dropPools map[string]*config.Pool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	users := make(map[string]*config.User, len(s.userOverrides))
	pools := make(map[string]*config.Pool, len(s.poolOverrides))
	for name, u := range s.userOverrides {
		if _, inFile := cfg.Users[name]; fromFile && inFile {
			if dropUsers == nil {
				dropUsers = map[string]*config.User{}
			}
			dropUsers[name] = u
			continue
		}
		users[name] = u
	}
	for key, p := range s.poolOverrides {
		if _, inFile := cfg.Pools[key]; fromFile && inFile {
			if dropPools == nil {
				dropPools = map[string]*config.Pool{}
			}
			dropPools[key] = p
			continue
		}
		pools[key] = p
	}
	if len(users) == 0 && len(pools) == 0 {
		return cfg, dropUsers, dropPools
	}
	cfg = cfg.Clone()
	for name, u := range users {
		cp := *u
		cfg.Users[name] = &cp
	}
	for key, p := range pools {
		cp := *p
		cfg.Pools[key] = &cp
	}
	return cfg, dropUsers, dropPools
}

// security is the generation's TLS and HBA; nil before the first.
func (g *generation) security() *securityState {
	if g == nil {
		return nil
	}
	return g.sec
}

// admission is the generation's admission policy; nil before the first
// or without admission_file.
func (g *generation) admission() *admissionPolicy {
	if g == nil {
		return nil
	}
	return g.adm
}
