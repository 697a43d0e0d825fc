// Package pooler is the connection pooler: listeners, client sessions,
// server connections and the pools that share them.
//
// # Files
//
//	service.go         Service: the client registry (cancel keys), pools by
//	                   (database, user); clients' goroutines reused
//	                   (internal/workers)
//	listen.go          the listeners: opened or handed over, accepted on,
//	                   closed; listen_backlog, tcp_socket_buffer,
//	                   tcp_defer_accept again at RELOAD/SET (the options,
//	                   tcp_* on every connection, so_reuseport:
//	                   internal/sockopt; raw accept, the Unix socket guard:
//	                   internal/listener)
//	apply.go           Service.Apply: a configuration generation derived,
//	                   then published by one store (the TLS in force,
//	                   applied only as a consistent set: internal/tlsset)
//	console.go         the admin console's view of the service (consoleView)
//	                   and its SHOW snapshots (SHOW SHARDS and ROUTES too)
//	console_commands.go the console's commands (PAUSE, RESUME, KILL, RELOAD,
//	                   SET …) and the per-database state PAUSE and DISABLE
//	                   leave (dbState); their texts are admin's
//	clientstate.go     client states and the pool's client counts, one writer
//	client.go          client: one client connection's session
//	login.go           the startup packet, TLS, the welcome (the options
//	                   parameter read by internal/startupopts; TLS over raw
//	                   sockets: internal/tlsconn)
//	login_auth.go      authentication by auth_type or hba rule against the
//	                   user store, auth_query, the pooler's side of auth.Conn
//	directtls.go       direct TLS (sslnegotiation=direct): the first byte
//	                   and ALPN postgresql (internal/tlsconn)
//	loginpeer.go       cert and peer logins, with auth_ident_file maps
//	                   (auth.CertLogin; the maps: auth.LoadIdentMaps)
//	login_external.go  logins an outside service checks: LDAP, PAM
//	serve.go           serving a logged-in client: its read loop, the
//	                   link's route and forward (a Query's mapping too)
//	clientlife.go      a client's start after login, its ends (fail, leave,
//	                   bad input, timeouts), the requests serve refuses
//	link.go            link: a client's time with a server, the receiver of
//	                   the transaction path; linking (gate, checkout), the
//	                   transaction's pool (linkTo), relayOrPump, unlinking
//	linkparams.go      a server's tracked parameters set to the client's
//	shardroute.go      the sharding router's glue (shard_file; the rules:
//	                   package shard; a client's routing state — pins, a
//	                   held BEGIN, its statements' routing, a batch's
//	                   decision: package shard/session): a login to a
//	                   cluster's name, each statement decided and the
//	                   transaction's pool chosen at route; a
//	                   session-mode session pinned by its first deciding
//	                   statement, released as in transaction mode before
//	shardtx.go         a sharded cluster's transactions: a BEGIN held until
//	                   the first routable statement, what the pooler
//	                   answers itself, a transaction held to its shard,
//	                   refusals (0A000)
//	shardbatch.go      an extended-protocol batch routed whole by its first
//	                   deciding Bind, read on while nothing decides; a
//	                   batch of transaction control only answered
//	shardscatter.go    a read on every shard at once, its rows concatenated
//	                   (shard=all, on_missing_key = scatter), as a Query or
//	                   an unnamed extended batch; shard=all's
//	                   statements on each database in turn
//	shardpause.go      PAUSE SHARD / RESUME SHARD on the routing path:
//	                   a transaction waits while the registry (package
//	                   shard/pause) holds its span; the console commands
//	                   and the scan PAUSE SHARD waits on
//	shardsource.go     a map from a source other than shard_file
//	                   (shard_source = etcd, package shard/etcdsource):
//	                   ApplyShardMap, its recheck at RELOAD, SHOW
//	                   SHARD_INSTANCES and the source's metrics
//	pump.go            relaying a linked server's replies (pumpRun);
//	                   ReadyForQuery and the release (afterReady; what
//	                   a link has sent and been answered, the release
//	                   rule: internal/linkstate)
//	pump_messages.go   the other server messages the pump looks inside
//	                   (ParameterStatus, COPY, errors, the mapping's)
//	pump_lost.go       a link that ends badly: its server lost, query_timeout,
//	                   transaction_timeout
//	drain.go           bringing a server back after its client left (the
//	                   next step: internal/linkstate)
//	prepared.go        the prepared-statement mapping in outline; the
//	                   replies a link owes (opQueue) (the statement
//	                   registry, servers' statement caches, shape epochs:
//	                   internal/stmtcache)
//	relay_prepared.go  Parse/Bind/Describe/Close with statement names
//	                   mapped to the server's
//	relay_rewrite.go   rewritten messages to a server, long texts spliced in
//	                   by reference
//	relay_replies.go   the mapping's bookkeeping of server replies; the
//	                   client's statement names
//	relay_retry.go     statements whose plan went stale (a migration): a shape
//	                   epoch per statement, which makes every server's older
//	                   copy prepared again and refuses clients' older names
//	                   with 0A000; the first request of an implicit
//	                   transaction sent again once
//	relay_unlinked.go  what serve answers with no server linked
//	loop.go            the event loop: a client between transactions rests
//	                   on its socket's poller (internal/netpoll, one per
//	                   core), which runs a whole request with serve's
//	                   stages, a server taken idle or queued for without
//	                   blocking (the grant posts to the poller), and
//	                   relays the reply with pumpRun when it is in whole;
//	                   what it cannot do without waiting goes to a
//	                   goroutine
//	park.go            idle clients parked as bare descriptors: when, and
//	                   how they resume (the epoll set: internal/parking)
//	suspend.go         SUSPEND/RESUME: accept nothing, read nothing, every
//	                   client that can move parked between transactions (a
//	                   session-mode client with its idle server)
//	takeover.go        online restart, the old process's side: SHOW FDS's
//	                   rows of parked clients and idle servers, the
//	                   hand-over (-R's conversation, the rows' encoding and
//	                   checks, listener rows, descriptors: internal/takeover)
//	takeover_adopt.go  online restart, the new process's side: what was
//	                   handed over checked against the configuration and
//	                   adopted as its own clients and servers
//	metricsserve.go    metrics_addr's listener, which an online restart
//	                   hands over
//	pool.go            serverPool: checkout (acquire), release, and the
//	                   server states and the pool's server lists, one
//	                   writer (setServerStateLocked)
//	waitqueue.go       the pool's clients waiting for a server, in order
//	pool_grow.go       servers opened for waiters; failed logins told
//	pool_params.go     the parameters a pool's clients log in with
//	pool_connect.go    a server's login and its three endings; the pool's
//	                   credentials; servers doomed by a TLS change
//	pool_target.go     where a pool's servers log in; RELOAD's retargeting
//	hosts.go           host lists: which host a login dials
//	                   (load_balance_hosts), target_session_attrs (libpq's
//	                   rule: internal/sessionattrs), servers of a host
//	                   that changed role recycled
//	safeguards.go      connect/close pacing (internal/tokenbucket),
//	                   min_pool_size, lifetimes, Warm
//	janitor.go         the periodic pass: timeouts, idle closes, shrinking
//	poolsettings.go    the settings a pool lives by: the [users]/[databases]
//	                   timeouts over the global ones, per generation
//	txtimeout.go       transaction_timeout's deadlines
//	queuenotice.go     query_wait_notify's and login_notify_message's NOTICEs
//	fastclose.go       server_fast_close
//	cancelwait.go      cancel_wait_timeout
//	peering.go         cancel requests of another peer's key forwarded to it
//	                   ([peers]; the key's layout and the peer pools:
//	                   internal/cancelpeer)
//	dnszone.go         when dns_zone_check_period's pass runs, the servers
//	                   of an address that left (internal/dnscache: the
//	                   cache, resolv_conf, SOA queries, the dial)
//	limiter.go         max_db_connections and max_user_connections: the
//	                   shared caps (internal/connlimit) over the pools
//	clientcaps.go      max_db_client_connections, max_user_client_connections:
//	                   clients counted by database and user at login
//	server.go          server: one connection to Postgres (its SSLRequest
//	                   and handshake: internal/tlsconn)
//	replication.go     replication connections: the login, the relay
//	pool_replication.go a replication client's own server in its pool
//	admission.go       the admission gate of each pool (admission_file):
//	                   built, waited at, counted (the policy's words to
//	                   clients: admission/classify; SHOW ADMISSION's rows
//	                   from a gate: admin.AdmissionRows)
//	errors.go          Error: internal/pgerror's, by the name prepared.go
//	                   still uses (the texts and SQLSTATEs a client can be
//	                   sent: internal/pgerror; a failed server login told
//	                   to clients: internal/loginfail)
//	shutdown.go        SHUTDOWN WAIT_FOR_SERVERS: clients that need a server
//	                   are closed ("server shutting down")
//	clock.go           the injected clock (internal/clock)
//	stats.go           a pool's SHOW STATS counters (their arithmetic and
//	                   log_stats' line: admin.Counters)
//	autodb.go          databases served from "*": registered, logged
//	poolfree.go        pool_idle_timeout, autodb_idle_timeout: the janitor
//	                   frees unused, unpinned pools under Service.mu
//	verbose.go         -v/-vv and verbose: PgBouncer's DEBUG and NOISE lines
//	logprefix.go       who a line is about (conn, db, user, addr attributes),
//	                   which the command writes as PgBouncer's C-n/S-n prefix
//	reloadhook.go      WithReloadHook: the command reopens its logs on RELOAD
//	metrics.go         /metrics: the pools' instruments (the series read
//	                   from SHOW rows: internal/metricrows; HELP texts, the
//	                   runtime collector's renames: internal/metricdoc)
//
// # Objects and their states
//
// The model is PgBouncer's objects.c: an object's state says which list it
// is on, and changing the state is moving it between lists, in one
// function per kind of object that is the only writer of the state and of
// the counts that go with it, and that panics ("BUG: …") on a transition
// its table does not allow.
//
// A server (server.go) belongs to one serverPool for life. Its state,
// written only by serverPool.setServerStateLocked under the pool's mu,
// keeps the pool's idle stack and its counts (connecting, idle, active,
// being_canceled, total), which SHOW POOLS, SHOW SERVERS, the gauges and
// pool_size all read:
//
//	free           -> login                   a login starts (startConnectLocked)
//	login          -> idle | active | closed  logged in (to the idle stack, or
//	                                          straight to a waiter); failed
//	idle           -> active | closed         checkout; idle timeout, lifetime,
//	                                          eviction, PAUSE
//	active         -> idle | closed           release; discard
//	active         -> being_canceled          released with a cancel in flight
//	being_canceled -> idle | active | closed  its cancels done: release's rule
//
// login is a connection being dialled and logged in (the object exists
// from the moment the pool counts it); active is held by a client, a
// drain or the pooler's own query; being_canceled is released by its
// client while a cancel request for it was still on its way to Postgres,
// and handed to nobody until that cancel is done.
//
// A client (client.go) is one client connection: its identity, session
// parameters, prepared-statement names and cancel key. Its state, written
// only by client.setStateLocked under the client's mu, which also keeps
// its pool's client counts (atomics: the client's and the pool's locks
// never nest) from welcome until closed, which SHOW POOLS and the gauges
// read:
//
//	login    -> welcome            authenticated, joined its pool
//	welcome  -> idle               the welcome sent, serving starts
//	idle     -> waiting            a message needs a server
//	waiting  -> active | idle      linked; the wait ended without a server
//	active   -> idle               the server was released, lost or closed
//	active   -> draining           the client left while linked
//	idle     -> parked -> idle     parked; taken up again
//	active   -> parked -> active   the same, a session-mode client with its
//	                               idle server, while suspended (parkedSrv)
//	any      -> closed             the client's goroutine ended
//
// waiting is waiting for a server (at the admission gate or in the pool's
// queue); parked has no goroutine (park.go); draining left while a server
// was linked, which the pump brings back to clean. SHOW CLIENTS shows
// these in PgBouncer's words (clientState.show).
//
// A link (link.go) is everything a client has only while it is being
// served: the linked server, the protocol position on it
// (linkstate.State), the replies owed for prepared-statement mapping, the
// pump's lifetime, the hand-over of the server's writer, the drain, the
// relay buffers. A parked client has none (c.mu.link is nil); other goroutines
// reach it only under the client's mu.
//
// The transaction path (route, forward, linking, the relay, the drain, the
// mapping, the release) is the link's methods: they act on a (client,
// server) pair, which the link is. The client keeps its session: login,
// the read loop, its ends, parking, parameters, statement names. A link
// reaches its client as l.c; the pump passes the server it relays (s) on,
// as it holds s after the link let it go (l.mu.srv nil) until s is back.
//
// A transaction's pool is the link's (link.mu.pool), not necessarily the
// client's (c.pool): the router may send a transaction to another pool
// (client.linkTo), whose admission gate and queue the client waits at,
// whose server runs it and goes back to it, and whose statistics count it
// (stats.go). c.pool stays the client's home: its counts (SHOW POOLS'
// cl_*), caps, settings, login and SHOW CLIENTS row.
//
// # The path of one transaction
//
// The files a transaction reads through, in order, function by function
// (file: functions). Leaves the walk does not open are left out: the
// settings a link runs by (poolsettings.go), transaction_timeout's
// arithmetic (txtimeout.go), the peek at a server idle over a millisecond
// (server.go's closedByPeer), log lines and counters.
//
// (a) An autocommit simple Query, an idle server in the pool, no
// admission_file (max_prepared_statements on, as by default): five files
// of the package and internal/linkstate.
//
//	serve.go       client.loop, readNext, link.route, followTrackingLocked,
//	               answerUnlinked (a Query needs a server), linkFor
//	link.go        linkServer (clientstate.go setStateLocked: waiting),
//	               acquire
//	pool.go        serverPool.acquire, acquireOnce, nextIdleLocked,
//	               setServerStateLocked (idle -> active), checkServer
//	link.go        syncParamsUnlessMatch, linkSrvLocked (clientstate.go:
//	               active)
//	serve.go       recordLocked (linkstate.State.FromClient),
//	               forward, relayMapped, relayQuery, flushBatch, doneWriting
//	link.go        relayOrPump
//	pump.go        pumpRun, pumpLook, replyOpLocked, pumpForward,
//	               pumpCommandComplete, pumpReady, readyLocked, afterReady,
//	               countReadyLocked
//	linkstate      State.ReadyForQuery, AfterReadyForQuery
//	link.go        unlinkServerLocked (clientstate.go: idle)
//	pump.go        endReleasingLocked, releaseClean
//	pool.go        serverPool.release, reuseOrCloseLocked, closeReasonLocked,
//	               handOffLocked, setServerStateLocked (active -> idle)
//
// Without mapping (max_prepared_statements = 0, session mode) forward
// passes the Query on as it is: the same files.
//
// (b) Parse of a named statement no server has yet, Bind, Execute and
// Sync in one batch, an idle server in the pool:
//
//	serve.go          client.loop, readNext (Parse), link.route,
//	                  followTrackingLocked, answerUnlinked
//	relay_unlinked.go answerParse (validated on no server: needs one)
//	serve.go          linkFor, then link.go and pool.go as in (a)
//	serve.go          recordLocked (linkstate.State.FromClient, relay_retry.go
//	                  captureLocked), forward, relayMapped
//	relay_prepared.go relayParse, prepareLocked (Parse PGTS_n, opParse);
//	                  relay_replies.go holdNameLocked (the client's name)
//	relay_rewrite.go  appendParseLocked, writeRewrite
//	serve.go          flushBatch (not yet: the batch goes on); the Bind:
//	                  readNext, route, recordLocked, forward, relayMapped
//	relay_prepared.go relayBind (the server's name, opBind; on a server
//	                  without the statement its Parse injected first)
//	serve.go          the Execute passed on as it is; the Sync:
//	                  recordLocked (opSync), forward, flushBatch
//	link.go           relayOrPump
//	pump.go           pumpRun, pumpLook (ParseComplete)
//	pump_messages.go  pumpStmtReply; relay_replies.go replyLocked (opParse
//	                  popped, the statement validated, the reply passed on)
//	pump.go           replyOpLocked (BindComplete), pumpCommandComplete,
//	                  pumpReady, readyLocked, afterReady; then the release
//	                  as in (a)
//
// (c) A simple Query that waits for a server (every server of the pool
// active at pool_size, no admission_file):
//
//	serve.go       client.loop, readNext, link.route, linkFor
//	link.go        linkServer, acquire (clientstate.go: waiting)
//	pool.go        serverPool.acquire, acquireOnce: no idle server
//	queuenotice.go poolWaiter.newWaitLocked; waitqueue.go waitQueue.push
//	pool_grow.go   growLocked (at pool_size: no login)
//	pool.go        acquireOnce waits for its grant
//
// until another link releases its server (pump.go afterReady,
// releaseClean; pool.go release, reuseOrCloseLocked, handOffLocked;
// waitqueue.go pop: the server, still active, granted to the oldest
// waiter); then pool.go acquire's checkServer, link.go linkServer (the
// wait counted), and (a) from syncParamsUnlessMatch on. query_wait_timeout
// (janitor.go, waitqueue.go expireWaitersLocked) and a cancel request
// (waitqueue.go cancelWaiter) end the wait instead: serve.go linkFor
// answers (clientlife.go fail, queryCanceled).
//
// # Goroutines and ownership
//
// Every client connection has one goroutine (client.serve). It owns the
// client's reader and, while no server is linked, the client's writer. It
// reads a message header (client.readNext); decides where the message goes
// (link.route): answered without a server, or to the linked server, checking
// one out first — an admission ticket if admission_file is set
// (admission.go), then the pool (waiting in its FIFO queue up to
// query_wait_timeout), then one SET to bring the server's tracked
// parameters in line with the client's; and forwards it (link.forward), flushing
// when the client's batch is consumed (no whole next message is
// buffered), not per message.
//
// The pump (link.pumpRun) is the only reader of the server while linked
// and the only writer to the client while linked. It forwards the server's
// messages as bytes and looks only inside ReadyForQuery, ParameterStatus,
// CopyIn/CopyBoth responses, and, when prepared statements are mapped,
// ParseComplete, CloseComplete, ErrorResponse and CommandComplete
// (pumpLook). It runs on serve's goroutine when a batch ends with Sync or
// Query, or as its own goroutine (link.pumpGoroutine) for a link that outlives
// the answer (a transaction block), COPY IN, a batch ending in Flush, or
// a link left mid-batch.
//
// The two share the link's mu group, which the client's mu guards
// (client.mu, link.mu): serve records each message before it writes it
// to the server (linkstate.State.FromClient); the pump records each
// ReadyForQuery. The pump flushes the client writer before it takes the
// lock to hand the writer back to serve, so a client that stops reading
// pins no lock (KILL_CLIENT, SHOW CLIENTS, cancels and the janitor take
// it; KILL_CLIENT closes the socket without it). serve marks itself as
// writing to the server until its batch is flushed; the pump neither
// releases nor closes a server while that is set (the next holder, or the
// close, would share its writer).
//
// While no server is linked, serve answers what needs none itself: Sync
// (ReadyForQuery 'I'), Flush, Close, a Parse of a statement some server has
// parsed, and the rest of a batch after an error the pooler raised.
//
// Servers are logged in by a goroutine each (serverPool.connect), started
// by the pool's growth under its connect pacing (safeguards.go); the
// janitor (janitor.go) makes one pass every 100 ms over every pool:
// query_wait_timeout, idle and lifetime closes, shrinking after a lowered
// limit, min_pool_size, the stats period, asking idle clients to park.
//
// # Locks
//
// Five locks are outer locks: Service.mu, Service.cancelMu, client.mu,
// serverPool.mu and the parker's (its parking.Lot's mu). No two of them are held at once, with one
// exception. Code that needs two copies what it needs under the first,
// releases it, then takes the second: Service.cancel takes client.mu, then
// the pool's; Apply and the janitor copy the pool list under Service.mu,
// then lock each pool; limiterDeferred locks one pool at a time. The
// exception is freeUnusedPools (poolfree.go): it must decide that a pool
// is unused and remove it while no poolFor can hand it out, so it holds
// Service.mu while it locks each pool in turn. Nothing takes Service.mu
// under serverPool.mu, so the order is Service.mu, cancelMu, client.mu,
// serverPool.mu, the parker's wherever two nest.
//
// Under an outer lock only leaves are taken, and nothing is taken under a
// leaf:
//
//	Service.mu    -> connlimit's mu     poolFor, SHOW DATABASES / USERS
//	serverPool.mu -> connlimit's mu     growLocked, fillMinLocked, overLimitLocked
//	serverPool.mu -> admission.Gate.mu  syncGateLocked, gateWaitingLocked, gateFor
//	client.mu     -> Registry.mu        statement mapping (internal/stmtcache)
//	any lock      -> the metrics' own locks
//
// poolStats.mu, changesignal.Signal's mu, clientcount.Counts.mu, metricrows' live-heap lock and dnscache.Cache.mu
// (released for its lookups and for marking servers of a gone address)
// are leaves taken under nothing. The gate calls its decisions' callbacks after releasing
// Gate.mu, but still under the pool's mu when SetPool made the decision,
// so a callback only sends on its own buffered channel.
//
// Each lock's fields follow it in its struct; fields outside a mu group
// belong to one goroutine, are immutable once published, or are atomic.
// client.mu is a struct of the mutex and the fields it guards (c.mu.state,
// c.mu.link, c.mu.stmts, …); the link has no lock of its own, and its
// fields are grouped by who may touch them: l.mu under the client's mu,
// l.serve by serve's goroutine alone, l.pump by the relay alone (the pump,
// or serve relaying inline).
// serverPool.mu also guards each of its servers' state, closeNeeded,
// doomReason, evictAt, peekedAt and lastUsed; a linked server's statement
// cache and unnamed-statement owner belong to the holder's client.mu, and
// the rest of a server to its holder (SHOW SERVERS reads the little it
// needs of that from atomic mirrors). The parker's lock guards which
// descriptor each parked client lives on.
//
// No lock is held across network I/O, a dial, a log write, a wait on
// another goroutine or a channel send that can block. A send under a lock
// goes to a buffered channel whose one slot the sender owns (a pool
// waiter's grant, a client's admitCh, cancelWait). Three exceptions
// remain, none of which can block: the janitor's MSG_PEEK of an idle
// server under the pool's mu (closedByPeer), epoll_ctl under the parker's lock so
// that a Del cannot remove a later Add of the same descriptor, and read
// deadlines set under client.mu so they reach the right holder. A cancel
// request marks its server under client.mu and dials Postgres after
// releasing it. What remains unbounded holds no lock: a pump writing to a
// client that never reads waits for it (or for KILL_CLIENT) with client.mu
// free.
//
// A function whose name ends in Locked is called with its receiver's lock
// held and returns with it held, and never releases it in between; one
// whose name ends in Relock releases it while it waits and holds it again
// on return. The drain decides its next step under client.mu
// (nextDrainLocked) and its caller releases the lock before the step's
// I/O (runDrain).
//
// # Time
//
// The pooler reads time from an injected clock (clock.go): the janitor's
// ticker, the grow, drain and auth_query timers, and every timestamp the
// pool logic compares. Socket deadlines stay on the runtime's clock, which
// a net.Conn measures them against. The timing tests run the real code
// under testing/synctest over net.Pipe, with a small fake Postgres
// (timing_synctest_test.go). Waits for a condition (PAUSE, WAIT_CLOSE,
// SHUTDOWN WAIT_FOR_*) wait on a changesignal.Signal (Service.changes)
// that every server close and client exit notifies, not on a timer.
//
// # Performance, hostile input, memory
//
// How the hot path avoids goroutines, system calls and allocations, how
// serve judges a message from its header, and what a client can make the
// pooler hold: docs/architecture.md, "Inside the pooler".
//
// # The release rule
//
// A server goes back to its pool only when the pump has written a
// ReadyForQuery with status 'I' to the client, every Query/Sync/FunctionCall
// the client sent has been answered, the client is not mid-batch (messages
// sent after its last Sync) and no COPY is in progress; in transaction mode
// that is the end of each transaction, in statement mode the end of each
// statement (a transaction block is refused), in session mode never while
// the client is connected. linkstate.State.AfterReadyForQuery is the
// rule, with a table test.
//
// "Every request answered" follows Postgres exactly, not one
// ReadyForQuery per Query/Sync: after an error in an extended-protocol
// message Postgres skips to the next Sync (Queries and FunctionCalls
// included), and in COPY IN it ignores Sync and Flush and consumes any
// other message as the error ending the COPY. The link records the kinds
// of the messages the server has not finished and the pump counts the
// replies that complete extended messages, so each ErrorResponse and
// CopyInResponse is attributed to its message
// (linkstate.State.ServerError, CopyStarted); serve refuses anything but
// COPY messages, Sync and Flush during COPY IN. Where only timing could
// tell (a Sync among COPY data), the link is marked unsure and its server
// is closed rather than handed to another client.
//
// Consequence for the extended protocol: an unnamed statement prepared in
// one Sync cycle (Parse/Describe/Sync) and executed in the next
// (Bind/Execute/Sync) stays on one server only while a transaction or a
// pipeline holds the link; outside of that the next cycle may get another
// server. PgBouncer leaves it at that, which breaks lib/pq's defaults.
// pgturnstile remembers each client's last unnamed Parse and, when a Bind or
// Describe of the unnamed statement reaches a server that does not hold that
// client's version of it, injects the Parse first and swallows its
// ParseComplete (relay_prepared.go, relay_replies.go). The unnamed portal needs nothing: it
// never outlives the Sync cycle that created it outside a transaction.
// Named statements are mapped as described in prepared.go.
//
// # A client that leaves while linked
//
// The server is not handed to anyone dirty and, when possible, not closed
// either: serve marks the link gone and expires the server's read deadline
// to wake the pump, which then drains: it discards replies still owed,
// sends Sync if the client left mid-batch, ROLLBACK if a transaction is
// open, the reset query in session mode, and releases the server once it
// is idle. Bounded exhaust (drain.go): a query still running is cancelled
// once client_drain_max_bytes of its output were discarded, or when it
// sends nothing for a moment, on a bounded cancel path, and nothing more is
// sent to the server before that cancel reached Postgres; a drain that
// takes longer than drainTimeout closes the server instead. Outcomes are
// counted (pgturnstile_server_drain_total).
//
// # Pools and caps
//
// A serverPool is keyed by (database entry, login user). pool_size (from [pools],
// [users], [databases] or default_pool_size, resolved by config.Resolve),
// reserve_pool_size after reserve_pool_timeout, and the shared caps
// max_db_connections and max_user_connections (limiter) bound the servers.
// When a shared cap blocks a pool, an idle server of a sibling pool is
// evicted. New servers are logged in by background goroutines and handed
// to the oldest waiter. A login Postgres refused (an ErrorResponse, a
// password the server's method cannot use, a required TLS that failed)
// fails the waiters and is replayed to new clients for server_login_retry;
// a server that could not be reached (refused, timed out, restarting)
// leaves them waiting, and the janitor tries again once
// server_login_retry has passed, up to query_wait_timeout: a restart or
// failover costs waiting clients latency, not errors
// (loginfail.FailsWaiters). The janitor closes servers past
// server_idle_timeout or server_lifetime (spread by
// server_lifetime_jitter) and keeps min_pool_size. A server idle for a while is peeked at (non-blocking)
// before checkout, and by the janitor, so one Postgres closed is never
// handed out and is replaced.
//
// Connection safeguards (safeguards.go): logins start only with a token of
// the pool's create bucket (server_connect_rate, server_connect_burst) and
// within server_max_parallel_connects; growth that finds no token arms the
// pool's one grow timer for when the next is due. Healthy servers (idle
// timeout, lifetime, lowered limit, RECONNECT) close only with a token of
// the close bucket (server_close_rate) and otherwise stay for a later
// janitor pass; broken servers, PAUSE and KILL close at once. Service.Warm
// fills the forced-user pools to min_pool_size before clients are
// accepted, and RESUME/RECONNECT refill through the same bucket.
//
// A configuration is one generation (apply.go): the configuration with
// the runtime overrides, the users, TLS and HBA, the admission policy,
// derived whole and published by one atomic store. A link takes the
// generation once (linkServer): its gate is built from that generation's
// policy, pool_size and query_wait_timeout, and a transaction-mode link
// runs by that generation's timeouts, so no transaction sees part of one
// RELOAD and part of the next (TestReloadNeverMixes). A session-mode link
// is the whole session and follows RELOAD between its batches.
//
// Limits change at runtime (RELOAD, SET, SET USER, SET POOL): a pool over
// its new limit closes idle servers at once and busy ones at release (or,
// with limit_evict_grace, takes them after the grace), and never grows past
// it. PAUSE and KILL hold the pool's clients in the queue.
//
// A RELOAD that changes where or as whom a pool's servers log in (address,
// dbname, startup parameters, forced user or password, connect_query) or
// the server_tls_* settings retargets the pool (serverPool.retarget): its
// target is one immutable value, replaced; every server of the old one is
// marked "database configuration changed" and closed, idle ones during the
// RELOAD, busy ones at release, logins in flight when they end; new
// servers dial the new target and clients keep their connections. With
// PAUSE and RESUME around it, this is a switchover without client errors
// (integration's TestSwitchover).
//
// # Cancellation
//
// Each client gets its own random BackendKeyData. A CancelRequest with that
// key is sent, on a new connection, to the Postgres backend linked to the
// client at that moment. The server is marked under the client's lock and
// the request sent with no lock held; a server released while a cancel is
// in flight waits in being_canceled (pool.go) so it cannot move to
// another client before the cancel is done.
//
// With peer_id set (peering.go), the key also carries the process's peer
// id and a forwarding TTL, PgBouncer's layout; a CancelRequest with
// another peer's id is not looked up but sent on, TTL less one, to that
// peer from [peers], on the connection of the goroutine that received it,
// bounded per peer by its pool_size (internal/cancelpeer, whose locks
// are leaves taken under nothing).
//
// # Rolling restarts
//
// SIGTERM (SHUTDOWN WAIT_FOR_CLIENTS) closes the TCP listeners, which
// so_reuseport lets other processes share, keeps the Unix socket for the
// console and forwarded cancels, and ends the process once the clients it
// accepted have left (shutdown.go).
package pooler
