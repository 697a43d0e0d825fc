package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// PoolMode says when a server connection goes back to its pool.
type PoolMode int

const (
	PoolModeUnset PoolMode = iota // in Database/User: not set, inherit
	PoolModeSession
	PoolModeTransaction
	PoolModeStatement
)

// ParsePoolMode accepts session, transaction or statement (any case).
func ParsePoolMode(s string) (PoolMode, error) {
	switch strings.ToLower(s) {
	case "session":
		return PoolModeSession, nil
	case "transaction":
		return PoolModeTransaction, nil
	case "statement":
		return PoolModeStatement, nil
	}
	return PoolModeUnset, fmt.Errorf("invalid pool_mode %q: must be one of session, transaction, statement", s)
}

// String returns the ini spelling, "" for PoolModeUnset.
func (m PoolMode) String() string {
	switch m {
	case PoolModeSession:
		return "session"
	case PoolModeTransaction:
		return "transaction"
	case PoolModeStatement:
		return "statement"
	}
	return ""
}

// Settings is the [pgbouncer] section, typed. Every field is filled from
// Keys (defaults first, then the file). Durations are PgBouncer's seconds.
type Settings struct {
	ListenAddr     string // comma-separated, "*" = all; "" = Unix socket only
	ListenPort     int    // 0 = any free port (pgturnstile extension, for tests)
	UnixSocketDir  string // "" disables the Unix socket
	UnixSocketMode int
	// SoReuseport sets SO_REUSEPORT on the TCP listeners: several
	// processes share one port (rolling restarts, peering).
	SoReuseport bool
	// PeerID is this process's id in a peer group ([peers]); 0 = peering
	// off. Client cancel keys carry it (pooler/peering.go).
	PeerID int

	AuthType    string // one of authTypeValues
	AuthFile    string
	AuthUser    string
	AuthQuery   string
	AuthDBName  string
	AuthHBAFile string
	// AuthLDAPOptions are the LDAP options of auth_type=ldap (auth.ParseLDAPOptions).
	AuthLDAPOptions string

	AdminUsers, StatsUsers []string

	PoolMode                                                     PoolMode
	MaxClientConn, DefaultPoolSize, MinPoolSize, ReservePoolSize int
	ReservePoolTimeout                                           time.Duration
	MaxDBConnections, MaxUserConnections                         int // 0 = unlimited
	MaxDBClientConnections, MaxUserClientConnections             int // 0 = unlimited
	ServerRoundRobin                                             bool
	MaxPreparedStatements                                        int
	MaxPacketSize                                                int
	PktBuf                                                       int

	ServerLifetime, ServerIdleTimeout, ServerConnectTimeout, ServerLoginRetry, ServerCheckDelay time.Duration
	// PoolIdleTimeout frees a pool unused that long (0 = never);
	// AutodbIdleTimeout a database from "*" all of whose pools are.
	PoolIdleTimeout, AutodbIdleTimeout time.Duration
	// ServerCheckQuery: EmptyQueryCheck ("<empty>", the default) = send an
	// empty query; "" = no check; anything else = that query.
	ServerCheckQuery       string
	ServerResetQuery       string
	ServerResetQueryAlways bool

	ClientIdleTimeout, ClientLoginTimeout, IdleTransactionTimeout, QueryTimeout, QueryWaitTimeout time.Duration
	// SuspendTimeout bounds SUSPEND's wait for clients to come to rest
	// (online restart, suspend.go in pooler).
	SuspendTimeout     time.Duration
	TransactionTimeout time.Duration
	// CancelWaitTimeout bounds a cancel request's connection to Postgres;
	// 0 = server_connect_timeout's bound (a server holding a cancel
	// in flight is lent to nobody, so the wait is never unbounded).
	CancelWaitTimeout time.Duration
	// ServerFastClose: a server marked close_needed is taken from its
	// session-mode client as soon as it is idle between transactions.
	ServerFastClose bool
	// QueryWaitNotify: a client queued this long is sent a NOTICE; 0 = never.
	QueryWaitNotify time.Duration
	// LoginNotifyMessage: a NOTICE sent with every client's welcome; "" = none.
	LoginNotifyMessage string

	TrackExtraParameters, IgnoreStartupParameters []string

	LogConnections, LogDisconnections, LogPoolerErrors, LogStats bool
	Logfile, Pidfile                                             string
	Syslog                                                       bool
	SyslogIdent, SyslogFacility                                  string
	Verbose                                                      int
	ApplicationNameAddHost                                       bool
	DisablePQExec                                                bool
	StatsPeriod                                                  time.Duration
	User                                                         string

	LogFormat     string // pgturnstile extension: "text" or "json"
	AdmissionFile string // pgturnstile extension, accepted and stored
	EventLoop     bool   // pgturnstile extension: clients between transactions rest on the event loop (pooler/loop.go)
	ShardFile     string // pgturnstile extension: the sharding router's map (package shard)
	// ShardSource (extension) is where the map comes from: "file"
	// (ShardFile) or "etcd" (package shard/etcdsource, with the
	// ShardEtcd settings).
	ShardSource                                          string
	ShardEtcdEndpoints                                   []string
	ShardEtcdPrefix                                      string
	ShardEtcdCAFile, ShardEtcdCertFile, ShardEtcdKeyFile string
	ShardEtcdUser, ShardEtcdPassword                     string
	ShardEtcdInstance                                    string
	MetricsAddr                                          string // pgturnstile extension: the /metrics listener
	// LimitEvictGrace (extension): how long a busy server over a lowered
	// limit may stay with its client before it is evicted; 0 = never, it
	// closes when the client releases it.
	LimitEvictGrace time.Duration
	// ClientMessageTimeout (extension): how long a client may take to send
	// the rest of a message it has started; 0 = no limit.
	ClientMessageTimeout time.Duration
	// Connection safeguards (extensions): per-pool token buckets for
	// creating and closing servers, the cap on logins in flight, the
	// spread of server lifetimes, and how much of an abandoned result is
	// read before its query is cancelled. Rates are per second; 0 =
	// unlimited.
	ServerConnectRate, ServerConnectBurst, ServerMaxParallelConnects int
	ServerCloseRate                                                  int
	ServerLifetimeJitter                                             float64
	ClientDrainMaxBytes                                              int
	// Memory bounds (extensions): the largest client message held whole,
	// the bytes of such messages held at once by all clients, and the
	// bytes of statement text kept for prepared statements.
	MaxHeldMessageSize, HeldMessageBudget, PreparedStatementBudget int

	AuthIdentFile string
	// scram_iterations: the count of the SCRAM verifiers the pooler
	// builds from plain passwords (and for its mock exchange).
	SCRAMIterations int

	// TLS towards clients and towards servers.
	ClientTLSSSLMode, ClientTLSKeyFile, ClientTLSCertFile, ClientTLSCAFile, ClientTLSProtocols, ClientTLSCiphers string
	ServerTLSSSLMode, ServerTLSKeyFile, ServerTLSCertFile, ServerTLSCAFile, ServerTLSProtocols, ServerTLSCiphers string
	ClientTLSECDHCurve                                                                                           string

	// Sockets (pooler/sockopts*.go): TCP options of client and server
	// connections (0 = the OS default), the listeners' backlog and
	// TCP_DEFER_ACCEPT, the Unix socket's group.
	TCPKeepalive                                          bool
	TCPKeepIdle, TCPKeepIntvl, TCPKeepCnt, TCPUserTimeout int
	TCPSocketBuffer, TCPDeferAccept, ListenBacklog        int
	UnixSocketGroup                                       string
	// The DNS cache of server host names (internal/dnscache).
	DNSMaxTTL, DNSNXDomainTTL, DNSZoneCheckPeriod time.Duration
	ResolvConf                                    string
}

// Database is one [databases] entry. Integer limits are -1 when unset
// (inherit); durations are -1 when unset.
type Database struct {
	Name                                                               string // the name clients connect to ("*" for the fallback)
	Host                                                               string // hostname/IP, or a directory (starts with '/') = unix socket dir; "" = default; a comma-separated list for several hosts
	Port                                                               int    // default 5432; the first of Ports when a list was given
	Ports                                                              []int  // per-host ports (port=5432,5433); nil when one port serves every host
	DBName                                                             string // "" = same as Name (client's db name)
	User, Password, AuthUser                                           string
	PoolSize, MinPoolSize, ReservePoolSize, MaxDBConnections           int // -1 = unset (inherit)
	PoolMode                                                           PoolMode
	ConnectQuery, ClientEncoding, DateStyle, TimeZone, ApplicationName string

	// Parsed and kept for SHOW DATABASES, but not enforced yet (a warning
	// is added when set).
	AuthQuery, AuthDBName  string
	MaxDBClientConnections int           // -1 = unset; enforced (Config.MaxDBClients)
	ServerLifetime         time.Duration // -1 = unset
	QueryWaitTimeout       time.Duration // -1 = unset
	LoadBalanceHosts       string        // "" = unset (round-robin)
	TargetSessionAttrs     string        // "" = unset (any)

	File string
	Line int // where it was defined
}

// ServerDBName is the database name to send to the server.
func (d *Database) ServerDBName() string {
	if d.DBName != "" {
		return d.DBName
	}
	return d.Name
}

// User is one [users] entry. Integer limits are -1 when unset.
type User struct {
	Name                                          string
	PoolMode                                      PoolMode
	PoolSize, ReservePoolSize, MaxUserConnections int // -1 = unset

	// Parsed but not enforced yet (a warning is added when set).
	MaxUserClientConnections                                                                      int           // -1 = unset; enforced (Config.MaxUserClients)
	QueryTimeout, IdleTransactionTimeout, TransactionTimeout, ClientIdleTimeout, QueryWaitTimeout time.Duration // -1 = unset

	File string
	Line int
}

// Pool is one [pools] entry: "user.database = pool_size=N" (Cloudflare's
// PgBouncer fork). PoolSize < 0 means no override.
type Pool struct {
	User, Database string
	PoolSize       int
	File           string
	Line           int
}

// PoolKey is the key of Config.Pools for (user, database).
func PoolKey(user, database string) string { return user + "." + database }

// Config is one loaded pgbouncer.ini. It is not modified after Load/Parse
// returns; a RELOAD builds a new one and the pooler swaps it atomically.
type Config struct {
	Path      string
	Settings  Settings
	Databases map[string]*Database // includes "*" when present
	Users     map[string]*User
	Pools     map[string]*Pool // key PoolKey(user, database)
	Peers     map[int]*Peer    // [peers], by peer id
	Warnings  []string         // one entry per unsupported-but-set setting

	values map[string]string // canonical text of every key in Keys
}

// Default returns a Config with every setting at its default and no
// databases, users or pools.
func Default() *Config {
	c := &Config{
		Databases: map[string]*Database{},
		Users:     map[string]*User{},
		Pools:     map[string]*Pool{},
		Peers:     map[int]*Peer{},
		values:    make(map[string]string, len(Keys)),
	}
	for i := range Keys {
		k := &Keys[i]
		v, _ := k.parse(k.Default) // checked in init
		c.values[k.Name] = k.format(v)
		k.apply(&c.Settings, v)
	}
	return c
}

// Clone returns a deep copy, for building a changed Config (admin SET).
func (c *Config) Clone() *Config {
	n := *c
	n.Settings.AdminUsers = slices.Clone(c.Settings.AdminUsers)
	n.Settings.StatsUsers = slices.Clone(c.Settings.StatsUsers)
	n.Settings.TrackExtraParameters = slices.Clone(c.Settings.TrackExtraParameters)
	n.Settings.IgnoreStartupParameters = slices.Clone(c.Settings.IgnoreStartupParameters)
	n.Databases = make(map[string]*Database, len(c.Databases))
	for k, d := range c.Databases {
		cp := *d
		n.Databases[k] = &cp
	}
	n.Users = make(map[string]*User, len(c.Users))
	for k, u := range c.Users {
		cp := *u
		n.Users[k] = &cp
	}
	n.Pools = make(map[string]*Pool, len(c.Pools))
	for k, p := range c.Pools {
		cp := *p
		n.Pools[k] = &cp
	}
	n.Peers = maps.Clone(c.Peers) // entries are never modified
	n.Warnings = slices.Clone(c.Warnings)
	n.values = maps.Clone(c.values)
	return &n
}

// Set changes one [pgbouncer] setting, as the admin console's SET does:
// the value is validated by the key's kind and boot-only settings are
// refused. Call it on a Clone, never on a Config other goroutines read.
func (c *Config) Set(key, raw string) error {
	i, ok := keyIndex[strings.ToLower(key)]
	if !ok {
		return fmt.Errorf("unknown config parameter: %s", key)
	}
	k := &Keys[i]
	if !k.Reloadable {
		return fmt.Errorf("cannot change %s at runtime (needs a restart)", k.Name)
	}
	v, err := k.parse(raw)
	if err != nil {
		return fmt.Errorf("invalid value %q for parameter %s: %v", raw, k.Name, err)
	}
	c.values[k.Name] = k.format(v)
	k.apply(&c.Settings, v)
	return nil
}

// Value returns a setting's current value as SHOW CONFIG prints it ("" and
// false for an unknown key). Keys are case-insensitive.
func (c *Config) Value(key string) (string, bool) {
	key = strings.ToLower(key)
	v, ok := c.values[key]
	if !ok {
		return "", false
	}
	if key == "conffile" && v == "" {
		return c.Path, true
	}
	return v, true
}

// LookupDatabase returns the entry for a client's database name; if absent
// and "*" exists, a copy of "*" with Name=name and DBName=name (or "*"'s
// dbname if set). The bool is false when neither exists.
func (c *Config) LookupDatabase(name string) (*Database, bool) {
	if d, ok := c.Databases[name]; ok {
		return d, true
	}
	star, ok := c.Databases["*"]
	if !ok {
		return nil, false
	}
	d := *star
	d.Name = name
	if d.DBName == "" {
		d.DBName = name
	}
	return &d, true
}

// Effective are the limits that apply to one (database, user) pool.
type Effective struct {
	PoolMode                               PoolMode
	PoolSize, MinPoolSize, ReservePoolSize int
	MaxDBConnections, MaxUserConnections   int // 0 = unlimited
	Timeouts
}

// Timeouts are the timeouts of one pool's servers and clients (0 = off,
// except QueryWaitTimeout, where 0 = wait forever, and ServerLifetime,
// where 0 = single use).
type Timeouts struct {
	QueryTimeout, IdleTransactionTimeout, TransactionTimeout time.Duration
	ClientIdleTimeout, QueryWaitTimeout, ServerLifetime      time.Duration
}

// Resolve returns the effective limits for the pool (db, user), where user
// is the name the pool logs in as (the forced user when db.User is set).
// db may be nil (globals only). Precedence, highest first:
//
//	pool_size:            [pools] > [users] > [databases] > default_pool_size,
//	                      except that [pools] never exceeds [databases]
//	pool_mode:            [users] > [databases] > pool_mode
//	reserve_pool_size:    [users] > [databases] > reserve_pool_size
//	min_pool_size:        [databases] > min_pool_size
//	max_db_connections:   [databases] > max_db_connections
//	max_user_connections: [users] > max_user_connections
//	query_timeout, idle_transaction_timeout, transaction_timeout,
//	client_idle_timeout:  [users] > the global setting
//	query_wait_timeout:   [users] > [databases] > query_wait_timeout
//	server_lifetime:      [databases] > server_lifetime
//
// A pool/user/database value applies when >= 0, except the two
// max_*_connections, the four per-user timeouts and the per-database
// server_lifetime, which apply only when > 0: as in PgBouncer, a per-user
// or per-database 0 falls back to the global setting instead of meaning
// "unlimited" or "off". query_wait_timeout is the exception PgBouncer makes:
// a per-user or per-database 0 (wait forever) applies; -1 is unset.
func (c *Config) Resolve(db *Database, user string) Effective {
	g := &c.Settings
	e := Effective{
		PoolMode:           g.PoolMode,
		PoolSize:           g.DefaultPoolSize,
		MinPoolSize:        g.MinPoolSize,
		ReservePoolSize:    g.ReservePoolSize,
		MaxDBConnections:   g.MaxDBConnections,
		MaxUserConnections: g.MaxUserConnections,
		Timeouts: Timeouts{
			QueryTimeout:           g.QueryTimeout,
			IdleTransactionTimeout: g.IdleTransactionTimeout,
			TransactionTimeout:     g.TransactionTimeout,
			ClientIdleTimeout:      g.ClientIdleTimeout,
			QueryWaitTimeout:       g.QueryWaitTimeout,
			ServerLifetime:         g.ServerLifetime,
		},
	}
	if db != nil {
		if db.PoolMode != PoolModeUnset {
			e.PoolMode = db.PoolMode
		}
		if db.PoolSize >= 0 {
			e.PoolSize = db.PoolSize
		}
		if db.MinPoolSize >= 0 {
			e.MinPoolSize = db.MinPoolSize
		}
		if db.ReservePoolSize >= 0 {
			e.ReservePoolSize = db.ReservePoolSize
		}
		if db.MaxDBConnections > 0 {
			e.MaxDBConnections = db.MaxDBConnections
		}
		if db.ServerLifetime > 0 {
			e.ServerLifetime = db.ServerLifetime
		}
		if db.QueryWaitTimeout >= 0 {
			e.QueryWaitTimeout = db.QueryWaitTimeout
		}
	}
	if u := c.Users[user]; u != nil {
		if u.PoolMode != PoolModeUnset {
			e.PoolMode = u.PoolMode
		}
		if u.PoolSize >= 0 {
			e.PoolSize = u.PoolSize
		}
		if u.ReservePoolSize >= 0 {
			e.ReservePoolSize = u.ReservePoolSize
		}
		if u.MaxUserConnections > 0 {
			e.MaxUserConnections = u.MaxUserConnections
		}
		e.QueryTimeout = positiveOr(u.QueryTimeout, e.QueryTimeout)
		e.IdleTransactionTimeout = positiveOr(u.IdleTransactionTimeout, e.IdleTransactionTimeout)
		e.TransactionTimeout = positiveOr(u.TransactionTimeout, e.TransactionTimeout)
		e.ClientIdleTimeout = positiveOr(u.ClientIdleTimeout, e.ClientIdleTimeout)
		if u.QueryWaitTimeout >= 0 {
			e.QueryWaitTimeout = u.QueryWaitTimeout
		}
	}
	if db != nil {
		if p := c.Pools[PoolKey(user, db.Name)]; p != nil && p.PoolSize >= 0 {
			// Cloudflare's rule: [pools] can lower a database's own
			// pool_size but never raise it; without one it applies as is.
			e.PoolSize = p.PoolSize
			if db.PoolSize >= 0 && db.PoolSize < p.PoolSize {
				e.PoolSize = db.PoolSize
			}
		}
	}
	return e
}

// positiveOr returns v when it is set and not 0, else def: PgBouncer's rule
// for the per-user timeouts and the per-database server_lifetime.
func positiveOr(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}
