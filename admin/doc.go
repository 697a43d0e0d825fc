// Package admin is the admin console: the virtual database "pgbouncer"
// that DBAs, runbooks and pgbouncer_exporter talk to. It answers exactly as
// PgBouncer 1.25/1.26 does, plus the runtime throttling commands of
// Cloudflare's PgBouncer fork (SET USER, SET POOL).
//
// # Who does what
//
// The pooler accepts the connection, authenticates it, decides the role
// with RoleFor (or RoleAdmin for the Unix-socket login as "pgbouncer" from
// the pooler's own OS user), sends the welcome, and then calls Serve on the
// client's goroutine. Serve reads messages until Terminate, EOF or a
// protocol error; it never reaches into pooler state. Everything it shows
// or changes goes through the Console interface (console.go): snapshots
// (Pools, Clients, Servers, Databases, Users, Stats, Lists, State, Config)
// and commands (Pause, Reload, SetUser, ...). A command that blocks in
// PgBouncer (PAUSE, WAIT_CLOSE) blocks in its Console method; the reply is
// sent when it returns.
//
// # Protocol
//
// Simple query protocol only. Each Query holds one statement, optionally
// ending in ';'. Parse, Bind or Execute get ERROR 08P01 "extended query
// protocol not supported by admin console", any other message "unsupported
// packet type for admin console: <type>"; as in PgBouncer that ERROR and a
// ReadyForQuery are followed by FATAL "bad packet" and the close. Drivers that always use the extended protocol (pgx
// without QueryExecModeSimpleProtocol, JDBC, asyncpg, Npgsql) cannot use the
// console, psql and lib/pq can.
//
// # Grammar
//
// ParseCommand follows PgBouncer's three regexes (a command word with an
// optional argument; SET key = 'string'; SET key = word), case-insensitive,
// then the fork's two (SET USER name = 'settings', SET POOL user.db =
// 'settings'), in that order; pgturnstile's PAUSE SHARD and RESUME SHARD
// cluster.colo [range] (VerbPauseShard, VerbResumeShard; tags "PAUSE
// SHARD", "RESUME SHARD") are matched first. A word is letters, digits, '_', and, as in
// the fork, '.' and '-', or a double-quoted name ("" for a quote). Tokens
// longer than PgBouncer's buffers (command 15 bytes, argument 63, value
// 255, fork name 127) answer "bad arguments"; anything unmatched "invalid
// command '<query>', use SHOW HELP;". SELECT is an alias of SHOW. SHOW and
// SET of client_encoding, default_transaction_isolation,
// standard_conforming_strings, datestyle, timezone and extra_float_digits
// are faked for drivers (SHOW answers a value, SET a NOTICE "SET ignored").
//
// # Roles
//
// stats_users may run SHOW (except SHOW FDS); everything else needs
// admin_users, else ERROR "admin access needed". As in PgBouncer, syntax
// checks of RELOAD, SUSPEND and SHUTDOWN's argument come before the role
// check, the other argument checks after it. Under auth_type=any every
// login is accepted and those not in admin_users get the stats role.
//
// # Replies
//
// Errors are severity ERROR (the session goes on) with SQLSTATE 08P01,
// except a failed RELOAD (F0000, "RELOAD failed, see logs for additional
// details", the reason as DETAIL). A Console error of type *Error is sent as
// it is; any SET failure reads "SET failed" with the reason as DETAIL.
// Command tags are the command word (PAUSE, KILL_CLIENT, ...), SHOW for
// every SHOW, "SET key=value" for SET and "SET name=settings" for SET USER /
// SET POOL. SHUTDOWN without a mode is not answered: the process is going
// away.
//
// # SHOW output
//
// Column names, order and type OIDs are PgBouncer's (text; int4; int8;
// numeric for the statistics; connection times as text, formatted
// "2006-01-02 15:04:05 MST" in local time); the golden files in
// testdata/admin hold each list. Extensions go at the end only: SHOW POOLS
// ends with the fork's pool_size. SHOW USERS uses PgBouncer 1.25's list
// (which contains the fork's max_user_connections), with its sizes printed
// "%9d" or "" when unset. SHOW STATS has 1.26's *_client_login_count
// columns. SHOW FDS has PgBouncer's columns and pgturnstile_state last
// (fds.go: over the online restart's session each row carries its
// descriptor). Subjects pgturnstile has nothing for answer with their
// columns and no rows: MEM (no slab caches),
// ACTIVE_SOCKETS (buffer state is not exposed; SHOW SOCKETS prints 0 in
// the buffer columns). DNS_HOSTS and DNS_ZONES list the pooler's DNS
// cache of server host names (dns.go, a Console that is a DNSCache).
//
// # SET USER and SET POOL
//
// SET USER <user> = 'key=value ...' takes pool_mode, max_user_connections,
// pool_size, reserve_pool_size and max_user_client_connections; SET POOL
// <user>.<database> = 'pool_size=n' takes the user first (SHOW POOLS prints
// the database first) and only pool_size. The settings string is validated
// here (ParseUserSettings, ParsePoolSettings, SplitPoolName: the fork's
// strict rules) and passed on unchanged to Console.SetUser /
// Console.SetPool, which apply it with the fork's replace-not-merge
// semantics, by name: a user or database the pooler does not know yet is
// accepted, and the Console answers with Notices (no such user, no such
// database) that Serve sends before the tag.
//
// # Audit lines
//
// Each command that changes something is logged once it passed the role
// check, in PgBouncer's words ("PAUSE 'appdb' command issued", audit.go),
// on the logger ServeFDs is given, which carries the console client's
// identity.
//
// # Online restart
//
// SUSPEND, SHOW FDS and the SHUTDOWN after them are PgBouncer's takeover
// conversation (fds.go): a session of the pooler's own OS user over the
// Unix socket gets SHOW FDS's descriptors with its rows (ServeFDs), and
// its SHUTDOWN hands them over (Console.HandOver) instead of ending the
// process; if it ends without that SHUTDOWN the service resumes.
package admin
