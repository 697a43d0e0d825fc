package admin

import (
	"net"
	"strconv"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
)

// Console is what the admin console needs from the pooler: read-only
// snapshots for SHOW, and the commands. The pooler implements it; this
// package never reaches into pooler internals.
type Console interface {
	Config() *config.Config
	Version() string

	Pools() []Pool
	Clients() []Conn
	Servers() []Conn
	Databases() []Database
	Users() []User
	Stats() []Stats
	State() State
	Lists() Lists
	// Admission lists the gates of pools under an admission policy
	// (admission_file); empty without one.
	Admission() []AdmissionRow
	// Shards lists the shard map in force (shard_file), one row per
	// range of each colocation; Routes the router's decisions so far.
	// Both empty without a shard file.
	Shards() []ShardRow
	Routes() []RouteRow
	// ShardInstances lists the pgturnstile instances that share the map
	// through etcd (shard_source = etcd) and the revision each serves;
	// empty otherwise.
	ShardInstances() []ShardInstanceRow

	// Commands. db == "" means every database. Errors are *Error when the
	// client should see a specific SQLSTATE and text.
	Pause(db string) error
	Resume(db string) error
	// PauseShard is PAUSE SHARD cluster.colo [RANGE]: new transactions
	// whose keys fall in the range of logical shards (all of the
	// colocation's when rng is "") wait; it returns once no transaction
	// in the range runs. ResumeShard ends the pause of that range (every
	// paused range of the colocation when rng is "").
	PauseShard(target, rng string) error
	ResumeShard(target, rng string) error
	Disable(db string) error
	Enable(db string) error
	Reconnect(db string) error
	Kill(db string) error
	KillClient(id uint64) error
	// WaitClose blocks until no server of db (or any) is marked close_needed.
	WaitClose(db string) error
	Reload() error
	Shutdown(mode ShutdownMode)
	// ConsoleQuery is told of each query the console is about to run:
	// SHOW STATS counts it in the pgbouncer database, one transaction and
	// one query, as PgBouncer does.
	ConsoleQuery()
	// Set changes one [pgbouncer] setting as SET key = value does.
	Set(key, value string) error
	// SetUser and SetPool apply Cloudflare's runtime overrides; settings is
	// the quoted string of the command, e.g. "max_user_connections=2 pool_mode=session".
	SetUser(name, settings string) error
	SetPool(user, db, settings string) error

	// Suspend is SUSPEND: accept nothing, read nothing, bring every
	// client that can move to another process to rest; Resume("") ends it.
	Suspend() error
	// FDs lists what an online restart hands over (SHOW FDS): the
	// listening sockets, the clients at rest and the idle servers. With
	// pass, each comes with a duplicate of its descriptor (FD) that the
	// caller closes, and the servers listed are held for the hand-over
	// (HandOver, or Resume("") if it does not come).
	FDs(pass bool) []FD
	// HandOver is told that the clients and listeners of a SHOW FDS
	// (their IDs) now belong to the process that took them over: the
	// service lets go of them and ends once its remaining clients left.
	HandOver(ids []uint64)
}

// FD is one row of SHOW FDS: PgBouncer's columns, and State, pgturnstile's
// own (a JSON document with the rest of what a client's session is made
// of: its parameters, prepared statements, addresses).
type FD struct {
	FD                             int    // a duplicate of the descriptor; -1: none
	ID                             uint64 // the client's or listener's id in this process
	Task                           string // "pooler" (a listener), "client" or "server"
	User, Database, Addr           string
	Port                           int
	Cancel                         int64
	Link                           int // the linked row's FD (a session client and its server); 0: none
	ClientEncoding, StdStrings     string
	DateStyle, TimeZone, Password  string
	ScramClientKey, ScramServerKey []byte
	State                          string
}

// ShutdownMode is how SHUTDOWN ends the process.
type ShutdownMode int

const (
	ShutdownImmediate      ShutdownMode = iota + 1 // SHUTDOWN
	ShutdownWaitForServers                         // SHUTDOWN WAIT_FOR_SERVERS (SIGINT)
	ShutdownWaitForClients                         // SHUTDOWN WAIT_FOR_CLIENTS (SIGTERM)
)

// Pool is one row of SHOW POOLS.
type Pool struct {
	Database, User                                             string
	ClActive, ClWaiting, ClActiveCancelReq, ClWaitingCancelReq int
	SvActive, SvActiveCancel, SvBeingCanceled, SvIdle, SvUsed  int
	SvTested, SvLogin                                          int
	MaxWait                                                    time.Duration
	PoolMode, LoadBalanceHosts                                 string
	PoolSize                                                   int // extension column (Cloudflare's fork)
}

// Conn is one row of SHOW CLIENTS or SHOW SERVERS.
type Conn struct {
	Type                     string // "C" or "S"
	User, Database           string
	Replication              string // "none", "physical", "logical"
	State                    string // clients: active idle waiting active_cancel_req waiting_cancel_req; servers: active idle used tested new active_cancel being_canceled
	Addr                     string
	Port                     int
	LocalAddr                string
	LocalPort                int
	ConnectTime, RequestTime time.Time
	Wait                     time.Duration
	CloseNeeded              bool
	Ptr, Link                string // identities, e.g. "C-12" / "S-3"
	RemotePID                int
	TLS                      string // "" or e.g. "TLSv1.3/TLS_AES_128_GCM_SHA256"
	ApplicationName          string
	PreparedStatements       int
	ID                       uint64
}

// AddrColumns is a server connection's address as SHOW SERVERS lists it
// (addr, port; local_addr, local_port): "unix" and port 0 for a Unix
// socket, the host and port of anything else.
func AddrColumns(a net.Addr) (string, int) {
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

// Database is one row of SHOW DATABASES.
type Database struct {
	Name, Host                                     string
	Port                                           int
	Database, ForceUser                            string
	PoolSize, MinPoolSize, ReservePoolSize         int
	ServerLifetime                                 time.Duration
	PoolMode, LoadBalanceHosts                     string
	MaxConnections, CurrentConnections             int
	MaxClientConnections, CurrentClientConnections int
	Paused, Disabled                               bool
}

// User is one row of SHOW USERS. Negative sizes print as NULL (unset).
type User struct {
	Name                                               string
	PoolSize, ReservePoolSize                          int
	PoolMode                                           string
	MaxUserConnections, CurrentConnections             int
	MaxUserClientConnections, CurrentClientConnections int
}

// Counters are the per-database statistics of SHOW STATS; times are in
// microseconds, as PgBouncer reports them.
type Counters struct {
	ServerAssignmentCount, XactCount, QueryCount int64
	Received, Sent                               int64
	XactTime, QueryTime, WaitTime                int64
	ClientParseCount, ServerParseCount           int64
	BindCount, ClientLoginCount                  int64
}

// Stats is one database's totals and its averages per second over the
// last stats_period.
type Stats struct {
	Database string
	Total    Counters
	Average  Counters
}

// State is SHOW STATE.
type State struct{ Active, Paused, Suspended bool }

// Lists are the counts of SHOW LISTS.
type Lists struct {
	Databases, Users, Peers, Pools, PeerPools  int
	FreeClients, UsedClients, LoginClients     int
	FreeServers, UsedServers                   int
	DNSNames, DNSZones, DNSQueries, DNSPending int
}

// PeerPool is one row of SHOW PEER_POOLS: the cancel requests forwarded
// to one peer.
type PeerPool struct {
	PeerID                                int
	ClActiveCancelReq, ClWaitingCancelReq int
	SvActiveCancel, SvLogin               int
}

// PeerPools is what a Console with peering gives SHOW PEER_POOLS; one
// without it shows no rows.
type PeerPools interface{ PeerPools() []PeerPool }

// Error is a console error with the SQLSTATE and text PgBouncer uses.
type Error struct {
	SQLState string
	Message  string
}

func (e *Error) Error() string { return e.Message }

// ShardRow is one row of SHOW SHARDS (a pgturnstile extension): a range
// of logical shards of one colocation of a cluster and the database that
// holds it, under the configuration generation that loaded the map.
type ShardRow struct {
	Cluster, Colo, KeyType string
	Range                  string // "FIRST-LAST"
	Database               string
	Generation             uint64
	// Paused: PAUSE SHARD holds the range (rows are split where a paused
	// range starts or ends); Waiting counts the transactions it holds.
	Paused  bool
	Waiting int
	// Source is where the map came from: the shard file's path, or
	// "etcd:<prefix>/map"; Revision is the etcd mod revision of the map
	// (0, printed NULL, for a file).
	Source   string
	Revision int64
}

// ShardInstanceRow is one row of SHOW SHARD_INSTANCES (a pgturnstile
// extension): an instance's record under <shard_etcd_prefix>/instances/.
type ShardInstanceRow struct {
	Instance string
	// Revision is the map's revision the instance serves; Latest the
	// newest this instance has seen (the two agree on every row once the
	// fleet converged).
	Revision, Latest int64
	Host             string
	PID              int
	Listen           string
	Updated          time.Time
	// RejectedRevision and Rejected: the last map the instance refused,
	// and why.
	RejectedRevision int64
	Rejected         string
	// Self: this row is the instance answering.
	Self bool
}

// RouteRow is one row of SHOW ROUTES (a pgturnstile extension): how many
// statements of a cluster's clients the router decided from one source
// (literal, param, hint, option, target, default, scatter, refused), per
// colocation (empty: none) and, for refusals, per reason.
type RouteRow struct {
	Cluster, Colo, Source, Reason string
	Count                         uint64
}

// AdmissionRow is one row of SHOW ADMISSION (a pgturnstile extension): the
// gate of one pool (Kind "pool"), one of its priority tiers ("tier") or one
// node of its fair-share tree ("node"). Fields that do not apply to a kind
// are zero and printed as NULL.
type AdmissionRow struct {
	Database, User string
	Kind           string // "pool", "tier", "node"
	Name           string // pool: ""; tier: its priority name; node: its path ("/" is the root)
	Capacity       int    // pool
	InUse, Waiting int
	Weight         float64 // node
	Ceiling        float64 // node
	Alloc          float64 // node: water-fill allocation of the current demand
	Debt           float64 // tier: free slots it leaves for the tiers above
	Mode           string  // tier: "fifo" or "lifo"
	Granted, Shed  uint64  // tier
	// Demand is the tier's demand estimate (tickets plus waiters, time
	// averaged); Allowed is how many tickets the tier and the tiers below it
	// may hold together now (capacity less what the tiers above claim or
	// hold). A tier's waiters wait while its tickets and those below reach
	// Allowed.
	Demand  float64 // tier
	Allowed int     // tier
	// Busy is the pool's busy fraction over the gate's life,
	// InUseSeconds ÷ CapacitySeconds; both integrals are cumulative
	// (slot-seconds), so the fraction over a window is the ratio of their
	// increases between two readings.
	Busy                          float64 // pool
	InUseSeconds, CapacitySeconds float64 // pool
}
