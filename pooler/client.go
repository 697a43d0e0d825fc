package pooler

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/admission/classify"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/wire"
)

var clientIDs atomic.Uint64

// errSilent ends a connection without an error message (EOF, cancel request).
var errSilent = errors.New("silent close")

// client is one client connection. Its goroutine (serve) owns everything
// outside mu; while a server is linked, one pump goroutine relays that
// server's replies to the client. Exactly one of them writes the client
// socket at a time: the pump while linked, serve while not. The hand-over
// happens under mu.
type client struct {
	svc *Service
	id  uint64
	// conn is replaced when a parked client resumes (park.go): goroutines
	// other than serve read it under mu.
	conn      net.Conn
	raddr     netip.AddrPort // the peer, for TCP (kept: conn goes when parked)
	laddr     netip.AddrPort // our end, for TCP
	r         *wire.Reader   // nil while parked, as is w
	w         *wire.Writer
	connected time.Time

	user   string // login user
	dbName string // database name the client asked for
	pool   *Pool
	mode   config.PoolMode
	key    [8]byte
	// params are the client's values of tracked parameters, keyed by the
	// canonical name. serve reads them when it links a server; the pump
	// updates them from ParameterStatus while linked.
	params map[string]string

	mu sync.Mutex
	// queryStart is when the current (or last) request started.
	queryStart time.Time
	// stmts maps the client's prepared-statement names to definitions.
	stmts map[string]*stmtDef
	// unnamedParse is the body of the client's last Parse of the unnamed
	// statement, and unnamedGen counts them (relay_prepared.go).
	unnamedParse []byte
	unnamedGen   uint64
	adm          *clientAdmission // admission state (admission_file); nil until needed

	// gone: the client left while linked; the pump drains.
	gone atomic.Bool
	// inLoop: logged in and relaying (park.go may park it); parkWanted:
	// the janitor asked serve to park; parkFD: its socket while parked
	// (guarded by the service's parker.mu).
	inLoop     atomic.Bool
	parkWanted atomic.Bool
	parkFD     int32
	tls        bool // the connection switched to TLS
	local      bool // connected over the Unix socket
	// tracking is set when protocol-level prepared statements are mapped
	// (transaction/statement mode, max_prepared_statements > 0).
	tracking bool
	// killed: KILL_CLIENT dropped the client (under mu); a parked client
	// ends when it resumes.
	killed bool

	// The link state and buffers, which a parked client does without:
	// park.go drops them (under mu) and resume makes them anew. Other
	// goroutines reach these fields only under mu and only after checking
	// clientLink is not nil.
	*clientLink
}

// newClientLink returns an empty link part whose condition uses the
// client's mu.
func newClientLink(mu *sync.Mutex) *clientLink {
	l := &clientLink{}
	l.writerDone.L = mu
	return l
}

// clientLink is the part of a client that serves its requests: buffers,
// the linked server and the protocol position on it, waits. Its fields
// are promoted into client; c.mu guards what the comments say it does.
type clientLink struct {
	scratch []byte
	pumpOut []byte // the pump's own messages to the client
	out     []byte // rewritten messages on their way to a server
	// splices are the long texts a rewrite in out carries by reference
	// (relay_prepared.go, writeRewrite).
	splices []splice
	// replies counts, for linkState.failing, the server's replies that
	// complete an extended-protocol message since its last ReadyForQuery.
	// Only the link's pump touches it.
	replies int
	// ops are the replies the linked server owes, for mapping (prepared.go).
	ops opQueue
	// skipToSync drops client messages up to the next Sync after an error
	// the pooler raised itself, as Postgres does after its own errors.
	skipToSync bool
	// writerDone is signalled when serve stops writing to the linked
	// server (writing goes false).
	writerDone sync.Cond
	srv        *server // linked server, nil when none
	// writing is set while serve may still touch the linked server's writer
	// (between recording a message and flushing the batch). The pump never
	// releases the server while it is set: the server's next holder would
	// share the writer.
	writing  bool
	ls       linkState     // protocol position on the link
	pumpDone chan struct{} // closed when the link's pump exits; nil until it starts
	// pumpStarted: the link has a pump goroutine (serve's own; see
	// relayOrPump).
	pumpStarted bool
	detach      bool // serve is closing the link on purpose
	// detachReason is logged when serve closes the linked server.
	detachReason string
	resetDue     bool // server_reset_query still to run before release
	// drain is the progress of bringing the server back after the client
	// left (drain.go).
	drain *drainState // nil until the client leaves mid-link
	// Statistics: serve's batch byte count and the start of the current
	// transaction (queryStart is the client's) (written by serve before the request goes out,
	// read by the pump after its reply: ordered by the link).
	recvBytes int64
	xactStart time.Time
	// sentBytes is the pump's count since the last ReadyForQuery.
	sentBytes int64
	// waiting is set while serve waits for a server, at the admission
	// gate or in the pool's queue; a cancel request then signals
	// cancelWait, which the gate hears, and ends the pool wait through
	// Pool.cancelWaiter.
	waiting    bool
	waitStart  time.Time
	cancelWait chan struct{}
	// poolWait is serve's waiter in the pool's queue, made at the first
	// wait and reused; link numbers each wait in it under mu.
	poolWait *poolWaiter
}

// errWaitCanceled ends a wait for a server on the client's cancel request.
var errWaitCanceled = errors.New("canceled while waiting for a server")

// queryCanceled answers a request whose wait for a server was cancelled, as
// Postgres answers a cancelled query: ERROR 57014, and the client stays
// usable. A simple query is done with ReadyForQuery; in the extended
// protocol the rest of the batch is dropped up to its Sync, which gets the
// ReadyForQuery.
func (c *client) queryCanceled(typ byte) error {
	if err := c.r.Skip(); err != nil {
		return err
	}
	out := wire.AppendErrorResponse(c.scratch[:0], wire.MsgErrorResponse, "ERROR", "57014", "canceling statement due to user request", "", "")
	return c.refuse(typ, out)
}

// refuse sends out, an ErrorResponse for a request the pooler refused
// before any server saw it (message typ, already consumed), the way
// Postgres ends a failed request: a simple Query, Sync or FunctionCall is
// done with ReadyForQuery 'I'; in the extended protocol the rest of the
// batch is dropped up to its Sync, which gets the ReadyForQuery.
func (c *client) refuse(typ byte, out []byte) error {
	switch typ {
	case wire.MsgQuery, wire.MsgSync, wire.MsgFunctionCall:
		out = wire.AppendReadyForQuery(out, wire.TxIdle)
	default:
		c.mu.Lock()
		c.skipToSync = true
		c.mu.Unlock()
	}
	c.scratch = out
	if err := c.w.Write(out); err != nil {
		return err
	}
	return c.w.Flush()
}

func (c *client) String() string { return fmt.Sprintf("C-%d", c.id) }

// logger is the service's logger with the client's attributes. It is built
// for each message rather than kept: logging a client is rare, and thousands
// of idle clients should not each hold a logger.
func (c *client) logger() *slog.Logger {
	addr := "unix"
	if !c.local {
		addr = c.raddr.String()
	}
	l := c.svc.log.With("conn", c.String(), "addr", addr)
	if c.user != "" {
		l = l.With("db", c.dbName, "user", c.user)
	}
	return l
}

// addrParts is an address as SHOW CLIENTS lists it: "unix" and port 0 for
// the Unix socket.
func (c *client) addrParts(a netip.AddrPort) (string, int) {
	if c.local {
		return "unix", 0
	}
	return a.Addr().String(), int(a.Port())
}

// addrPortOf is a TCP address as a value (no allocation to keep), IPv4
// unmapped; the zero AddrPort for anything else.
func addrPortOf(a net.Addr) netip.AddrPort {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip.Unmap().WithZone(ta.Zone), uint16(ta.Port))
}

// setParamLocked records the client's new value of a tracked parameter.
// Parameter maps are never changed in place: clients with the same
// parameters share one map (Pool.initialParams), so a change copies it.
func (c *client) setParamLocked(canon, value string) {
	if v, ok := c.params[canon]; ok && v == value {
		return
	}
	m := make(map[string]string, len(c.params)+1)
	for k, v := range c.params {
		m[k] = v
	}
	m[canon] = value
	c.params = m
}

// serve runs the client's whole life.
func (c *client) serve() {
	loggedIn := false
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error(fmt.Sprintf("panic in client: %v", r))
		}
		if !loggedIn {
			c.conn.Close()
			c.svc.clientClosed(c)
		}
	}()
	if err := c.login(); err != nil {
		c.fail(err)
		return
	}
	loggedIn = true
	// The login ran deep (TLS handshake, SCRAM) and grew this goroutine's
	// stack, which Go only shrinks at a garbage collection. The rest of
	// the client's life, mostly idle, runs on a fresh goroutine whose stack
	// starts small: idle clients are many.
	go c.serveLoggedIn(true)
}

// serveLoggedIn relays for a logged-in client until it leaves or parks
// (park.go); a parked client comes back here on a new goroutine.
func (c *client) serveLoggedIn(afterLogin bool) {
	parked := false
	defer func() {
		if r := recover(); r != nil {
			c.logger().Error(fmt.Sprintf("panic in client: %v", r))
		}
		if !parked {
			c.conn.Close()
			c.svc.clientClosed(c)
		}
	}()
	parked = c.loop(afterLogin)
}

// fail sends err to an unlinked client when it is a pooler error and logs
// why the client is going.
func (c *client) fail(err error) {
	if errors.Is(err, errSilent) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	var pe *Error
	var ae *auth.Error
	var pge *auth.ServerError
	var se *wire.StartupError
	switch {
	case errors.As(err, &pe):
	case errors.As(err, &ae):
		pe = &Error{Severity: "FATAL", SQLState: ae.SQLState, Message: ae.Message}
	case errors.As(err, &pge):
		// A server's own error during login is forwarded as is; one
		// without a SQLSTATE (a broken or hostile server) gets 08P01.
		pe = &Error{Severity: "FATAL", SQLState: pge.Fields.Code, Message: pge.Fields.Message}
		if pe.SQLState == "" {
			pe.SQLState = "08P01"
		}
		if pe.Message == "" {
			pe.Message = "server login failed"
		}
	case errors.As(err, &se):
		pe = &Error{Code: CodeBadPacket, Severity: "FATAL", SQLState: "08P01", Message: se.Message}
	case errors.Is(err, wire.ErrMessageTooLarge):
		pe = newError(CodePacketTooLarge)
	case errors.Is(err, wire.ErrBadLength):
		pe = newError(CodeBadPacket)
	case isTimeout(err):
		pe = newError(CodeClientLoginTimeout)
	default:
		// Go's error strings (addresses, ports, system errors) are for
		// the log only. A failure of the client's own connection gets
		// no message: it could not be delivered.
		c.logger().Warn(c.String() + ": closing because: " + err.Error())
		if isConnError(err) {
			return
		}
		pe = newError(CodeServerConnectFailed, loginReason(err))
	}
	if c.svc.settings().LogPoolerErrors {
		c.logger().Warn(c.String() + ": pooler error: " + pe.Message)
	}
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.w.Write(appendError(c.scratch[:0], pe))
	c.w.Flush()
}

// isConnError reports an error of a socket itself (reset, broken pipe,
// closed), after which nothing more can be said on it.
func isConnError(err error) bool {
	var op *net.OpError
	var errno syscall.Errno
	return errors.As(err, &op) || errors.As(err, &errno) || errors.Is(err, io.ErrNoProgress)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// login reads the startup packet, authenticates, and sends the welcome.
func (c *client) login() error {
	st := c.svc.settings()
	if st.ClientLoginTimeout > 0 {
		c.conn.SetDeadline(time.Now().Add(st.ClientLoginTimeout))
	}
	var su *wire.Startup
	// Postgres takes each encryption request once; one repeated (after
	// 'N', or inside the TLS it started) is refused at once, in its words.
	var sslAsked, gssAsked bool
	for tries := 0; ; tries++ {
		var err error
		su, err = wire.ReadStartup(c.conn)
		if err != nil {
			if errors.Is(err, wire.ErrOldProtocol) {
				return newError(CodeOldProtocol)
			}
			return err
		}
		if su.Kind == wire.StartupMessage {
			break
		}
		if su.Kind == wire.CancelRequest {
			c.svc.cancel(su.CancelKey)
			return errSilent
		}
		if tries > 2 {
			return newError(CodeBadPacket)
		}
		switch {
		case su.Kind == wire.SSLRequest && sslAsked:
			return &wire.StartupError{Message: "unsupported frontend protocol 1234.5679: server supports 3.0 to 3.0"}
		case su.Kind == wire.GSSENCRequest && gssAsked:
			return &wire.StartupError{Message: "unsupported frontend protocol 1234.5680: server supports 3.0 to 3.0"}
		}
		sslAsked = sslAsked || su.Kind == wire.SSLRequest
		gssAsked = gssAsked || su.Kind == wire.GSSENCRequest
		if su.Kind == wire.SSLRequest && !c.tls {
			if cfg := c.svc.sec.Load().clientTLS; cfg != nil {
				if err := c.startTLS(cfg); err != nil {
					return err
				}
				continue
			}
		}
		// No TLS configured, or GSSENCRequest: the client continues in
		// plaintext or gives up, as with PgBouncer.
		if _, err := c.conn.Write([]byte{'N'}); err != nil {
			return err
		}
	}
	if !c.tls && auth.ClientTLSRequired(st.ClientTLSSSLMode) && !c.local {
		return newError(CodeSSLRequired)
	}
	startupParams, unrecognized, err := c.readParams(su)
	if err != nil {
		return err
	}
	// The console stays reachable when the pooler is full or stopping.
	if c.dbName != adminDB {
		if int(c.svc.clientCount.Load()) > st.MaxClientConn {
			return newError(CodeMaxClientConn)
		}
		if c.svc.shuttingDown.Load() {
			return newError(CodeShuttingDown)
		}
	}
	if c.user == "" {
		return newError(CodeNoUserName)
	}
	if st.LogConnections {
		c.logger().Info(fmt.Sprintf("%s: %s/%s@%s login attempt: db=%s user=%s tls=%s", c, c.dbName, c.user, c.conn.RemoteAddr(), c.dbName, c.user, c.tlsVersion()))
	}
	if su.Minor > 0 || len(unrecognized) > 0 {
		// We speak 3.0: tell a newer client so, and name the protocol
		// options we ignore.
		c.scratch = wire.AppendNegotiateProtocolVersion(c.scratch[:0], 0, unrecognized)
		if err := c.w.Write(c.scratch); err != nil {
			return err
		}
	}
	if c.dbName == adminDB {
		return c.consoleLogin()
	}
	// Nothing the client sees before it has authenticated may depend on
	// whether its database exists (PgBouncer's "fake database"): an
	// unknown database gets the same exchange as a known one, and only a
	// client that proved its password learns that it does not exist.
	cfg := c.svc.config()
	db, dbKnown := cfg.LookupDatabase(c.dbName)
	if !dbKnown {
		db = &config.Database{Name: c.dbName}
	}
	secret, res, err := c.authenticate(db, dbKnown)
	if err != nil {
		return err
	}
	if !dbKnown {
		if st.LogConnections {
			c.logger().Info(fmt.Sprintf("%s: login failed: db=%s user=%s", c, c.dbName, c.user))
		}
		return newError(CodeNoSuchDatabase, c.dbName)
	}
	if c.svc.isDisabled(c.dbName) {
		return newError(CodeDatabaseDisabled, c.dbName)
	}
	pool, err := c.svc.poolFor(db, c.user)
	if err != nil {
		return err
	}
	if db.User == "" && secret != nil {
		// The server login of this pool uses the secret the client was
		// checked against (fresh from auth_query, or auth_file), and the
		// client's SCRAM keys when it proved them: SCRAM pass-through.
		pool.setCredentials(secret, res.ClientKey)
	}
	c.pool = pool
	eff := pool.effective()
	c.mode = eff.PoolMode
	c.tracking = c.mode != config.PoolModeSession && st.MaxPreparedStatements > 0
	pool.addClient(1)
	if !pool.hasWelcome() {
		// Like PgBouncer, the first client of a pool waits for a server
		// login so the welcome carries the real server's parameters.
		s, err := pool.acquire(nil, nil)
		if err != nil {
			return err
		}
		pool.release(s)
	}
	if st.ApplicationNameAddHost {
		// PgBouncer's format: "<name> - <host>:<port>".
		startupParams["application_name"] += " - " + c.conn.RemoteAddr().String()
	}
	c.params = pool.initialParams(startupParams)
	if _, err := rand.Read(c.key[:]); err != nil {
		return err
	}
	c.svc.registerCancel(c)
	pool.stats.logins.Add(1)
	c.scratch = wire.AppendAuthenticationOk(c.scratch[:0])
	for name, value := range pool.welcomeParams() {
		if v, ok := c.params[name]; ok {
			value = v
		}
		c.scratch = wire.AppendParameterStatus(c.scratch, name, value)
	}
	for name, value := range c.params {
		if _, ok := pool.welcomeParams()[name]; !ok {
			c.scratch = wire.AppendParameterStatus(c.scratch, name, value)
		}
	}
	c.scratch = wire.AppendBackendKeyData(c.scratch, c.key)
	c.scratch = wire.AppendReadyForQuery(c.scratch, wire.TxIdle)
	err = c.w.Write(c.scratch)
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

// maxProtocolMessage is the largest message (type byte and length field
// included) any Postgres takes: its length field may not exceed
// PQ_LARGE_MESSAGE_LIMIT (1 GiB - 2), and Postgres ends the session over a
// larger one.
const maxProtocolMessage = 1<<30 - 1

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
	for _, p := range su.Params {
		switch {
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
		case ignored(p.Name):
		default:
			return nil, nil, newError(CodeUnsupportedStartupParam, p.Name)
		}
	}
	if c.dbName == "" {
		c.dbName = c.user
	}
	return params, unrecognized, nil
}

func (c *client) readOptions(opts string, params map[string]string, ignored func(string) bool) error {
	if ignored("options") {
		return nil
	}
	fields := strings.Fields(opts)
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		var kv string
		switch {
		case f == "-c" && i+1 < len(fields):
			i++
			kv = fields[i]
		case strings.HasPrefix(f, "-c") && len(f) > 2:
			kv = f[2:]
		case strings.HasPrefix(f, "--"):
			kv = f[2:]
		default:
			return newError(CodeUnsupportedOptions)
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			// "-c=" or "--=x" names nothing (PgBouncer once looped on
			// them): the same refusal as any other malformed option.
			return newError(CodeUnsupportedOptions)
		}
		k = strings.ReplaceAll(k, "-", "_")
		if rest, ok := strings.CutPrefix(strings.ToLower(k), "pgturnstile."); ok {
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
		} else if !ignored(k) {
			return newError(CodeUnsupportedOptionsParam, k)
		}
	}
	return nil
}

// authenticate checks the client by auth_type (or the auth_hba_file rule
// for its connection), against the global user store: an auth_file user
// uses its secret; any other user, when an auth_user is configured, gets
// its secret from auth_query on every login (so a changed password counts
// at once); otherwise the login fails like a wrong password, without saying
// that the user is unknown. It returns the secret the client was checked
// against and what SCRAM left for a pass-through server login.
//
// dbKnown=false: db is a stand-in for a database that does not exist. The
// exchange is the one a known database would get (an auth_file user with
// its own secret, anyone else a mock one), so that a client learns nothing
// before it has authenticated; auth_query then runs only in a global
// auth_dbname, as there is no database of the client's to run it in.
func (c *client) authenticate(db *config.Database, dbKnown bool) (*auth.Secret, auth.Result, error) {
	st := c.svc.settings()
	var none auth.Result
	var m auth.Method
	switch st.AuthType {
	case "hba":
		rule, ok := c.svc.sec.Load().hba.Match(auth.HBAConn{
			Local: c.local, TLS: c.tls, Addr: c.remoteIP(), Database: c.dbName, User: c.user,
		})
		if !ok || rule.Method == auth.HBAReject {
			return nil, none, newError(CodeHBANoEntry, c.remoteIP().String(), c.user, c.dbName)
		}
		switch rule.Method {
		case auth.HBATrust:
			m = auth.MethodTrust
		case auth.HBAMD5:
			m = auth.MethodMD5
		case auth.HBAPassword:
			m = auth.MethodPlain
		case auth.HBASCRAM:
			m = auth.MethodSCRAM
		case auth.HBACert:
			return nil, none, c.certAuth()
		default:
			return nil, none, newError(CodeHBAMethodUnsupported, rule.Method.String())
		}
	case "cert":
		return nil, none, c.certAuth()
	default:
		var err error
		if m, err = auth.ParseMethod(st.AuthType); err != nil {
			return nil, none, newError(CodeAuthTypeInvalid, err.Error())
		}
	}
	if m == auth.MethodAny {
		return nil, none, nil
	}
	u, known := c.svc.users.Load().Lookup(c.user)
	var secret *auth.Secret
	switch {
	case known && u.Source == auth.SourceAuthFile:
		secret = u.Secret
	case authUserFor(db, st) != "" && db.Name != adminDB && (dbKnown || st.AuthDBName != ""):
		sec, found, err := c.svc.authQuery(db, c.user)
		if err != nil {
			c.logger().Warn(c.String() + ": auth_query failed: " + err.Error())
			return nil, none, newError(CodeAuthQueryFailed)
		}
		if found {
			secret = sec
			c.svc.users.Load().NoteAuthQuery(c.user)
		}
	}
	if m == auth.MethodTrust {
		if secret == nil && !known {
			return nil, none, newError(CodeNoSuchUser, c.user)
		}
		return secret, none, nil
	}
	if secret == nil && c.svc.settings().LogConnections {
		c.logger().Info(c.String() + ": no such user: " + c.user)
	}
	res, err := auth.Authenticate(c, m, c.user, secret)
	return secret, res, err
}

// certAuth admits a client whose verified TLS certificate's common name is
// its user name.
func (c *client) certAuth() error {
	if tc, ok := c.conn.(*tls.Conn); ok {
		certs := tc.ConnectionState().PeerCertificates
		if len(certs) > 0 && certs[0].Subject.CommonName == c.user && len(tc.ConnectionState().VerifiedChains) > 0 {
			return nil
		}
	}
	return newError(CodeCertAuthFailed, c.user)
}

// authUserFor is the auth_user of a database entry, else the global one.
func authUserFor(db *config.Database, st *config.Settings) string {
	if db.AuthUser != "" {
		return db.AuthUser
	}
	return st.AuthUser
}

// startTLS answers an SSLRequest with 'S' and runs the handshake; the
// connection continues, with a new startup packet, over TLS.
func (c *client) startTLS(cfg *tls.Config) error {
	if _, err := c.conn.Write([]byte{'S'}); err != nil {
		return err
	}
	tc := tls.Server(c.conn, cfg)
	if err := tc.Handshake(); err != nil {
		return err
	}
	c.mu.Lock()
	c.conn = tc
	c.mu.Unlock()
	c.tls = true
	c.r = wire.NewReader(tc, clientReadBuffer)
	c.r.SetBudget(c.svc.held)
	c.w = wire.NewPooledWriter(tc, wire.DefaultBufferSize)
	return nil
}

func (c *client) tlsVersion() string {
	if tc, ok := c.conn.(*tls.Conn); ok {
		return tls.VersionName(tc.ConnectionState().Version)
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

// Send implements auth.Conn.
func (c *client) Send(msg pgproto3.BackendMessage) error {
	b, err := msg.Encode(c.scratch[:0])
	if err != nil {
		return err
	}
	c.scratch = b
	if err := c.w.Write(b); err != nil {
		return err
	}
	return c.w.Flush()
}

// ReadPassword implements auth.Conn.
func (c *client) ReadPassword() ([]byte, error) {
	typ, _, err := c.r.Next()
	if err != nil {
		return nil, err
	}
	if typ != wire.MsgPassword {
		// Not skipped: the login ends here, and the "message" may be a
		// second startup packet whose bytes read as a huge length.
		return nil, newError(CodeExpectedPassword, typ)
	}
	return c.r.Body()
}

// adminDB is the virtual database of the admin console.
const adminDB = "pgbouncer"

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
	if c.user == adminDB && c.local && c.peerIsSelf() {
		role, ok = admin.RoleAdmin, true
	} else {
		if _, _, err := c.authenticate(&config.Database{Name: adminDB}, true); err != nil {
			return err
		}
		if !ok {
			return newError(CodeAdminNotAllowed)
		}
	}
	c.dbName = adminDB
	if _, err := rand.Read(c.key[:]); err != nil {
		return err
	}
	c.svc.registerCancel(c) // listed by SHOW CLIENTS
	out := wire.AppendAuthenticationOk(c.scratch[:0])
	for _, kv := range [][2]string{
		{"server_version", "15.0 (" + Version + ")"}, {"client_encoding", "UTF8"}, {"server_encoding", "UTF8"},
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
	err := admin.Serve(c.svc, c.r, c.w, c.user, role)
	if err != nil && !errors.Is(err, io.EOF) {
		c.logger().Info(c.String() + ": console closed: " + err.Error())
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

// loop relays client messages to linked servers until the client leaves.
// afterLogin: the client has just logged in; if it sends nothing within
// parkAfterLogin it parks (park.go).
func (c *client) loop(afterLogin bool) (parked bool) {
	st := c.svc.settings()
	timeouts := st.ClientIdleTimeout > 0 || st.IdleTransactionTimeout > 0
	c.inLoop.Store(true)
	// The early-park deadline is armed only where the janitor would park
	// the client later anyway (a system with parking, no idle timeouts,
	// which own the deadline, and no TLS); it is cleared by the first
	// message.
	loginGrace := netpoll.CanPark && afterLogin && !timeouts && !c.tls
	if loginGrace {
		c.parkWanted.Store(true)
		c.conn.SetReadDeadline(time.Now().Add(parkAfterLogin))
	}
	// msgArmed: awaitMessage set the read deadline for the message just
	// read (client_message_timeout, or none); it is taken off before the
	// next message.
	msgArmed := false
	for {
		if timeouts {
			c.armClientDeadline(st)
		} else if msgArmed {
			c.conn.SetReadDeadline(time.Time{})
		}
		msgArmed = false
		typ, n, err := c.r.Next()
		if loginGrace {
			loginGrace = false
			if err == nil {
				c.parkWanted.Store(false)
				c.conn.SetReadDeadline(time.Time{})
			}
		}
		if err != nil {
			if isTimeout(err) && c.parkWanted.Load() {
				if c.tryPark() {
					return true // another goroutine owns c now
				}
				continue
			}
			if isTimeout(err) && c.clientTimedOut(st) {
				return false
			}
			if isTimeout(err) {
				continue
			}
			if errors.Is(err, wire.ErrMessageTooLarge) {
				// Refused on its header: nothing of it reached the
				// server, which stays clean.
				c.closeBadInput(newError(CodePacketTooLarge), "")
				return false
			}
			if errors.Is(err, wire.ErrBadLength) {
				c.closeBadInput(newError(CodeBadPacket), "")
				return false
			}
			c.leave(err)
			return false
		}
		if !isFrontendType(typ) {
			// Checked on the header alone: the body is not read (a
			// startup packet sent again reads as type 0 with a length
			// of its own). Never forwarded: Postgres would end its
			// backend over it.
			c.closeBadInput(newError(CodeUnknownPacket), fmt.Sprintf("unknown pkt from client: %d/0x%x", typ, typ))
			return false
		}
		if n > largeMessageLimit || n > smallMessageLimit && isSmallMessage(typ) {
			// Postgres ends its backend over such a message; refused
			// from the header, as Postgres does, before any is read.
			c.closeBadInput(newError(CodeInvalidMessageLength), fmt.Sprintf("message %q of %d bytes", typ, n))
			return false
		}
		if typ == wire.MsgQuery && st.DisablePQExec {
			// disable_pqexec: a simple Query may carry several
			// statements, which some SQL injections rely on.
			c.closeBadInput(newError(CodePQExecDisallowed), "client used \"Query\" packet type")
			return false
		}
		if typ == wire.MsgTerminate {
			c.r.Skip()
			c.leave(nil)
			return false
		}
		if !c.r.Pending() {
			// The message has not all arrived: wait for it before a
			// server is taken or written to.
			msgArmed = true
			if err := c.awaitMessage(st, n); err != nil {
				if isTimeout(err) {
					c.closeBadInput(newError(CodeClientMessageTimeout), "")
				} else {
					c.leave(err)
				}
				return false
			}
		}
		c.mu.Lock()
		s := c.srv
		if s == nil && (c.tracking || c.skipToSync) {
			c.mu.Unlock()
			handled, err := c.answerUnlinked(typ, n)
			if errors.Is(err, wire.ErrBudgetExceeded) {
				c.closeBadInput(newError(CodeHeldMessageBudget), "")
				return false
			}
			if err != nil {
				c.leaveOrTimeout(err, msgArmed, st)
				return false
			}
			if handled {
				continue
			}
			c.mu.Lock()
			s = c.srv
		}
		if s == nil {
			c.mu.Unlock()
			s, err = c.link(typ, n)
			if errors.Is(err, errWaitCanceled) {
				if err := c.queryCanceled(typ); err != nil {
					c.leave(err)
					return false
				}
				continue
			}
			if shed, ok := err.(*shedError); ok {
				if err := c.shed(typ, shed.policy, shed.ShedError); err != nil {
					c.leave(err)
					return false
				}
				continue
			}
			if err != nil {
				c.r.Skip()
				c.fail(err)
				return false
			}
			c.mu.Lock()
		}
		if c.skipToSync && typ != wire.MsgSync {
			// After an error the pooler raised, like Postgres: drop
			// everything up to the client's Sync.
			c.mu.Unlock()
			if err := c.r.Skip(); err != nil {
				c.leaveOrTimeout(err, msgArmed, st)
				return false
			}
			c.flushBatch(s, false)
			if !c.r.Pending() {
				c.startPump(s)
			}
			continue
		}
		c.skipToSync = false
		if c.ls.feeding && !isCopyInput(typ) {
			// Postgres would end the COPY with an error over it and
			// consume it; what the client's later messages then get
			// depends on how far the server had read.
			c.mu.Unlock()
			c.closeBadInput(newError(CodeCopyUnexpectedMessage, typ), "")
			return false
		}
		ignored := c.ls.feeding // a Sync or Flush the server ignores in COPY IN
		if c.ls.idle() {
			// The first request after an idle point starts a query (and
			// a transaction when none is open).
			c.queryStart = time.Now()
			if c.ls.txStatus == wire.TxIdle {
				c.xactStart = c.queryStart
			}
		}
		c.ls.fromClient(typ)
		c.recvBytes += int64(n) + 5
		switch typ {
		case wire.MsgParse:
			c.pool.stats.clientParses.Add(1)
		case wire.MsgBind:
			c.pool.stats.binds.Add(1)
		}
		mapped := false
		if c.tracking {
			switch typ {
			case wire.MsgParse, wire.MsgBind, wire.MsgDescribe, wire.MsgClose, wire.MsgQuery:
				mapped = true
			case wire.MsgSync, wire.MsgFunctionCall:
				if !ignored {
					c.ops.push(op{kind: opSync, msg: typ})
				}
			}
		}
		c.writing = true
		c.mu.Unlock()
		if st.QueryTimeout > 0 && (typ == wire.MsgQuery || typ == wire.MsgSync) {
			s.conn.SetReadDeadline(time.Now().Add(st.QueryTimeout))
		}
		if mapped {
			err = c.relayMapped(typ, n, s)
		} else {
			err = c.r.Forward(s.w)
		}
		if err != nil {
			if s.w.Err() != nil {
				// The server is gone; its pump reports it to the client.
				s.conn.Close()
				c.doneWriting()
				c.startPump(s)
				continue
			}
			c.doneWriting()
			if msgArmed && st.ClientMessageTimeout > 0 && isTimeout(err) {
				// A message larger than the read buffer stalled
				// midway: the server has part of it and cannot be
				// brought back clean.
				c.unlinkAndClose("client_message_timeout")
				c.fail(newError(CodeClientMessageTimeout))
				return false
			}
			if errors.Is(err, wire.ErrBudgetExceeded) {
				// Nothing of the message was passed on: the server
				// goes back clean.
				c.closeBadInput(newError(CodeHeldMessageBudget), "")
				return false
			}
			c.leave(err)
			return false
		}
		c.flushBatch(s, c.willRelayInline(s, typ))
		if c.relayOrPump(s, typ) && c.pool.hasWaiters() {
			// The reply is out and the server is back in the pool, which
			// has clients queued: the pooler is busy. Let the runnable
			// goroutines go first; by the time this one reads its client
			// again the next request has usually arrived, which saves a
			// read that finds nothing and the park and wake-up after it.
			// (A client's request waits for a server anyway.)
			runtime.Gosched()
		}
	}
}

// isFrontendType reports whether typ is a message a logged-in client may
// send: the frontend messages of protocol 3.0 after authentication
// (PasswordMessage 'p' belongs to the login only). Postgres ends the
// session over any other ("invalid frontend message type"), PgBouncer the
// client ("unknown pkt").
func isFrontendType(typ byte) bool {
	switch typ {
	case wire.MsgBind, wire.MsgClose, wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail,
		wire.MsgDescribe, wire.MsgExecute, wire.MsgFlush, wire.MsgFunctionCall, wire.MsgParse,
		wire.MsgQuery, wire.MsgSync, wire.MsgTerminate:
		return true
	}
	return false
}

// smallMessageLimit is the largest body Postgres takes in a message that
// carries no query or data (PQ_SMALL_MESSAGE_LIMIT): Describe, Close, Sync,
// Flush, Terminate, CopyDone and CopyFail.
const smallMessageLimit = 10000

// largeMessageLimit is Postgres's limit for every other message
// (PQ_LARGE_MESSAGE_LIMIT), below the largest max_packet_size.
const largeMessageLimit = 1<<30 - 2

func isSmallMessage(typ byte) bool {
	switch typ {
	case wire.MsgDescribe, wire.MsgClose, wire.MsgSync, wire.MsgFlush, wire.MsgTerminate, wire.MsgCopyDone, wire.MsgCopyFail:
		return true
	}
	return false
}

// awaitMessage waits until the current message, of n body bytes, is in the
// read buffer whole, before any of it goes on: a server is taken (link), or
// written to, only for a message that has arrived, so a client that sends
// a header and stalls holds no server (PgBouncer links one on the header).
// A message larger than the read buffer is streamed and cannot be held back
// whole: its server is taken once the buffer is full of it, and a stall
// after that holds the server.
//
// The wait, and the streaming of a larger message after it, end after
// client_message_timeout when it is set: the read deadline stays armed for
// the rest of the message (loop takes it off). A park request or an idle
// deadline that expires meanwhile does not end it: the client is busy.
func (c *client) awaitMessage(st *config.Settings, n int) error {
	var deadline time.Time
	if st.ClientMessageTimeout > 0 {
		deadline = time.Now().Add(st.ClientMessageTimeout)
	}
	c.conn.SetReadDeadline(deadline)
	for {
		_, err := c.r.Peek(n)
		if err == nil || !isTimeout(err) {
			return err
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return err
		}
		// Not our deadline: the janitor's park request, or one armed
		// for idleness. A client with part of a message sent is neither
		// parked nor idle.
		c.parkWanted.Store(false)
		c.conn.SetReadDeadline(deadline)
	}
}

// leaveOrTimeout ends the client after a read of its current message
// failed: client_message_timeout when that deadline passed (nothing of the
// message went to a server), else the client left.
func (c *client) leaveOrTimeout(err error, msgArmed bool, st *config.Settings) {
	if msgArmed && st.ClientMessageTimeout > 0 && isTimeout(err) {
		c.closeBadInput(newError(CodeClientMessageTimeout), "")
		return
	}
	c.leave(err)
}

// closeBadInput ends a client over input the pooler refuses (an unknown
// message type, a bad or oversized header, a message not finished within
// client_message_timeout) before any of it was passed on. A linked server
// is not closed for it: it goes through leave's drain (replies discarded,
// Sync, ROLLBACK, reset) and back to the pool. The client gets e once
// nothing else writes to it: at once when serve owns its writer, else after
// the pump has finished the drain. detail, when set, is logged.
func (c *client) closeBadInput(e *Error, detail string) {
	if detail != "" {
		c.logger().Warn(c.String() + ": " + detail)
	}
	if c.svc.logDisconnections() {
		c.logger().Info(c.String() + ": closing because: " + e.Message + " (age=" + formatAge(time.Since(c.connected)) + ")")
	}
	var done chan struct{}
	if c.pumpStarted {
		// The link's pump may write to the client until it has seen the
		// client go (or, after a link that ended, until it has exited).
		c.mu.Lock()
		done = c.pumpDone
		c.mu.Unlock()
	}
	if done == nil {
		c.fail(e)
		c.abandonLink()
		return
	}
	c.abandonLink()
	<-done
	c.fail(e)
}

// flushBatch flushes to the server once the client's batch is consumed,
// then hands the server's writer back. With awaitReply (serve reads the
// reply itself next, see willRelayInline) it returns once the reply starts
// to arrive, saving the read that would find nothing yet.
func (c *client) flushBatch(s *server, awaitReply bool) {
	if c.r.Pending() {
		return
	}
	if c.recvBytes > 0 {
		c.pool.stats.received.Add(c.recvBytes)
		c.recvBytes = 0
	}
	var err error
	if awaitReply {
		err = s.w.FlushAwaitReply()
	} else {
		err = s.w.Flush()
	}
	if err != nil {
		s.conn.Close()
	}
	c.doneWriting()
}

// willRelayInline reports whether relayOrPump will read the reply to the
// batch just relayed on this goroutine: the batch ends with Sync or Query
// (the server answers it), no pump reads the server, and nothing of an
// earlier reply is left unread in the server's buffer.
func (c *client) willRelayInline(s *server, typ byte) bool {
	return !c.r.Pending() && !c.pumpStarted && (typ == wire.MsgSync || typ == wire.MsgQuery) && s.r.Buffered() == 0
}

// doneWriting hands the linked server's writer back: from here on the pump
// may release the server.
func (c *client) doneWriting() {
	c.mu.Lock()
	c.writing = false
	c.writerDone.Broadcast()
	c.mu.Unlock()
}

// armClientDeadline sets the read deadline for client_idle_timeout or
// idle_transaction_timeout from the current link state.
func (c *client) armClientDeadline(st *config.Settings) {
	c.mu.Lock()
	linked := c.srv != nil
	idleInTx := linked && c.ls.idle() && c.ls.txStatus != wire.TxIdle
	c.mu.Unlock()
	var d time.Duration
	switch {
	case !linked:
		d = st.ClientIdleTimeout
	case idleInTx:
		d = st.IdleTransactionTimeout
	}
	if d > 0 {
		c.conn.SetReadDeadline(time.Now().Add(d))
	} else {
		c.conn.SetReadDeadline(time.Time{})
	}
}

// clientTimedOut handles a client read deadline; true if the client was
// closed.
func (c *client) clientTimedOut(st *config.Settings) bool {
	c.mu.Lock()
	linked := c.srv != nil
	idleInTx := linked && c.ls.idle() && c.ls.txStatus != wire.TxIdle
	c.mu.Unlock()
	switch {
	case !linked && st.ClientIdleTimeout > 0:
		c.fail(newError(CodeClientIdleTimeout))
		return true
	case idleInTx && st.IdleTransactionTimeout > 0:
		c.unlinkAndClose("idle transaction timeout")
		c.fail(newError(CodeIdleTransactionTimeout))
		return true
	}
	return false
}

// unlinkAndClose closes the linked server on purpose and waits for its pump
// to stop, after which serve owns the client socket again.
func (c *client) unlinkAndClose(reason string) {
	c.mu.Lock()
	s := c.srv
	c.detach = true
	c.detachReason = reason
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.conn.Close()
	c.startPump(s) // the pump reports the closed server and ends the link
	<-c.pumpDone
}

// link checks a server out for this client, brings its tracked parameters
// in line with the client's, and starts the pump.
func (c *client) link(typ byte, n int) (*server, error) {
	start := time.Now()
	c.mu.Lock()
	c.waiting = true
	c.waitStart = start
	if c.cancelWait == nil {
		c.cancelWait = make(chan struct{}, 1)
	}
	select {
	case <-c.cancelWait: // a stale cancel for an earlier wait
	default:
	}
	if c.poolWait == nil {
		c.poolWait = &poolWaiter{}
	}
	c.poolWait.seq.Add(1) // a new wait: cancels of earlier ones miss it
	c.mu.Unlock()
	// Under an admission policy the transaction first needs a ticket; the
	// pool's own queue then only covers servers still logging in.
	var ticket admission.Ticket
	if ap := c.svc.adm.Load(); ap != nil {
		if g := c.pool.gateFor(ap); g != nil {
			t, err := c.admit(g, ap, typ, n)
			if err != nil {
				c.endWait()
				var se *admission.ShedError
				if errors.As(err, &se) {
					return nil, &shedError{se, ap}
				}
				return nil, err
			}
			ticket = t
		}
	}
	s, err := c.pool.acquire(nil, c.poolWait)
	if err != nil {
		c.endWait()
		if ticket.Valid() {
			ticket.Release()
		}
		return nil, err
	}
	s.ticket = ticket
	waited := time.Since(start)
	c.pool.stats.serverAssignments.Add(1)
	c.pool.stats.waitTime.Add(int64(waited / time.Microsecond))
	c.pool.metrics.waitDuration.Update(waited.Seconds())
	if err := c.syncParams(s); err != nil {
		c.endWait()
		var pe *Error
		if !errors.As(err, &pe) {
			// The server failed under the SET: the detail is for the
			// log, the client hears PgBouncer's word for it.
			c.logger().Warn(c.String() + ": server failed while setting parameters: " + err.Error())
			c.pool.discard(s, "var change failed")
			return nil, newError(CodeServerCrashed)
		}
		c.pool.discard(s, "invalid server parameter")
		return nil, err
	}
	s.linkedTo.Store(c.id)
	// The wait ends where the link begins, under one lock: a cancel
	// request in between finds no query to cancel either way.
	c.mu.Lock()
	c.waiting = false
	c.srv = s
	c.ls.reset()
	c.replies = 0
	c.ops.reset()
	c.skipToSync = false
	c.pumpDone = nil
	c.pumpStarted = false
	c.detach = false
	c.mu.Unlock()
	// No pump yet: serve relays the answer itself when the first batch
	// ends with a Sync or Query (see relayOrPump).
	return s, nil
}

// endWait marks a wait for a server that ended without a link.
func (c *client) endWait() {
	c.mu.Lock()
	c.waiting = false
	c.mu.Unlock()
}

// relayOrPump runs after serve flushed a complete batch to the linked
// server. A batch that ends with Sync or Query, on a link without a pump,
// is answered inline: serve reads the reply and relays it itself, which
// saves a goroutine, its wake-ups and a hand-over per transaction; when the
// reply ends the link (an autocommit statement in transaction mode, the
// common case) serve goes straight back to reading the client. Anything
// else — a link still held after the reply (a transaction block), COPY IN,
// a batch ending in Flush — gets a pump of its own, as before, so a client
// idle in a transaction still hears at once about its server going away.
// While serve relays inline it reads nothing from the client; what the
// client sends meanwhile waits in the socket, as it would with Postgres.
//
// relayed reports that the reply was relayed inline and the link is over.
func (c *client) relayOrPump(s *server, typ byte) (relayed bool) {
	if c.r.Pending() || c.pumpStarted {
		return false
	}
	if typ != wire.MsgSync && typ != wire.MsgQuery {
		c.startPump(s)
		return false
	}
	if c.pumpRun(s, true) == pumpLinkOver {
		return true
	}
	c.startPump(s)
	return false
}

// startPump starts the link's pump goroutine unless it runs already.
// Called by serve only.
func (c *client) startPump(s *server) {
	if c.pumpStarted {
		return
	}
	c.pumpStarted = true
	// Made here, not at link: most links end with the inline relay and
	// never have a pump to wait for.
	done := make(chan struct{})
	c.mu.Lock()
	c.pumpDone = done
	c.mu.Unlock()
	go c.pump(s, done)
}

// syncParams sends one SET for the tracked parameters whose server value
// differs from the client's (PgBouncer compares case-insensitively).
func (c *client) syncParams(s *server) error {
	if s.syncedGen == s.paramsGen && s.syncedWith != nil && sameMap(s.syncedWith, c.params) {
		return nil
	}
	var sb strings.Builder
	for name, want := range c.params {
		have, ok := s.params[name]
		if ok && strings.EqualFold(have, want) {
			continue
		}
		sb.WriteString("SET ")
		sb.WriteString(quoteIdent(name))
		sb.WriteString(" = ")
		sb.WriteString(quoteLiteral(want))
		sb.WriteString(";")
	}
	if sb.Len() == 0 {
		s.syncedWith, s.syncedGen = c.params, s.paramsGen
		return nil
	}
	res, err := s.exec(sb.String(), c.svc.settings().ServerConnectTimeout)
	if err != nil {
		return err
	}
	if res.err != nil {
		return &Error{Severity: "FATAL", SQLState: res.err.Code, Message: res.err.Message}
	}
	// Parameters Postgres does not report (GUC_REPORT off) are remembered
	// as set, so the next client compares against what we sent.
	for name, want := range c.params {
		if _, ok := s.params[name]; !ok {
			s.params[name] = want
		}
	}
	s.paramsGen++
	return nil
}

// sameMap reports whether a and b are the same map (not equal contents).
// Parameter maps are never changed once made, so the same map means the
// same parameters; syncedWith holds the map, so its address is not reused.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// leave handles the client going away. A linked server is drained back to a
// clean state by its pump (Sync, ROLLBACK, reset query) instead of being
// closed; the pump is woken by an expired read deadline.
func (c *client) leave(err error) {
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && c.svc.logDisconnections() {
		c.logger().Info(c.String() + ": closing because: client unexpected eof (age=" + formatAge(time.Since(c.connected)) + ")")
	} else if c.svc.logDisconnections() {
		c.logger().Info(c.String() + ": closing because: client close request (age=" + formatAge(time.Since(c.connected)) + ")")
	}
	c.abandonLink()
}

// abandonLink hands a linked server, if any, to its pump to drain back to
// clean once the client is gone: see leave.
func (c *client) abandonLink() {
	c.mu.Lock()
	if c.writing && c.srv != nil {
		// serve still holds the server's writer with part of a batch it
		// recorded as sent (a refused frame read in the same batch kept
		// flushBatch from running): it goes out now, so the replies the
		// drain waits for are owed by the server, not by a buffer.
		s := c.srv
		c.mu.Unlock()
		if err := s.w.Flush(); err != nil {
			s.conn.Close()
		}
		c.mu.Lock()
	}
	c.writing = false
	c.writerDone.Broadcast()
	s := c.srv
	if s != nil {
		if c.drain == nil {
			c.drain = &drainState{} // before gone: the pump reads it once gone
		}
		c.gone.Store(true)
		c.resetDue = c.mode == config.PoolModeSession || c.svc.settings().ServerResetQueryAlways
		// Under mu: once the pump has released s, another client's pump
		// reads it, and this deadline must not reach that one.
		s.conn.SetReadDeadline(time.Now())
	}
	c.mu.Unlock()
	if s != nil {
		// A link left mid-batch has no pump yet: start the one that
		// drains it.
		c.startPump(s)
	}
}

// pumpStop says why pumpRun returned.
type pumpStop uint8

const (
	pumpLinkOver pumpStop = iota // the link ended (released, lost or closed)
	pumpHandOff                  // inline only: the rest needs a pump goroutine
)

// pump relays one server's replies to the client for the rest of a link.
func (c *client) pump(s *server, done chan struct{}) {
	defer close(done)
	c.pumpRun(s, false)
}

// pumpRun relays the server's replies to the client until the link ends.
// Inline (run by serve, see relayOrPump) it also stops, with pumpHandOff,
// once everything sent is answered while the link stays, or when COPY IN
// starts.
func (c *client) pumpRun(s *server, inline bool) pumpStop {
	st := c.svc.settings()
	for {
		handOff := false
		typ, _, err := s.r.Next()
		if err != nil {
			if isTimeout(err) {
				if c.pumpTimeout(s) {
					continue
				}
				return pumpLinkOver
			}
			c.serverLost(s, err)
			return pumpLinkOver
		}
		if completesExtended(typ) {
			c.replies++
		}
		gone := c.gone.Load()
		var out *wire.Writer
		if !gone {
			out = c.w
		}
		switch typ {
		case wire.MsgReadyForQuery:
			c.replies = 0
			msg, err := s.r.Message()
			if err != nil {
				c.serverLost(s, err)
				return pumpLinkOver
			}
			status := msg[5]
			c.sentBytes += int64(len(msg))
			if c.tracking {
				c.mu.Lock()
				owed := c.readyLocked(c.pumpOut[:0])
				c.mu.Unlock()
				c.pumpOut = owed
				if out != nil && len(owed) > 0 {
					out.Write(owed)
				}
			}
			if out != nil {
				out.Write(msg)
			}
			if !c.afterReady(s, status, st) {
				return pumpLinkOver
			}
			if inline {
				c.mu.Lock()
				answered := c.ls.outstanding == 0
				c.mu.Unlock()
				if answered && !s.r.Pending() {
					// The link stays (a transaction block): a pump
					// goroutine watches the server from here on.
					return pumpHandOff
				}
			}
			continue
		case wire.MsgParameterStatus:
			if !s.r.Fits() {
				break
			}
			msg, err := s.r.Message()
			if err != nil {
				c.serverLost(s, err)
				return pumpLinkOver
			}
			name, value := s.noteParameter(msg[5:])
			if canon := c.svc.trackedName(name); canon != "" && !gone {
				c.mu.Lock()
				c.setParamLocked(canon, value)
				c.mu.Unlock()
			}
			if out != nil {
				out.Write(msg)
			}
			continue
		case wire.MsgCopyInResponse, wire.MsgCopyBothResponse:
			c.mu.Lock()
			if dropped, consumed := c.ls.copyStarted(c.replies); c.tracking {
				c.ops.killSyncs(dropped)
				if consumed == wire.MsgParse || consumed == wire.MsgClose {
					c.consumedByCopyLocked(s)
				}
			}
			c.mu.Unlock()
			if gone {
				// The drain's next step (CopyFail) is due now, not
				// when the server, waiting for data, times out.
				s.conn.SetReadDeadline(time.Now())
			}
			// The client sends COPY data next while the server stays
			// silent: serve must go back to reading the client.
			handOff = inline
		case wire.MsgParseComplete, wire.MsgCloseComplete:
			if c.tracking {
				c.mu.Lock()
				swallow := c.replyLocked(s)
				c.mu.Unlock()
				if swallow {
					if err := s.r.Skip(); err != nil {
						c.serverLost(s, err)
						return pumpLinkOver
					}
					if out != nil && !s.r.Pending() {
						out.Flush()
					}
					continue
				}
			}
		case wire.MsgErrorResponse:
			c.mu.Lock()
			skip, synced := c.ls.serverError(c.replies)
			if skip {
				c.replies = 0
				if !synced {
					// The server skips the client's messages up to its
					// next Sync: so does serve, so that none is counted
					// as owing a reply. The server says nothing more
					// until that Sync, which serve must read: an inline
					// relay hands over.
					c.skipToSync = true
					handOff = inline
				}
			}
			if c.tracking {
				c.errorLocked(s, skip)
			}
			c.mu.Unlock()
		case wire.MsgCommandComplete:
			if c.tracking {
				pre, err := s.r.Peek(32)
				if err != nil {
					c.serverLost(s, err)
					return pumpLinkOver
				}
				if pre[0] == 'D' {
					c.mu.Lock()
					tag := wire.CommandTag(pre)
					standIn := c.deallocateDoneLocked(tag)
					if !standIn {
						c.commandCompleteLocked(s, tag)
					}
					c.mu.Unlock()
					if standIn {
						// The client's DEALLOCATE succeeded: it gets
						// DEALLOCATE's tag for the stand-in's DO.
						if err := s.r.Skip(); err != nil {
							c.serverLost(s, err)
							return pumpLinkOver
						}
						c.sentBytes += int64(len(deallocateComplete))
						if out != nil {
							out.Write(deallocateComplete)
							if !s.r.Pending() {
								out.Flush()
							}
						}
						continue
					}
				}
			}
		}
		n := int64(s.r.BodyLen()) + 5
		c.sentBytes += n
		if gone {
			c.drainDiscarded(s, n)
		}
		if err := s.r.Forward(out); err != nil && !c.relayFailed(s, out, err) {
			return pumpLinkOver
		}
		if out != nil && (handOff || !s.r.Pending()) {
			out.Flush()
		}
		if handOff {
			return pumpHandOff
		}
	}
}

// afterReady applies the release rule after a ReadyForQuery; false when the
// link ended and the pump must stop.
func (c *client) afterReady(s *server, status byte, st *config.Settings) bool {
	c.mu.Lock()
	c.countReadyLocked(status)
	c.ls.readyForQuery(status)
	if c.ls.outstanding == 0 && st.QueryTimeout > 0 {
		s.conn.SetReadDeadline(time.Time{})
	}
	if c.gone.Load() {
		return c.drainLocked(s)
	}
	act := afterReadyForQuery(c.mode, &c.ls)
	for act == releaseServer && c.writing {
		// serve is finishing a flush to this server; wait for it, then
		// look again: it may have sent more.
		c.writerDone.Wait()
		act = afterReadyForQuery(c.mode, &c.ls)
	}
	if c.gone.Load() {
		return c.drainLocked(s)
	}
	switch act {
	case releaseServer:
		// Flush under mu: after c.srv is cleared, serve may link another
		// server whose pump writes to the client.
		c.w.Flush()
		c.srv = nil
		unsure := c.ls.unsure
		c.mu.Unlock()
		if st.ClientIdleTimeout > 0 {
			// serve armed no idle deadline while linked; it starts now.
			c.conn.SetReadDeadline(time.Now().Add(st.ClientIdleTimeout))
		}
		if unsure {
			// A reply may still be on its way (see linkState): it must
			// not reach the next client.
			c.pool.discard(s, "client protocol state unknown after COPY")
			return false
		}
		c.releaseServer(s, st)
		return false
	case rejectTxBlock:
		c.srv = nil
		c.mu.Unlock()
		c.w.Write(appendError(nil, newError(CodeStatementModeTxBlock)))
		c.w.Flush()
		c.conn.Close()
		c.pool.discard(s, "transaction blocks not allowed in statement pooling mode")
		return false
	}
	idleInTx := c.ls.idle() && status != wire.TxIdle
	c.mu.Unlock()
	if !s.r.Pending() {
		c.w.Flush()
	}
	if idleInTx && st.IdleTransactionTimeout > 0 {
		c.conn.SetReadDeadline(time.Now().Add(st.IdleTransactionTimeout))
	}
	return true
}

// releaseServer returns a clean server, running server_reset_query first
// when server_reset_query_always asks for it in transaction mode.
func (c *client) releaseServer(s *server, st *config.Settings) {
	if st.ServerResetQueryAlways && st.ServerResetQuery != "" {
		res, err := s.exec(st.ServerResetQuery, st.ServerConnectTimeout)
		if err != nil || res.status != wire.TxIdle {
			c.pool.discard(s, "reset query failed")
			return
		}
		// The reset (typically DISCARD ALL) may have dropped prepared
		// statements; forget them rather than guess.
		s.stmts.clear(c.svc.stmts)
		s.unnamedOwner = 0
	}
	c.pool.release(s)
}

// drainLocked takes the next step to bring a server whose client left back to
// idle (drain.go). Called with mu held; releases it. False when the link is
// over.
func (c *client) drainLocked(s *server) bool {
	now := time.Now()
	d := c.drain
	if d.deadline.IsZero() {
		c.startDrainLocked(s, now)
	}
	step := nextDrainStep(&c.ls, c.resetDue)
	switch {
	case step == drainWait && now.After(d.deadline):
		return c.drainFailedLocked(s, "client disconnect while server was not ready")
	case step == drainWait && c.ls.copyIn && !d.copyFailed:
		// A COPY FROM STDIN waits for data that will never come.
		d.copyFailed = true
		c.ls.fromClient(wire.MsgCopyFail)
		s.scratch = appendCopyFail(s.scratch[:0], "client disconnected")
	case step == drainWait:
		c.mu.Unlock()
		s.conn.SetReadDeadline(d.deadline)
		return true
	case !c.awaitCancelLocked():
		return c.drainFailedLocked(s, "cancel of an abandoned query did not complete")
	case step == drainSync:
		c.ls.fromClient(wire.MsgSync)
		c.pushSyncLocked(wire.MsgSync)
		s.scratch = wire.AppendSync(s.scratch[:0])
	case step == drainRollback:
		// Auto rollback: the client's transaction dies with it.
		c.ls.fromClient(wire.MsgQuery)
		c.pushSyncLocked(wire.MsgQuery)
		s.scratch = wire.AppendQuery(s.scratch[:0], "ROLLBACK")
		c.svc.countEvent("pgturnstile_server_drain_rollbacks_total", "database", c.pool.key.db)
	case step == drainReset && c.svc.settings().ServerResetQuery == "":
		c.resetDue = false
		return c.drainReleaseLocked(s)
	case step == drainReset:
		c.resetDue = false
		c.ls.fromClient(wire.MsgQuery)
		c.pushSyncLocked(wire.MsgQuery)
		s.scratch = wire.AppendQuery(s.scratch[:0], c.svc.settings().ServerResetQuery)
	default: // drainRelease
		return c.drainReleaseLocked(s)
	}
	c.mu.Unlock()
	s.conn.SetReadDeadline(d.deadline)
	if s.w.Write(s.scratch) != nil || s.w.Flush() != nil {
		c.serverLost(s, s.w.Err())
		return false
	}
	return true
}

// pushSyncLocked records a Sync-like message the pooler itself sends.
func (c *client) pushSyncLocked(typ byte) {
	if c.tracking {
		c.ops.push(op{kind: opSync, msg: typ})
	}
}

// completesExtended reports whether a server message of type typ is the
// last reply to an extended-protocol message (linkState.failing): Parse,
// Bind and Close have one reply each, Describe ends with RowDescription or
// NoData, Execute with CommandComplete, EmptyQueryResponse or
// PortalSuspended. A Query's own RowDescription and CommandComplete count
// too, harmlessly: by then every earlier extended message has finished.
func completesExtended(typ byte) bool {
	switch typ {
	case wire.MsgParseComplete, wire.MsgBindComplete, wire.MsgCloseComplete, wire.MsgNoData,
		wire.MsgRowDescription, wire.MsgCommandComplete, wire.MsgEmptyQueryResponse, wire.MsgPortalSuspended:
		return true
	}
	return false
}

// isCopyInput reports whether the server, reading the client as COPY data,
// takes a message of type typ as such (Sync and Flush it ignores).
func isCopyInput(typ byte) bool {
	switch typ {
	case wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail, wire.MsgSync, wire.MsgFlush:
		return true
	}
	return false
}

// pumpTimeout handles an expired server read deadline: a departed client's
// drain step, or query_timeout. False when the link is over.
func (c *client) pumpTimeout(s *server) bool {
	c.mu.Lock()
	if c.gone.Load() {
		return c.drainLocked(s)
	}
	c.srv = nil
	c.mu.Unlock()
	c.w.Write(appendError(nil, newError(CodeQueryTimeout)))
	c.w.Flush()
	c.conn.Close()
	c.pool.discard(s, "query timeout")
	return false
}

// serverLost handles a server that failed while linked.
func (c *client) serverLost(s *server, err error) {
	c.mu.Lock()
	linked := c.srv == s
	if linked {
		c.srv = nil
	}
	quiet := c.gone.Load() || c.detach
	reason := "server conn crashed?"
	code := CodeServerCrashed
	if c.detach {
		reason = c.detachReason
	}
	if s.evicted.Load() {
		reason, code = "evicted", CodeEvicted
	}
	if c.gone.Load() {
		c.finishDrainLocked("closed")
	}
	c.mu.Unlock()
	c.pool.discard(s, reason)
	if linked && !quiet {
		c.w.Write(appendError(nil, newError(code)))
		c.w.Flush()
		c.conn.Close()
	}
}

// countReadyLocked adds a finished query (and, at status 'I', a finished
// transaction) and the bytes sent to the client since the last one to the
// pool's stats. c.mu orders it after serve's writes of the start times.
func (c *client) countReadyLocked(status byte) {
	ps := &c.pool.stats
	now := time.Now()
	ps.queries.Add(1)
	ps.queryTime.Add(int64(now.Sub(c.queryStart) / time.Microsecond))
	c.pool.metrics.queryDuration.Update(now.Sub(c.queryStart).Seconds())
	if status == wire.TxIdle {
		ps.xacts.Add(1)
		ps.xactTime.Add(int64(now.Sub(c.xactStart) / time.Microsecond))
	}
	ps.sent.Add(c.sentBytes)
	c.sentBytes = 0
}
