package config

import (
	"errors"
	"os"
	"sort"
	"strings"
)

// Kind is the value type of a setting. It decides how the text after "="
// is validated and how SHOW CONFIG prints the value back.
type Kind int

const (
	// KindInt is an integer parsed like C strtol with base 0, as PgBouncer
	// does: "0x1F" is hex and "0777" is octal.
	KindInt Kind = iota
	// KindBool is 0/1 (any integer, non-zero = on) or yes/no, on/off,
	// true/false. SHOW CONFIG prints 0 or 1.
	KindBool
	// KindDuration is seconds with an optional fraction ("0.5", "15"), or a
	// Go duration with a unit ("100ms", "5s"). SHOW CONFIG prints seconds.
	KindDuration
	// KindEnum is one of Key.Values, matched case-insensitively.
	KindEnum
	// KindString is taken verbatim (surrounding blanks removed).
	KindString
	// KindList is a comma-separated list; blanks around items are removed.
	KindList
	// KindFloat is a decimal number within [Key.fmin, Key.fmax] (a
	// fraction, for the extensions that need one). SHOW CONFIG prints it
	// like C's "%g".
	KindFloat
)

func (k Kind) String() string {
	switch k {
	case KindInt:
		return "int"
	case KindBool:
		return "bool"
	case KindDuration:
		return "duration"
	case KindEnum:
		return "enum"
	case KindString:
		return "string"
	case KindList:
		return "list"
	case KindFloat:
		return "float"
	}
	return "unknown"
}

// Status says how far pgturnstile implements a setting.
type Status int

const (
	// Supported: behaves as in PgBouncer.
	Supported Status = iota
	// Partial: accepted, some values or aspects differ (Key.Note says how).
	Partial
	// NotSupported: accepted and validated, but ignored for now; setting it
	// to a non-default value adds a warning to Config.Warnings.
	NotSupported
)

func (s Status) String() string {
	switch s {
	case Supported:
		return "supported"
	case Partial:
		return "partial"
	case NotSupported:
		return "not supported yet"
	}
	return "unknown"
}

// Key describes one [pgbouncer] setting. The table Keys drives parsing,
// defaults, validation, SHOW CONFIG, admin SET and pgbouncer-compat.md.
type Key struct {
	Name       string
	Kind       Kind
	Default    string // as PgBouncer's SHOW CONFIG prints the default
	Reloadable bool   // false: only read at start (PgBouncer's CF_NO_RELOAD)
	Status     Status
	Doc        string   // one line: what the setting does
	Note       string   // for Partial/NotSupported: how or why; for extensions: that they are
	Values     []string // KindEnum: the accepted values (canonical spelling)

	min, max   int64               // KindInt bounds (inclusive); max 0 = MaxInt32
	fmin, fmax float64             // KindFloat bounds (inclusive)
	field      func(*Settings) any // pointer to the Settings field, nil if none
	check      func(string) error  // KindString: refuses a value, nil if any goes
}

// checkAuthDBName refuses the admin console as auth_dbname, in PgBouncer's
// words (cf_set_authdb): it has no server to run auth_query on.
func checkAuthDBName(v string) error {
	if v == "pgbouncer" {
		return errors.New(`cannot use the reserved "pgbouncer" database as an auth_dbname`)
	}
	return nil
}

// Keys lists every PgBouncer 1.25/1.26 [pgbouncer] setting plus the
// pgturnstile extensions, sorted by name (the order of SHOW CONFIG).
var Keys []Key

var keyIndex map[string]int

// LookupKey returns the table entry for a setting name (case-insensitive).
func LookupKey(name string) (Key, bool) {
	i, ok := keyIndex[strings.ToLower(name)]
	if !ok {
		return Key{}, false
	}
	return Keys[i], true
}

// bootOnly are PgBouncer's CF_NO_RELOAD settings: changed only by a restart.
var bootOnly = map[string]bool{
	"disable_pqexec": true, "job_name": true, "service_name": true, "listen_addr": true,
	"listen_backlog": true, "listen_port": true, "pidfile": true, "pkt_buf": true,
	"resolv_conf": true, "so_reuseport": true, "track_extra_parameters": true,
	"unix_socket_dir": true, "unix_socket_group": true, "unix_socket_mode": true, "user": true,
	"metrics_addr": true,
	// The shard map's source is chosen, and its watch started, at start.
	"shard_source": true, "shard_etcd_endpoints": true, "shard_etcd_prefix": true,
	"shard_etcd_cafile": true, "shard_etcd_certfile": true, "shard_etcd_keyfile": true,
	"shard_etcd_user": true, "shard_etcd_password": true, "shard_etcd_instance": true,
}

// checkEtcdPrefix refuses a prefix that would make the map's key
// ambiguous: it starts with "/" and does not end with one (the keys are
// prefix + "/map" and prefix + "/instances/...").
func checkEtcdPrefix(v string) error {
	if !strings.HasPrefix(v, "/") || len(v) > 1 && strings.HasSuffix(v, "/") {
		return errors.New(`a key prefix starts with "/" and does not end with "/"`)
	}
	return nil
}

// checkEtcdInstance refuses an instance name that is not one key
// component.
func checkEtcdInstance(v string) error {
	if strings.ContainsAny(v, "/ \t\n") {
		return errors.New("an instance name holds no \"/\" and no blanks")
	}
	return nil
}

// DefaultAuthQuery is PgBouncer's auth_query default since 1.24.1.
const DefaultAuthQuery = "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END FROM pg_authid WHERE rolname=$1 AND rolcanlogin"

// EmptyQueryCheck is the server_check_query value (and default since
// PgBouncer 1.25) that means "check the server by sending an empty query".
// An empty server_check_query disables the check.
const EmptyQueryCheck = "<empty>"

var (
	poolModeValues = []string{"session", "transaction", "statement"}
	authTypeValues = []string{"any", "cert", "hba", "ldap", "md5", "pam", "plain", "scram-sha-256", "trust"}
	sslModeValues  = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}
)

// supportedAuthTypes are the auth_type values the pooler implements.
var supportedAuthTypes = map[string]bool{"any": true, "cert": true, "hba": true, "ldap": true, "md5": true, "pam": true, "plain": true, "scram-sha-256": true, "trust": true}

const (
	// Reasons a user can act on: what Go does instead.
	tls13Note = "Go's crypto/tls does not let the TLS 1.3 suites be chosen: it offers all three (AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305) and orders them by the CPU's AES support; the value is checked as OpenSSL would and otherwise ignored"
	dheNote   = "Go's crypto/tls has no finite-field DHE key exchange (ECDHE only, see client_tls_ecdhcurve), so there are no DH parameters to set; the value is validated and ignored"
	// pgturnstile needs no second process to use more cores.
	reusePortNote = "pgturnstile uses all cores in one process; so_reuseport is for rolling restarts and peering. Linux resets the connections still queued on a listener that closes unless net.ipv4.tcp_migrate_req = 1 (5.14+) moves them to another process of the port: set it for rolling restarts"
)

// EventLoopDefaultEnv, set to 1 or 0 in the environment, is the default
// of event_loop when the file does not set it: how the test suites (make
// test, PgBouncer's) run whole under either engine without a line in
// each of their configuration files (issue 35: both engines are tested
// alike). A file's event_loop line still wins.
const EventLoopDefaultEnv = "PGTURNSTILE_EVENT_LOOP_DEFAULT"

func init() {
	Keys = []Key{
		// Listening / process.
		{Name: "listen_addr", Kind: KindString, Doc: "comma-separated addresses to listen on for TCP, `*` = all; empty = Unix socket only",
			field: func(s *Settings) any { return &s.ListenAddr }},
		{Name: "listen_port", Kind: KindInt, Default: "6432", max: 65535, Doc: "TCP port and Unix socket suffix; 0 = any free port (pgturnstile extension, for tests)",
			field: func(s *Settings) any { return &s.ListenPort }},
		{Name: "listen_backlog", Kind: KindInt, Default: "128", Doc: "listen(2) backlog of the listeners (capped by net.core.somaxconn)", Note: "Go listens with somaxconn; pgturnstile then calls listen(2) again with this backlog, which Linux takes",
			field: func(s *Settings) any { return &s.ListenBacklog }},
		{Name: "unix_socket_dir", Kind: KindString, Default: "/tmp", Doc: "directory of the listening Unix socket; empty disables it",
			field: func(s *Settings) any { return &s.UnixSocketDir }},
		{Name: "unix_socket_mode", Kind: KindInt, Default: "0777", max: 07777, Doc: "file mode of the Unix socket",
			field: func(s *Settings) any { return &s.UnixSocketMode }},
		{Name: "unix_socket_group", Kind: KindString, Doc: "group (name or number) of the Unix socket; one that does not exist stops the start",
			field: func(s *Settings) any { return &s.UnixSocketGroup }},
		{Name: "user", Kind: KindString, Doc: "Unix user to switch to when started as root (`-u` wins); root is refused without it", Note: "switched after the listeners open (PgBouncer: before), so a port below 1024 works; setgroups/setgid/setuid apply to every thread (Go 1.16+)",
			field: func(s *Settings) any { return &s.User }},
		{Name: "pidfile", Kind: KindString, Doc: "PID file",
			field: func(s *Settings) any { return &s.Pidfile }},
		{Name: "logfile", Kind: KindString, Status: Partial, Doc: "log file, appended to (O_APPEND: logrotate's copytruncate works); closed and opened again, at the path in force, on RELOAD/SIGHUP (mv, then kill -HUP, rotates it)",
			Note:  "a file that cannot be opened again is PgBouncer's line (ERROR Cannot open logfile: 'PATH': REASON) and lines keep going to the one open (PgBouncer exits)",
			field: func(s *Settings) any { return &s.Logfile }},
		{Name: "conffile", Kind: KindString, Status: NotSupported, Doc: "config file to read on the next RELOAD (default: the file from the command line)", Note: "RELOAD always rereads the file given at start"},
		{Name: "service_name", Kind: KindString, Default: "pgbouncer", Status: NotSupported, Doc: "Windows service name", Note: "Windows services are not supported"},
		{Name: "job_name", Kind: KindString, Default: "pgbouncer", Status: NotSupported, Doc: "alias of service_name", Note: "Windows services are not supported"},
		{Name: "so_reuseport", Kind: KindBool, Default: "0", Doc: "set SO_REUSEPORT on TCP listeners: several processes share one port (rolling restarts: SIGTERM closes one's TCP listeners while the others accept)", Note: reusePortNote,
			field: func(s *Settings) any { return &s.SoReuseport }},
		{Name: "peer_id", Kind: KindInt, Default: "0", max: 16383, Doc: "id of this process in a peer group ([peers]); client cancel keys carry it, and a cancel request for another peer is forwarded there; 0 = peering off",
			field: func(s *Settings) any { return &s.PeerID }},

		// Authentication.
		{Name: "auth_type", Kind: KindEnum, Default: "md5", Values: authTypeValues, Status: Partial, Doc: "how clients authenticate",
			Note:  "trust, any, plain, md5, scram-sha-256, cert, hba and ldap are supported; pam needs a build with -tags pam (cgo and libpam), the default build refuses it at startup",
			field: func(s *Settings) any { return &s.AuthType }},
		{Name: "auth_file", Kind: KindString, Doc: "userlist.txt with user names and secrets",
			field: func(s *Settings) any { return &s.AuthFile }},
		{Name: "auth_hba_file", Kind: KindString, Doc: "pg_hba.conf-style file for auth_type=hba",
			field: func(s *Settings) any { return &s.AuthHBAFile }},
		{Name: "auth_ident_file", Kind: KindString, Doc: "user name maps for auth_hba_file's map= (cert and peer): `MAPNAME SYSTEM-USERNAME PG-USERNAME` lines, PG-USERNAME a name or all; read with auth_hba_file, for auth_type=hba",
			Note:  "regular expressions and +group are refused as errors, not taken literally (PgBouncer supports neither); a map= naming a map the file lacks is an error, so RELOAD keeps the rules in force",
			field: func(s *Settings) any { return &s.AuthIdentFile }},
		{Name: "auth_user", Kind: KindString, Doc: "user that runs auth_query for users missing from auth_file",
			field: func(s *Settings) any { return &s.AuthUser }},
		{Name: "auth_query", Kind: KindString, Default: DefaultAuthQuery, Doc: "query returning (name, secret) for a user",
			field: func(s *Settings) any { return &s.AuthQuery }},
		{Name: "auth_dbname", Kind: KindString, Doc: "[databases] entry in which auth_query runs",
			field: func(s *Settings) any { return &s.AuthDBName }, check: checkAuthDBName},
		{Name: "auth_ldap_options", Kind: KindString, Doc: "LDAP options for auth_type=ldap (the options of an auth_hba_file ldap line)",
			field: func(s *Settings) any { return &s.AuthLDAPOptions }},
		{Name: "scram_iterations", Kind: KindInt, Default: "4096", min: 1, max: 1 << 24, Doc: "iterations of the SCRAM verifier built for a plain-text auth_file password (and of the mock exchange for an unknown user); stored SCRAM secrets keep their own",
			Note:  "at most 16777216 (the bound on a stored secret's count); the verifier of a plain password is built once per (user, password, count) and cached",
			field: func(s *Settings) any { return &s.SCRAMIterations }},
		{Name: "admin_users", Kind: KindList, Doc: "users allowed to run every admin console command",
			field: func(s *Settings) any { return &s.AdminUsers }},
		{Name: "stats_users", Kind: KindList, Doc: "users allowed to run read-only admin console commands",
			field: func(s *Settings) any { return &s.StatsUsers }},

		// Pool sizing and limits.
		{Name: "pool_mode", Kind: KindEnum, Default: "session", Values: poolModeValues, Doc: "when a server is released: session, transaction or statement",
			field: func(s *Settings) any { return &s.PoolMode }},
		{Name: "max_client_conn", Kind: KindInt, Default: "100", Doc: "maximum client connections (admin console exempt)",
			field: func(s *Settings) any { return &s.MaxClientConn }},
		{Name: "default_pool_size", Kind: KindInt, Default: "20", Doc: "server connections per (database, user) pool; 0 = unlimited",
			field: func(s *Settings) any { return &s.DefaultPoolSize }},
		{Name: "min_pool_size", Kind: KindInt, Default: "0", Doc: "keep at least this many server connections per pool",
			field: func(s *Settings) any { return &s.MinPoolSize }},
		{Name: "reserve_pool_size", Kind: KindInt, Default: "0", Doc: "extra connections for a pool whose clients waited reserve_pool_timeout",
			field: func(s *Settings) any { return &s.ReservePoolSize }},
		{Name: "reserve_pool_timeout", Kind: KindDuration, Default: "5", Doc: "wait before the reserve pool is used (seconds); 0 disables",
			field: func(s *Settings) any { return &s.ReservePoolTimeout }},
		{Name: "max_db_connections", Kind: KindInt, Default: "0", Doc: "server connections per database across users; 0 = unlimited",
			field: func(s *Settings) any { return &s.MaxDBConnections }},
		{Name: "max_db_client_connections", Kind: KindInt, Default: "0", Doc: "client connections per database, checked at login (admin_users exempt on the console); 0 = unlimited",
			field: func(s *Settings) any { return &s.MaxDBClientConnections }},
		{Name: "max_user_connections", Kind: KindInt, Default: "0", Doc: "server connections per user across databases; 0 = unlimited",
			field: func(s *Settings) any { return &s.MaxUserConnections }},
		{Name: "max_user_client_connections", Kind: KindInt, Default: "0", Doc: "client connections per user across databases, checked at login (admin_users exempt on the console); 0 = unlimited",
			field: func(s *Settings) any { return &s.MaxUserClientConnections }},
		{Name: "server_round_robin", Kind: KindBool, Default: "0", Doc: "reuse servers round-robin instead of LIFO",
			field: func(s *Settings) any { return &s.ServerRoundRobin }},
		{Name: "max_prepared_statements", Kind: KindInt, Default: "200", Doc: "per-server LRU of protocol-level prepared statements in transaction/statement mode; 0 = off",
			field: func(s *Settings) any { return &s.MaxPreparedStatements }},
		{Name: "max_packet_size", Kind: KindInt, Default: "2147483647", max: 4294967295, Doc: "largest protocol message allowed through",
			field: func(s *Settings) any { return &s.MaxPacketSize }},
		{Name: "pkt_buf", Kind: KindInt, Default: "4096", Status: Partial, Doc: "internal packet buffer size", Note: "buffers are sized by the Go implementation; it caps an admin console query, as PgBouncer's console takes none larger than its packet buffer (FATAL 54000, the client is closed)",
			field: func(s *Settings) any { return &s.PktBuf }},
		{Name: "sbuf_loopcnt", Kind: KindInt, Default: "5", Status: NotSupported, Doc: "fairness: buffer loops per connection per event", Note: "not needed: one goroutine per connection"},

		// Startup parameters / session state.
		{Name: "track_extra_parameters", Kind: KindList, Default: "IntervalStyle,search_path,default_transaction_read_only", Doc: "extra GUC_REPORT parameters that follow the client from server to server (PgBouncer 1.26 default)",
			field: func(s *Settings) any { return &s.TrackExtraParameters }},
		{Name: "ignore_startup_parameters", Kind: KindList, Doc: "startup parameters accepted and dropped",
			field: func(s *Settings) any { return &s.IgnoreStartupParameters }},
		{Name: "application_name_add_host", Kind: KindBool, Default: "0", Doc: "append the client address to application_name at login",
			field: func(s *Settings) any { return &s.ApplicationNameAddHost }},
		{Name: "disable_pqexec", Kind: KindBool, Default: "0", Doc: "reject the simple query protocol",
			field: func(s *Settings) any { return &s.DisablePQExec }},
		{Name: "server_reset_query", Kind: KindString, Default: "DISCARD ALL", Doc: "query run when a server is released in session mode",
			field: func(s *Settings) any { return &s.ServerResetQuery }},
		{Name: "server_reset_query_always", Kind: KindBool, Default: "0", Doc: "run server_reset_query in every pool mode",
			field: func(s *Settings) any { return &s.ServerResetQueryAlways }},
		{Name: "server_check_query", Kind: KindString, Default: EmptyQueryCheck, Doc: "liveness check for servers idle longer than server_check_delay; `<empty>` = send an empty query, empty = no check",
			field: func(s *Settings) any { return &s.ServerCheckQuery }},
		{Name: "server_check_delay", Kind: KindDuration, Default: "30", Doc: "idle time after which a server is checked before reuse (seconds); 0 = check on every reuse",
			field: func(s *Settings) any { return &s.ServerCheckDelay }},
		{Name: "login_notify_message", Kind: KindString, Doc: "NOTICE sent to clients after login",
			field: func(s *Settings) any { return &s.LoginNotifyMessage }},
		{Name: "query_wait_notify", Kind: KindDuration, Default: "5", Doc: "send a NOTICE to clients queued this long (seconds); 0 = off",
			field: func(s *Settings) any { return &s.QueryWaitNotify }},

		// Timeouts.
		{Name: "server_lifetime", Kind: KindDuration, Default: "3600", Doc: "close unused servers older than this (seconds); 0 = single use",
			field: func(s *Settings) any { return &s.ServerLifetime }},
		{Name: "server_idle_timeout", Kind: KindDuration, Default: "600", Doc: "close servers idle longer than this (seconds); 0 = never",
			field: func(s *Settings) any { return &s.ServerIdleTimeout }},
		{Name: "server_connect_timeout", Kind: KindDuration, Default: "15", Doc: "deadline for connecting and logging in to a server (seconds)",
			field: func(s *Settings) any { return &s.ServerConnectTimeout }},
		{Name: "server_login_retry", Kind: KindDuration, Default: "15", Doc: "wait after a failed server login before retrying (seconds)",
			field: func(s *Settings) any { return &s.ServerLoginRetry }},
		{Name: "server_fast_close", Kind: KindBool, Default: "0", Doc: "session mode: close close_needed servers at the end of the transaction",
			field: func(s *Settings) any { return &s.ServerFastClose }},
		{Name: "client_login_timeout", Kind: KindDuration, Default: "60", Doc: "deadline for a client to finish login (seconds)",
			field: func(s *Settings) any { return &s.ClientLoginTimeout }},
		{Name: "autodb_idle_timeout", Kind: KindDuration, Default: "3600", Doc: "free idle databases created from `*` (seconds); 0 = never",
			field: func(s *Settings) any { return &s.AutodbIdleTimeout }},
		{Name: "pool_idle_timeout", Kind: KindDuration, Default: "0", Doc: "free pools with no clients and no servers after this long (seconds); 0 = off",
			field: func(s *Settings) any { return &s.PoolIdleTimeout }},
		{Name: "query_timeout", Kind: KindDuration, Default: "0", Doc: "close the server and client when a query runs longer (seconds); 0 = off",
			field: func(s *Settings) any { return &s.QueryTimeout }},
		{Name: "query_wait_timeout", Kind: KindDuration, Default: "120", Doc: "maximum wait for a server (seconds); 0 = forever",
			field: func(s *Settings) any { return &s.QueryWaitTimeout }},
		{Name: "cancel_wait_timeout", Kind: KindDuration, Default: "10", Status: Partial, Doc: "maximum wait of a cancel request for a server (seconds)",
			Note:  "bounds the cancel's own connection to Postgres (the pooler sends each cancel on a new connection); 0 uses server_connect_timeout instead of waiting forever",
			field: func(s *Settings) any { return &s.CancelWaitTimeout }},
		{Name: "client_idle_timeout", Kind: KindDuration, Default: "0", Doc: "close clients idle longer than this (seconds); 0 = off",
			field: func(s *Settings) any { return &s.ClientIdleTimeout }},
		{Name: "idle_transaction_timeout", Kind: KindDuration, Default: "0", Doc: "close clients idle in a transaction longer than this (seconds); 0 = off",
			field: func(s *Settings) any { return &s.IdleTransactionTimeout }},
		{Name: "transaction_timeout", Kind: KindDuration, Default: "0", Doc: "close clients whose transaction is open longer than this (seconds); 0 = off",
			field: func(s *Settings) any { return &s.TransactionTimeout }},
		{Name: "suspend_timeout", Kind: KindDuration, Default: "10", Doc: "how long SUSPEND (and so -R) waits for clients to come to rest between transactions (seconds)",
			Note: "a client still in a transaction then is not dropped, as PgBouncer drops it: it stays with the old process, which serves it until it leaves", field: func(s *Settings) any { return &s.SuspendTimeout }},
		{Name: "stats_period", Kind: KindDuration, Default: "60", Doc: "averaging period of SHOW STATS and the log stats line (seconds)",
			field: func(s *Settings) any { return &s.StatsPeriod }},

		// DNS.
		{Name: "dns_max_ttl", Kind: KindDuration, Default: "15", Doc: "how long a server host name's DNS answer is kept (seconds; the record's TTL is ignored); 0 = not kept",
			field: func(s *Settings) any { return &s.DNSMaxTTL }},
		{Name: "dns_nxdomain_ttl", Kind: KindDuration, Default: "15", Doc: "how long a failed DNS lookup is kept (seconds): logins to the name fail at once meanwhile",
			field: func(s *Settings) any { return &s.DNSNXDomainTTL }},
		{Name: "dns_zone_check_period", Kind: KindDuration, Default: "0", Doc: "period of the check of the SOA serials of the cached names' zones (seconds); a zone whose serial moved on has its names looked up again; 0 = off", Note: "PgBouncer needs its c-ares build for it; pgturnstile sends the SOA queries itself, over UDP, to the nameservers of resolv_conf or /etc/resolv.conf, and looks the names up again at their next use",
			field: func(s *Settings) any { return &s.DNSZoneCheckPeriod }},
		{Name: "resolv_conf", Kind: KindString, Status: Partial, Doc: "alternative resolv.conf: its nameservers answer the server host name lookups", Note: "Go's resolver cannot read another file: the nameserver lines of this one are used (Go's own resolver sends its queries there); search, domain and options still come from /etc/resolv.conf, and /etc/hosts is read first",
			field: func(s *Settings) any { return &s.ResolvConf }},

		// TLS.
		{Name: "client_tls_sslmode", Kind: KindEnum, Default: "disable", Values: sslModeValues, Doc: "TLS mode towards clients",
			field: func(s *Settings) any { return &s.ClientTLSSSLMode }},
		{Name: "client_tls_key_file", Kind: KindString, Doc: "private key for client TLS",
			field: func(s *Settings) any { return &s.ClientTLSKeyFile }},
		{Name: "client_tls_cert_file", Kind: KindString, Doc: "certificate for client TLS",
			field: func(s *Settings) any { return &s.ClientTLSCertFile }},
		{Name: "client_tls_ca_file", Kind: KindString, Doc: "CA to verify client certificates",
			field: func(s *Settings) any { return &s.ClientTLSCAFile }},
		{Name: "client_tls_protocols", Kind: KindString, Default: "secure", Doc: "allowed TLS versions towards clients",
			field: func(s *Settings) any { return &s.ClientTLSProtocols }},
		{Name: "client_tls_ciphers", Kind: KindString, Default: "default", Doc: "TLS ≤1.2 ciphers towards clients",
			field: func(s *Settings) any { return &s.ClientTLSCiphers }},
		{Name: "client_tls13_ciphers", Kind: KindString, Status: NotSupported, Doc: "TLS 1.3 cipher suites towards clients", Note: tls13Note},
		{Name: "client_tls_ecdhcurve", Kind: KindString, Default: "auto", Doc: "ECDH curve towards clients: auto or none (the library's choice) or one curve (prime256v1, secp384r1, secp521r1, X25519; Go's P-256, P-384, P-521 too)", Note: "auto is Go's choice, which includes the hybrid X25519MLKEM768",
			field: func(s *Settings) any { return &s.ClientTLSECDHCurve }},
		{Name: "client_tls_dheparams", Kind: KindString, Default: "auto", Status: NotSupported, Doc: "DHE parameters towards clients", Note: dheNote},
		{Name: "server_tls_sslmode", Kind: KindEnum, Default: "prefer", Values: sslModeValues, Doc: "TLS mode towards servers",
			field: func(s *Settings) any { return &s.ServerTLSSSLMode }},
		{Name: "server_tls_ca_file", Kind: KindString, Doc: "CA to verify server certificates",
			field: func(s *Settings) any { return &s.ServerTLSCAFile }},
		{Name: "server_tls_key_file", Kind: KindString, Doc: "client key presented to servers",
			field: func(s *Settings) any { return &s.ServerTLSKeyFile }},
		{Name: "server_tls_cert_file", Kind: KindString, Doc: "client certificate presented to servers",
			field: func(s *Settings) any { return &s.ServerTLSCertFile }},
		{Name: "server_tls_protocols", Kind: KindString, Default: "secure", Doc: "allowed TLS versions towards servers",
			field: func(s *Settings) any { return &s.ServerTLSProtocols }},
		{Name: "server_tls_ciphers", Kind: KindString, Default: "default", Doc: "TLS ≤1.2 ciphers towards servers",
			field: func(s *Settings) any { return &s.ServerTLSCiphers }},
		{Name: "server_tls13_ciphers", Kind: KindString, Status: NotSupported, Doc: "TLS 1.3 cipher suites towards servers", Note: tls13Note},

		// Logging.
		{Name: "syslog", Kind: KindBool, Default: "0", Doc: "log to syslog (as well as stderr/logfile), LOG level and above; RELOAD/SIGHUP reconnects with the settings in force",
			field: func(s *Settings) any { return &s.Syslog }},
		{Name: "syslog_ident", Kind: KindString, Default: "pgbouncer", Doc: "syslog program name",
			field: func(s *Settings) any { return &s.SyslogIdent }},
		{Name: "syslog_facility", Kind: KindString, Default: "daemon", Doc: "syslog facility: auth, authpriv, daemon, user, local0-7 (others: daemon)",
			field: func(s *Settings) any { return &s.SyslogFacility }},
		{Name: "log_connections", Kind: KindBool, Default: "1", Doc: "log successful logins",
			field: func(s *Settings) any { return &s.LogConnections }},
		{Name: "log_disconnections", Kind: KindBool, Default: "1", Doc: "log disconnections with the reason",
			field: func(s *Settings) any { return &s.LogDisconnections }},
		{Name: "log_pooler_errors", Kind: KindBool, Default: "1", Doc: "log errors the pooler sends to clients",
			field: func(s *Settings) any { return &s.LogPoolerErrors }},
		{Name: "log_stats", Kind: KindBool, Default: "1", Doc: "log a stats line every stats_period", Note: "PgBouncer's `stats: N xacts/s, …` line, all pools' averages over the period",
			field: func(s *Settings) any { return &s.LogStats }},
		{Name: "verbose", Kind: KindInt, Default: "0", Doc: "log verbosity, added to -v's: 1 logs DEBUG lines, 2 NOISE lines too",
			field: func(s *Settings) any { return &s.Verbose }},

		// Low-level TCP.
		{Name: "tcp_defer_accept", Kind: KindInt, Default: "1", Doc: "TCP_DEFER_ACCEPT on the TCP listeners (Linux; non-zero = on, set to 1 s as PgBouncer does); a change applies to the listeners open",
			field: func(s *Settings) any { return &s.TCPDeferAccept }},
		{Name: "tcp_socket_buffer", Kind: KindInt, Default: "0", Doc: "SO_SNDBUF/SO_RCVBUF of client and server TCP connections; 0 = OS default",
			Note:  "set on the listening sockets and on server sockets before connect, as PgBouncer does, so the TCP window scale fits the buffer; a change re-applies it to the listeners open (back to 0 takes a restart)",
			field: func(s *Settings) any { return &s.TCPSocketBuffer }},
		{Name: "tcp_keepalive", Kind: KindBool, Default: "1", Doc: "SO_KEEPALIVE on client and server TCP connections, with the OS's timings unless tcp_keepidle/intvl/cnt are set", Note: "Go's own keepalive timings (15 s) are not used",
			field: func(s *Settings) any { return &s.TCPKeepalive }},
		{Name: "tcp_keepcnt", Kind: KindInt, Default: "0", Doc: "TCP_KEEPCNT; 0 = OS default",
			field: func(s *Settings) any { return &s.TCPKeepCnt }},
		{Name: "tcp_keepidle", Kind: KindInt, Default: "0", Doc: "TCP_KEEPIDLE (seconds); 0 = OS default",
			field: func(s *Settings) any { return &s.TCPKeepIdle }},
		{Name: "tcp_keepintvl", Kind: KindInt, Default: "0", Doc: "TCP_KEEPINTVL (seconds); 0 = OS default",
			field: func(s *Settings) any { return &s.TCPKeepIntvl }},
		{Name: "tcp_user_timeout", Kind: KindInt, Default: "0", Doc: "TCP_USER_TIMEOUT in milliseconds (Linux); 0 = OS default",
			field: func(s *Settings) any { return &s.TCPUserTimeout }},

		// pgturnstile extensions.
		{Name: "limit_evict_grace", Kind: KindDuration, Default: "0", Doc: "after a limit is lowered (SET USER, SET POOL, RELOAD), how long a busy server over it may stay with its client before it is evicted (the client gets FATAL evicted); 0 = never, it closes when released", Note: "pgturnstile extension",
			field: func(s *Settings) any { return &s.LimitEvictGrace }},
		{Name: "metrics_addr", Kind: KindString, Doc: "address (host:port) of the Prometheus /metrics listener; empty = off", Note: "pgturnstile extension; the documented port is 6490, which no exporter in Prometheus' port allocations uses (9127, the README's earlier example, is pgbouncer_exporter's)",
			field: func(s *Settings) any { return &s.MetricsAddr }},
		{Name: "log_format", Kind: KindEnum, Default: "text", Values: []string{"text", "json"}, Doc: "text: PgBouncer's log lines (local time and zone, pid, level, C-n/S-n prefix); json: one slog JSON object per line with the same fields (time, level, msg, pid, conn, db, user, addr)",
			Note:  "pgturnstile extension, for log pipelines; applies to the logfile and stderr (syslog keeps PgBouncer's text), from the next line after a RELOAD or SET",
			field: func(s *Settings) any { return &s.LogFormat }},
		{Name: "event_loop", Kind: KindBool, Default: "0", Doc: "1: a plain-TCP client in transaction or statement mode rests on its core's event loop between transactions, which runs its autocommit requests, queues it for a server and relays the reply without waking a goroutine; 0: a goroutine per active client, as before",
			Note:  "pgturnstile extension, off by default until it is measured cheaper than the goroutine engine (docs/architecture.md); a RELOAD turning it off sends clients back to goroutines at their next request; PGTURNSTILE_EVENT_LOOP_DEFAULT=1 (or 0) in the environment changes the default, not a line in the file (how make test runs its integration tests under each engine)",
			field: func(s *Settings) any { return &s.EventLoop }},
		{Name: "admission_file", Kind: KindString, Doc: "TOML file with the admission policy (priorities, classification, fair-share tree)", Note: "pgturnstile extension",
			field: func(s *Settings) any { return &s.AdmissionFile }},
		{Name: "shard_file", Kind: KindString, Doc: "TOML file with the sharding router's map: clusters (database names clients connect to), colocations of tables by key, logical shard ranges to [databases] entries", Note: "pgturnstile extension; docs/sharding.md",
			field: func(s *Settings) any { return &s.ShardFile }},
		{Name: "shard_source", Kind: KindEnum, Default: "file", Values: []string{"file", "etcd"}, Doc: "where the sharding router's map comes from: file (shard_file, read at start and RELOAD) or etcd (the key <shard_etcd_prefix>/map, watched: every change is checked and applied at once)", Note: "pgturnstile extension; docs/sharding.md, \"The map in etcd\"",
			field: func(s *Settings) any { return &s.ShardSource }},
		{Name: "shard_etcd_endpoints", Kind: KindList, Doc: "etcd endpoints for shard_source = etcd, comma-separated (http://host:2379, https://host:2379 or host:port)", Note: "pgturnstile extension",
			field: func(s *Settings) any { return &s.ShardEtcdEndpoints }},
		{Name: "shard_etcd_prefix", Kind: KindString, Default: "/pgturnstile", Doc: "key prefix in etcd: the map is <prefix>/map, each instance publishes the revision it serves under <prefix>/instances/<shard_etcd_instance>", Note: "pgturnstile extension", check: checkEtcdPrefix,
			field: func(s *Settings) any { return &s.ShardEtcdPrefix }},
		{Name: "shard_etcd_cafile", Kind: KindString, Doc: "CA certificates that verify etcd's server certificate (TLS to etcd)", Note: "pgturnstile extension",
			field: func(s *Settings) any { return &s.ShardEtcdCAFile }},
		{Name: "shard_etcd_certfile", Kind: KindString, Doc: "client certificate presented to etcd (with shard_etcd_keyfile)", Note: "pgturnstile extension",
			field: func(s *Settings) any { return &s.ShardEtcdCertFile }},
		{Name: "shard_etcd_keyfile", Kind: KindString, Doc: "private key of shard_etcd_certfile", Note: "pgturnstile extension",
			field: func(s *Settings) any { return &s.ShardEtcdKeyFile }},
		{Name: "shard_etcd_user", Kind: KindString, Doc: "etcd user (etcd authentication), with shard_etcd_password", Note: "pgturnstile extension",
			field: func(s *Settings) any { return &s.ShardEtcdUser }},
		{Name: "shard_etcd_password", Kind: KindString, Doc: "password of shard_etcd_user", Note: "pgturnstile extension; SHOW CONFIG prints it as ********",
			field: func(s *Settings) any { return &s.ShardEtcdPassword }},
		{Name: "shard_etcd_instance", Kind: KindString, Doc: "this instance's name under <shard_etcd_prefix>/instances/; empty = hostname:listen_port", Note: "pgturnstile extension", check: checkEtcdInstance,
			field: func(s *Settings) any { return &s.ShardEtcdInstance }},
		{Name: "server_connect_rate", Kind: KindInt, Default: "20", Doc: "new server connections per second per pool (token bucket of server_connect_burst); 0 = unlimited",
			Note:  "pgturnstile extension: spreads refills after churn (pg_terminate_backend, restarts) so Postgres is not hit by a login storm; a pool that needs more waits, counted in pgturnstile_server_connect_wait_seconds_total",
			field: func(s *Settings) any { return &s.ServerConnectRate }},
		{Name: "server_connect_burst", Kind: KindInt, Default: "4", min: 1, Doc: "server connections a pool may start at once before server_connect_rate paces it",
			Note:  "pgturnstile extension; the bucket starts full",
			field: func(s *Settings) any { return &s.ServerConnectBurst }},
		{Name: "server_max_parallel_connects", Kind: KindInt, Default: "4", Doc: "server logins in flight per pool; 0 = unlimited",
			Note:  "pgturnstile extension: a slow or overloaded Postgres gets at most this many concurrent logins from one pool",
			field: func(s *Settings) any { return &s.ServerMaxParallelConnects }},
		{Name: "server_close_rate", Kind: KindInt, Default: "10", Doc: "closes per second per pool of healthy servers (server_idle_timeout, server_lifetime, lowered limits, RECONNECT), bursts of the same size; 0 = unlimited",
			Note:  "pgturnstile extension: broken servers and PAUSE/KILL close at once; a deferred close leaves the server in the pool until a later janitor pass",
			field: func(s *Settings) any { return &s.ServerCloseRate }},
		{Name: "server_lifetime_jitter", Kind: KindFloat, Default: "0.1", fmax: 1, Doc: "each server's lifetime is server_lifetime × (1 ± this fraction), drawn once when it is created; 0 = exact",
			Note:  "pgturnstile extension: servers opened together do not all expire together",
			field: func(s *Settings) any { return &s.ServerLifetimeJitter }},
		{Name: "client_message_timeout", Kind: KindDuration, Default: "0", Doc: "close a client that has sent the 5-byte header of a protocol message and does not send the rest within this long (seconds), with FATAL client_message_timeout; 0 = off",
			Note:  "pgturnstile extension. Whatever its value, no server is taken for a message until the whole message has arrived (the first 4 KiB of a larger one): a client that sends a header and stalls holds no server, where PgBouncer links one at once. A stall while linked leaves the server clean (rolled back, back in the pool) unless part of a message over 4 KiB had been passed on, which closes it",
			field: func(s *Settings) any { return &s.ClientMessageTimeout }},
		{Name: "client_drain_max_bytes", Kind: KindInt, Default: "1048576", Doc: "result bytes discarded for a client that left mid-result before its query is cancelled (then rolled back and the server reused)",
			Note:  "pgturnstile extension: 1 MiB takes about a millisecond to discard and covers nearly all results; beyond it a cancel is cheaper than reading on. A query with no output is cancelled after 100 ms",
			field: func(s *Settings) any { return &s.ClientDrainMaxBytes }},
		{Name: "max_held_message_size", Kind: KindInt, Default: "67108864", max: 2147483647, Doc: "largest client message the pooler holds whole to look inside: a Parse in transaction or statement mode with max_prepared_statements > 0 (the statement is registered, or remembered for a later Bind of the unnamed statement). A larger named Parse gets ERROR 54000 and the client stays connected; a larger unnamed one is streamed to the server and not remembered",
			Note:  "pgturnstile extension: PgBouncer holds such a Parse whole up to max_packet_size. Describe and Close are decoded only up to 64 KiB (statement names are capped there) and streamed beyond",
			field: func(s *Settings) any { return &s.MaxHeldMessageSize }},
		{Name: "held_message_budget", Kind: KindInt, Default: "536870912", Doc: "bytes of client messages held whole at once, all clients together (a Parse being received, an admin console query); a client that would pass it gets FATAL 53200 and is closed, and every other client goes on; 0 = no limit",
			Note:  "pgturnstile extension: with max_held_message_size it bounds what clients can make the pooler hold, whatever the length fields they send claim",
			field: func(s *Settings) any { return &s.HeldMessageBudget }},
		{Name: "prepared_statement_budget", Kind: KindInt, Default: "536870912", Doc: "bytes of statement text the pooler keeps for prepared statements (the shared statements in transaction and statement mode, and each client's last unnamed Parse); past it a new named statement gets ERROR 53200 and an unnamed one is not remembered; 0 = no limit",
			Note:  "pgturnstile extension: PgBouncer keeps every statement of every client without a bound",
			field: func(s *Settings) any { return &s.PreparedStatementBudget }},
	}
	sort.Slice(Keys, func(i, j int) bool { return Keys[i].Name < Keys[j].Name })
	keyIndex = make(map[string]int, len(Keys))
	for i := range Keys {
		k := &Keys[i]
		k.Reloadable = !bootOnly[k.Name]
		if k.Kind == KindInt && k.max == 0 {
			k.max = 1<<31 - 1
		}
		if _, dup := keyIndex[k.Name]; dup {
			panic("BUG: duplicate config key " + k.Name)
		}
		keyIndex[k.Name] = i
		if k.Name == "event_loop" {
			if v := os.Getenv(EventLoopDefaultEnv); v == "0" || v == "1" {
				k.Default = v
			}
		}
		if _, err := k.parse(k.Default); err != nil {
			panic("BUG: bad default for " + k.Name + ": " + err.Error())
		}
	}
}
