package pooler

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/admission/classify"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/internal/startupopts"
	"github.com/pgturnstile/pgturnstile/internal/tlsconn"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// login reads the startup packet, authenticates, and sends the welcome, in
// the steps below, in this order; each may end the login with an error,
// which serve hands to client.fail (what the client is told, if anything).
// A login to the admin console goes to consoleLogin after acceptStartup.
func (c *client) login() error {
	st := c.svc.settings()
	if st.ClientLoginTimeout > 0 {
		c.conn.SetDeadline(time.Now().Add(st.ClientLoginTimeout))
	}
	su, err := c.readStartup()
	if err != nil {
		return err
	}
	startupParams, err := c.acceptStartup(st, su)
	if err != nil {
		return err
	}
	if c.dbName == adminDB {
		return c.consoleLogin()
	}
	pool, err := c.authenticateForPool(st)
	if err != nil {
		return err
	}
	// The pool stays pinned until the client counted itself in it (or
	// failed): the janitor never frees it under a login (poolfree.go).
	defer c.svc.unpin(pool)
	if err := c.viewsStartupCheck(startupParams); err != nil {
		return err
	}
	if c.repl != replNone {
		return c.replicationLogin(st, pool, startupParams)
	}
	if err := c.joinPool(st, pool); err != nil {
		return err
	}
	if err := c.welcome(st, pool, startupParams); err != nil {
		return err
	}
	c.debugf("logged in")
	return nil
}

// encryptionAsked records which encryption requests a client has made:
// Postgres takes each once, and one repeated (after 'N', or inside the TLS
// it started) is refused at once, in its words.
type encryptionAsked struct{ ssl, gss bool }

// readStartup reads startup packets until the StartupMessage, answering
// SSLRequest (TLS when configured) and GSSENCRequest on the way. A
// CancelRequest is passed on and ends the connection without a word.
func (c *client) readStartup() (*wire.Startup, error) {
	var asked encryptionAsked
	if err := c.directTLS(&asked); err != nil {
		return nil, err
	}
	for tries := 0; ; tries++ {
		// c.r is read afresh each time: startTLS replaces it.
		su, err := c.r.ReadStartup()
		if err != nil {
			if errors.Is(err, wire.ErrOldProtocol) {
				return nil, pgerror.New(pgerror.OldProtocol)
			}
			return nil, err
		}
		switch su.Kind {
		case wire.StartupMessage:
			return su, nil
		case wire.CancelRequest:
			c.svc.cancelRequest(c, su.CancelKey)
			return nil, errSilent
		}
		// A backstop: answerEncryption refuses a repeated request, so no
		// client gets past two; the loop stays bounded without relying on it.
		if tries > 2 {
			return nil, pgerror.New(pgerror.BadPacket)
		}
		if err := c.answerEncryption(su.Kind, &asked); err != nil {
			return nil, err
		}
	}
}

// answerEncryption answers an SSLRequest or GSSENCRequest: TLS when the
// client asked for it, is not in it yet and client TLS is configured, else
// 'N'.
func (c *client) answerEncryption(kind wire.StartupKind, asked *encryptionAsked) error {
	switch {
	case kind == wire.SSLRequest && asked.ssl:
		return &wire.StartupError{Message: "unsupported frontend protocol 1234.5679: server supports 3.0 to 3.0"}
	case kind == wire.GSSENCRequest && asked.gss:
		return &wire.StartupError{Message: "unsupported frontend protocol 1234.5680: server supports 3.0 to 3.0"}
	}
	asked.ssl = asked.ssl || kind == wire.SSLRequest
	asked.gss = asked.gss || kind == wire.GSSENCRequest
	if kind == wire.SSLRequest && !c.tls {
		if cfg := c.svc.gen.Load().sec.ClientTLS; cfg != nil {
			return c.startTLS(cfg)
		}
	}
	// No TLS configured, or GSSENCRequest: the client continues in
	// plaintext or gives up, as with PgBouncer.
	_, err := c.plainIO().Write([]byte{'N'})
	return err
}

// acceptStartup checks the StartupMessage before any authentication: TLS
// where client_tls_sslmode requires it, the startup parameters (which set
// c.user and c.dbName), room in the pooler and a user name. It logs the
// attempt and tells a newer client, or one with _pq_ options, what the
// pooler speaks. It returns the tracked parameters the client asked for.
func (c *client) acceptStartup(st *config.Settings, su *wire.Startup) (map[string]string, error) {
	// The mode in force, not the one last given: a client_tls_* set
	// that did not load leaves the previous TLS, mode included.
	if !c.tls && auth.ClientTLSRequired(c.svc.gen.Load().sec.ClientMode) && !c.local {
		return nil, pgerror.New(pgerror.SSLRequired)
	}
	startupParams, unrecognized, err := c.readParams(su)
	if err != nil {
		return nil, err
	}
	// The console stays reachable when the pooler is full or stopping.
	if c.dbName != adminDB {
		if int(c.svc.clientCount.Load()) > st.MaxClientConn {
			return nil, pgerror.New(pgerror.MaxClientConn)
		}
		if c.svc.shuttingDown.Load() && !c.svc.admitDuringShutdown(c) {
			return nil, pgerror.New(pgerror.ShuttingDown)
		}
	}
	if c.user == "" {
		return nil, pgerror.New(pgerror.NoUserName)
	}
	if st.LogConnections {
		c.logger().Info(fmt.Sprintf("login attempt: db=%s user=%s tls=%s replication=%s", c.dbName, c.user, c.tlsVersion(), c.repl.param()))
	}
	if su.Minor > 0 || len(unrecognized) > 0 {
		// We speak 3.0: tell a newer client so, and name the protocol
		// options we ignore.
		c.scratch = wire.AppendNegotiateProtocolVersion(c.scratch[:0], 0, unrecognized)
		if err := c.w.Write(c.scratch); err != nil {
			return nil, err
		}
	}
	return startupParams, nil
}

// authenticateForPool authenticates the client for its database and
// returns the pool of (database, user), with the server login credentials
// set from what the client proved where the database names no user.
//
// Nothing the client sees before it has authenticated may depend on
// whether its database exists (PgBouncer's "fake database"): an unknown
// database gets the same exchange as a known one, and only a client that
// proved its password learns that it does not exist.
func (c *client) authenticateForPool(st *config.Settings) (*serverPool, error) {
	g := c.svc.gen.Load()
	cfg := g.cfg
	db, dbKnown := c.clusterLogin(g)
	if !dbKnown {
		db, dbKnown = cfg.LookupDatabase(c.dbName)
	}
	if !dbKnown {
		db = &config.Database{Name: c.dbName}
	}
	// The client caps come before the password exchange, as in
	// PgBouncer's set_pool.
	if err := c.checkClientCaps(cfg, db, dbKnown); err != nil {
		return nil, err
	}
	secret, res, err := c.authenticate(db, dbKnown)
	if err != nil {
		return nil, err
	}
	if c.shard == nil && shardMapPending(g, c.dbName) {
		if st.LogConnections {
			c.logger().Info(fmt.Sprintf("login failed: db=%s user=%s (no shard map from etcd yet)", c.dbName, c.user))
		}
		return nil, pgerror.New(pgerror.ShardMapPending, c.dbName)
	}
	if !dbKnown {
		if st.LogConnections {
			c.logger().Info(fmt.Sprintf("login failed: db=%s user=%s", c.dbName, c.user))
		}
		return nil, pgerror.New(pgerror.NoSuchDatabase, c.dbName)
	}
	if c.svc.isDisabled(c.dbName) {
		return nil, pgerror.New(pgerror.DatabaseDisabled, c.dbName)
	}
	pool, err := c.svc.poolFor(db, c.user)
	if err != nil {
		return nil, err
	}
	// Registered after the pool is pinned: the janitor forgets an
	// auto-database only with its pools, so a database freed under this
	// login is logged as new again (poolfree.go).
	if c.shard == nil && c.svc.registerAutoDB(cfg, c.dbName) {
		c.logger().Info("registered new auto-database: " + c.dbName)
	}
	if db.User == "" && secret != nil {
		// The server login of this pool uses the secret the client was
		// checked against (fresh from auth_query, or auth_file), and the
		// client's SCRAM keys when it proved them: SCRAM pass-through.
		pool.setCredentials(secret, res.ClientKey)
		if c.shard != nil {
			c.shard.secret, c.shard.clientKey = secret, res.ClientKey
		}
	}
	return pool, nil
}

// joinPool makes the client one of pool's, in the pool's mode. The client
// is counted in the pool from here on (welcome), also when the login fails
// after (closed uncounts it).
func (c *client) joinPool(st *config.Settings, pool *serverPool) error {
	c.pool = pool
	eff := pool.effective()
	c.mode = eff.PoolMode
	c.tracking = c.mapsStatements(st)
	c.enterPool()
	if err := pool.fastFail(); err != nil {
		return err
	}
	if !pool.hasWelcome() {
		// Like PgBouncer, the first client of a pool waits for a server
		// login so the welcome carries the real server's parameters.
		s, err := pool.acquire(nil, nil)
		if err != nil {
			return err
		}
		pool.release(s)
	}
	return nil
}

// welcome settles the client's session (parameters, cancel key), sends
// AuthenticationOk, the parameters, BackendKeyData and ReadyForQuery, and
// ends the login: no deadline, and the logged-in message size limit.
func (c *client) welcome(st *config.Settings, pool *serverPool, startupParams map[string]string) error {
	if st.ApplicationNameAddHost {
		// PgBouncer's format: "<name> - <host>:<port>".
		startupParams["application_name"] += " - " + c.conn.RemoteAddr().String()
	}
	var status []byte
	c.params, status = pool.loginParams(startupParams)
	if err := c.svc.newCancelKey(&c.key); err != nil {
		return err
	}
	c.svc.registerCancel(c)
	pool.stats.logins.Add(1)
	if status == nil { // the pool has no welcome yet: the client's parameters alone
		status = wire.AppendParameterStatuses(nil, pool.welcomeParams(), c.params)
	}
	c.scratch = c.appendWelcome(c.scratch[:0], status)
	err := c.w.Write(c.scratch)
	// The welcome is the largest thing built in scratch; an idle client
	// should not keep it.
	c.scratch = nil
	if err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	c.conn.SetDeadline(time.Time{})
	c.r.SetMaxMessageSize(clientMaxMessage(st))
	return nil
}

// appendWelcome appends the welcome to out: AuthenticationOk, the
// ParameterStatus messages (wire.AppendParameterStatuses), BackendKeyData, the
// login_notify_message, ReadyForQuery.
func (c *client) appendWelcome(out []byte, status []byte) []byte {
	out = wire.AppendAuthenticationOk(out)
	out = append(out, status...)
	out = wire.AppendBackendKeyData(out, c.key)
	if msg := c.svc.settings().LoginNotifyMessage; msg != "" {
		out = wire.AppendNotice(out, msg)
	}
	out = c.appendOptionNotices(out)
	return wire.AppendReadyForQuery(out, wire.TxIdle)
}

// clientMaxMessage is the message size limit for a logged-in client:
// max_packet_size, but never above what Postgres takes. max_packet_size
// goes up to 4294967295 (PgBouncer's range); a header claiming more than
// 1 GiB is refused on the spot, not relayed while the pooler waits for
// gigabytes that no server would accept (PgBouncer's integer-overflow
// advisory was about such lengths).
func clientMaxMessage(st *config.Settings) int {
	if st.MaxPacketSize <= 0 || st.MaxPacketSize > maxProtocolMessage {
		return maxProtocolMessage
	}
	return st.MaxPacketSize
}

// readParams applies PgBouncer's startup parameter rules: user and database
// are special, tracked parameters are kept, ignore_startup_parameters are
// dropped, `options` may only carry -c settings of tracked or ignored
// parameters, _pq_.* options are negotiated away, anything else is refused.
func (c *client) readParams(su *wire.Startup) (map[string]string, []string, error) {
	st := c.svc.settings()
	ignored := func(name string) bool {
		for _, n := range st.IgnoreStartupParameters {
			if strings.EqualFold(n, name) {
				return true
			}
		}
		return false
	}
	params := map[string]string{}
	var unrecognized []string
	// replication first: it decides how options is read, wherever it is.
	for _, p := range su.Params {
		if p.Name == "replication" {
			if c.svc.debugOn() {
				c.debugf("got var: %s=%s", p.Name, p.Value)
			}
			c.repl = parseReplication(p.Value)
		}
	}
	for _, p := range su.Params {
		switch {
		case p.Name == "replication":
		case p.Name == "options" && c.repl != replNone:
			// A replication client's server is its own: its options
			// go to it unchanged, any setting in them (CREATE
			// SUBSCRIPTION sets extra_float_digits there).
			c.replOptions = &p.Value
		case p.Name == "user":
			c.user = p.Value
		case p.Name == "database":
			c.dbName = p.Value
		case strings.HasPrefix(p.Name, "_pq_."):
			unrecognized = append(unrecognized, p.Name)
		case p.Name == "options":
			if err := c.readOptions(p.Value, params, ignored); err != nil {
				return nil, nil, err
			}
		case c.svc.trackedName(p.Name) != "":
			params[c.svc.trackedName(p.Name)] = p.Value
			if c.svc.debugOn() {
				c.debugf("got var: %s=%s", p.Name, p.Value)
			}
		case ignored(p.Name):
			if c.svc.debugOn() {
				c.debugf("ignoring startup parameter: %s=%s", p.Name, p.Value)
			}
		default:
			return nil, nil, pgerror.New(pgerror.UnsupportedStartupParam, p.Name)
		}
	}
	if c.dbName == "" {
		c.dbName = c.user
	}
	return params, unrecognized, nil
}

// readOptions reads the -c settings of the options startup parameter as
// PgBouncer's set_startup_options does: tracked parameters are kept, an
// ignored one is dropped, and with "options" itself in
// ignore_startup_parameters every other one is dropped too (the tracked
// ones are still kept); an argument that is not -c/-- name=value is
// refused either way (internal/startupopts reads them).
func (c *client) readOptions(opts string, params map[string]string, ignored func(string) bool) error {
	if c.svc.debugOn() {
		c.debugf("received options: %s", opts)
	}
	settings, ok := startupopts.Parse(opts)
	for _, kv := range settings {
		k, v := kv.Name, kv.Value
		if rest, ok := strings.CutPrefix(strings.ToLower(k), "pgturnstile."); ok {
			pin := c.startPin
			if pin == nil {
				pin = new(shard.Pin)
			}
			if pin.Set(rest, []byte(v)) {
				c.startPin = pin
				continue // the router's (shardroute.go)
			}
			// Admission tags (-c pgturnstile.priority=low): the pooler's
			// own, never forwarded to Postgres.
			if c.adm == nil {
				c.adm = &clientAdmission{}
			}
			c.adm.opts = append(c.adm.opts, classify.OptionTag{Key: rest, Value: v})
			continue
		}
		if name := c.svc.trackedName(k); name != "" {
			params[name] = v
			if c.svc.debugOn() {
				c.debugf("got var from options: %s=%s", k, v)
			}
		} else if ignored(k) || ignored("options") {
			if c.svc.debugOn() {
				c.debugf("ignoring startup parameter from options: %s=%s", k, v)
			}
		} else {
			return pgerror.New(pgerror.UnsupportedOptionsParam, k)
		}
	}
	if !ok {
		return pgerror.New(pgerror.UnsupportedOptions)
	}
	return nil
}

// startTLS answers an SSLRequest with 'S' and runs the handshake; the
// connection continues, with a new startup packet, over TLS.
func (c *client) startTLS(cfg *tls.Config) error {
	if c.r.Buffered() > 0 {
		// Sent before the answer, so not through TLS: PostgreSQL's
		// refusal (a man in the middle could have put it there).
		return &wire.StartupError{Message: "received unencrypted data after SSL request"}
	}
	if _, err := c.plainIO().Write([]byte{'S'}); err != nil {
		return err
	}
	tc := tls.Server(tlsconn.Transport(c.conn, c.plainIO()), cfg)
	if err := tc.Handshake(); err != nil {
		return err
	}
	c.useTLS(tc)
	return nil
}

// plainIO is how the client's socket is read and written before TLS, if
// any, starts: with raw system calls where wire.SocketIO makes them (the
// answer to an SSLRequest and the TLS records; c.r, which reads the startup
// packets, and c.w are over it too), for the reason tlsconn.Transport
// gives.
func (c *client) plainIO() io.ReadWriter {
	if c.tls {
		return c.conn
	}
	// c.r reads the socket through serveConn's raw I/O, which writes
	// too: asked for here, not kept in a field, which would cost every
	// client, parked ones included, 16 bytes.
	if rw, ok := c.r.Source().(io.ReadWriter); ok {
		return rw
	}
	return wire.SocketIO(c.conn)
}

// useTLS makes the client's connection the TLS one over it, handshake done.
func (c *client) useTLS(tc *tls.Conn) {
	c.mu.Lock()
	c.conn = tc
	c.mu.Unlock()
	c.tls = true
	if c.r != nil {
		c.r.FreeBuffer() // the plain reader's: nothing after the SSLRequest is read from it
	}
	c.r = wire.NewPooledReader(tc, clientReadBuffer)
	c.r.SetBudget(c.svc.held)
	c.w = wire.NewPooledWriter(tc, wire.DefaultBufferSize)
}

// tlsVersion is the client's TLS in PgBouncer's words (tlsInfo), or "no".
func (c *client) tlsVersion() string {
	if tc, ok := c.conn.(*tls.Conn); ok {
		return auth.TLSInfo(tc.ConnectionState())
	}
	return "no"
}

// remoteIP is the client's address, unmapped from IPv6 when it is IPv4.
func (c *client) remoteIP() netip.Addr {
	if ta, ok := c.conn.RemoteAddr().(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			return a.Unmap()
		}
	}
	return netip.Addr{}
}

// consoleLogin authenticates a login to the admin console, sends a welcome
// and hands the connection to the console. A user in admin_users or
// stats_users authenticates like any other (auth_type, auth_file); the
// pooler's own OS user connecting over the Unix socket as "pgbouncer" is an
// admin without a password, as PgBouncer allows. Anyone else is told "not
// allowed" only after authenticating, as PgBouncer does (admin_post_login):
// an unknown user gets the mock exchange, so the console does not say who
// its users are.
func (c *client) consoleLogin() error {
	cfg := c.svc.config()
	role, ok := admin.RoleFor(cfg, c.user)
	var sendFD admin.FDSender
	if c.user == adminDB && c.local && c.peerIsSelf() {
		role, ok = admin.RoleAdmin, true
		// Only this session may take descriptors (online restart).
		sendFD = c.fdSender()
		// PgBouncer counts this login in the console's database only.
		if err := c.checkDBClients(cfg, nil); err != nil {
			return err
		}
	} else {
		if err := c.checkClientCaps(cfg, nil, true); err != nil {
			return err
		}
		if _, _, err := c.authenticate(&config.Database{Name: adminDB}, true); err != nil {
			return err
		}
		if !ok {
			return pgerror.New(pgerror.AdminNotAllowed)
		}
	}
	c.dbName = adminDB
	if err := c.svc.newCancelKey(&c.key); err != nil {
		return err
	}
	c.svc.registerCancel(c) // listed by SHOW CLIENTS
	out := wire.AppendAuthenticationOk(c.scratch[:0])
	for _, kv := range [][2]string{
		{"server_version", "15.0 (" + c.svc.version + ")"}, {"client_encoding", "UTF8"}, {"server_encoding", "UTF8"},
		{"DateStyle", "ISO"}, {"TimeZone", "GMT"}, {"standard_conforming_strings", "on"},
		{"integer_datetimes", "on"}, {"application_name", c.params["application_name"]},
	} {
		out = wire.AppendParameterStatus(out, kv[0], kv[1])
	}
	out = wire.AppendBackendKeyData(out, c.key)
	out = wire.AppendReadyForQuery(out, wire.TxIdle)
	c.scratch = out
	if err := c.w.Write(out); err != nil {
		return err
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	c.conn.SetDeadline(time.Time{})
	err := admin.ServeFDs(c.svc.Console(), c.r, c.w, c.user, role, sendFD, c.logger())
	if err != nil && !errors.Is(err, io.EOF) {
		c.logger().Info("console closed: " + err.Error())
	}
	return errSilent
}

// peerIsSelf reports whether a Unix-socket peer runs as the pooler's own
// OS user; never where the system cannot tell (internal/netpoll.PeerUID).
func (c *client) peerIsSelf() bool {
	uc, ok := c.conn.(*net.UnixConn)
	if !ok {
		return false
	}
	uid, ok := netpoll.PeerUID(uc)
	return ok && uid == os.Getuid()
}
