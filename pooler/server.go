package pooler

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/sockopt"
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/internal/tlsconn"
	"github.com/pgturnstile/pgturnstile/wire"
)

// server is one connection to Postgres.
type server struct {
	id   uint64
	pool *serverPool
	// target is the pool's target this server dialled; after a RELOAD
	// changed it, the server is closed rather than reused (retarget).
	target *poolTarget
	// ep is the host of target this server dials (pickEndpointLocked),
	// set when the object is made; cancel requests for it go there.
	ep endpoint
	// readOnly mirrors what the server last reported of
	// in_hot_standby / default_transaction_read_only (PG 14+), or what
	// the login's target_session_attrs check found (hosts.go).
	readOnly, hotStandby atomic.Bool
	// fromReserve: the login was started past pool_size, for the reserve
	// pool (set before its goroutine starts, read by it).
	fromReserve bool
	conn        net.Conn
	// peekRaw, peekFn, peekBuf and peekDead serve closedByPeer (its
	// owner only).
	peekRaw syscall.RawConn
	// loopRC is conn's RawConn for an event loop's watch (loop.go), made
	// once; awaiter is the client socket whose loop waits for a reply
	// now, told when conn is closed (wakeAwaiter).
	loopRC  syscall.RawConn
	awaiter atomic.Pointer[netpoll.Conn]
	// loopWatch watches conn for the loop that awaits a reply (loopLP,
	// the poller's goroutine's), made on first use with its handler
	// loopH.
	loopWatch *netpoll.Watch
	loopH     func(ev uint32)
	loopLP    *clientLoop
	peekFn    func(fd uintptr) bool
	peekBuf   [1]byte
	peekDead  bool
	// r is the only reader of conn, for the whole life of the connection,
	// login included.
	// While linked, the link's pump goroutine reads; otherwise the goroutine
	// that holds the server (checkout, release, janitor) does.
	r *wire.Reader
	// w is written by whoever holds the server: the linked client goroutine,
	// the pump while draining, or maintenance while not linked.
	w *wire.Writer

	pid       uint32
	cancelKey []byte
	// params are the server's current values of reported parameters,
	// updated from every ParameterStatus.
	params map[string]string
	// paramsGen counts changes to params; syncedWith is the client
	// parameter map (immutable, see client.setParamLocked) that params last
	// matched, at syncedGen: the next client with the same map skips the
	// comparison (client.syncParams).
	paramsGen  uint64
	syncedWith map[string]string
	syncedGen  uint64
	// unreported holds the tracked parameters Postgres does not report
	// (GUC_REPORT off: search_path before PostgreSQL 18) as the pooler
	// last applied them here: the value set, or unreportedDefault after a
	// RESET. No ParameterStatus follows their changes, so this record is
	// all the pooler knows of them. unreportedDirty says something the
	// pooler did not send may have changed them since (a client's SET,
	// RESET or DISCARD ALL, a reset query): the next link applies them
	// all again (client.syncParams). Written by whoever holds the server.
	unreported      map[string]string
	unreportedDirty bool

	created  time.Time
	lastUsed time.Time

	// Guarded by pool.mu; written only by pool.setServerStateLocked
	// (objects.go).
	state       serverState
	closeNeeded bool
	// doomReason is why closeNeeded was set, for the log ("" = RECONNECT).
	doomReason string
	// lifeDraw in [-1, 1) spreads this server's lifetime by
	// server_lifetime_jitter; drawn once, at login. peekedAt is when the
	// janitor last looked whether Postgres closed it while idle.
	lifeDraw float64
	peekedAt time.Time

	// evictAt is when a busy server over a lowered limit is taken from its
	// client (limit_evict_grace); zero when not doomed. Guarded by pool.mu.
	evictAt time.Time
	// evicted is set when the janitor closed the server for that reason.
	evicted atomic.Bool
	// fastClosed is set when server_fast_close took it from its client
	// (fastclose.go).
	fastClosed atomic.Bool
	// serverTLS is the server_tls_* its login used; set by the login
	// goroutine before the dial, read by loggedIn.
	serverTLS auth.TLSSettings
	// reused is set when a client released the server (it was used since
	// its login): server_check_delay = 0 checks such a server at checkout.
	// Written under pool.mu; read by the holder that checked it out.
	reused bool

	// ticket is the admission ticket of the transaction holding the server
	// (admission_file); given back with the server. Owned by the holder.
	ticket admission.Ticket

	// linkedTo is the id of the client the server was last linked to.
	linkedTo atomic.Uint64
	// appName mirrors params["application_name"] for SHOW SERVERS, which
	// reads it under serverPool.mu while the holder may be writing params (a map
	// read during a write can crash the process).
	appName atomic.Pointer[string]
	// cancels counts the cancel requests for this server on their way to
	// Postgres: raised under the linked client's mu (cancelStarted),
	// lowered and read under pool.mu (cancelDone, release).
	cancels atomic.Int32

	// stmts are the mapped prepared statements this server has; owned by
	// whoever holds the server, like w.
	stmts stmtcache.Cache
	// unnamedOwner and unnamedGen say whose unnamed statement (and which
	// of its versions) the server holds; guarded by the holder's client.mu.
	unnamedOwner uint64 // client id; 0 = none known
	unnamedGen   uint64

	scratch []byte

	// repl is the kind of a replication client's own server, and
	// replExtra what it logs in with beyond the pool's startup
	// parameters (pool_replication.go); set before its login.
	repl      replication
	replExtra []wire.Param
	// replEnd is why the pooler closed a replication server on purpose
	// (its client is told so); nil while it has not.
	replEnd atomic.Pointer[string]
}

func (s *server) String() string { return fmt.Sprintf("S-%d", s.id) }

// dialServer opens and logs in the connection of s, a server in state
// login that only this goroutine touches until it is logged in; connect
// and login together are bounded by timeout (server_connect_timeout).
func dialServer(p *serverPool, s *server, timeout time.Duration) (err error) {
	t := s.target
	// Read before the dial: a change of server_tls_* after this makes the
	// login stale (loggedIn closes it), as a retarget does.
	sec := p.svc.gen.Load().sec
	s.serverTLS = sec.ServerTLS
	conn, err := p.svc.dialTimeout(s.ep.network, s.ep.address, timeout)
	if err != nil {
		return err
	}
	// A limit lowered while this login is in flight closes conn (shrink)
	// rather than let a backend Postgres would see over the new limit.
	if !p.startDial(conn) {
		conn.Close()
		return errDialAborted
	}
	raw := conn // registered by startDial; conn may become a TLS conn
	defer func() {
		// An aborted login usually fails on its closed socket: that is
		// not a login failure to report to waiters or cache.
		if p.endDial(raw) {
			err = errDialAborted
		}
	}()
	if timeout > 0 {
		conn.SetDeadline(time.Now().Add(timeout))
	}
	if s.ep.network == "tcp" {
		// TLS is not used on Unix sockets, as with PgBouncer. The
		// host verified is the one dialled, not the list.
		if conn, err = tlsconn.StartServer(conn, sec.ServerBase, s.serverTLS.Mode, s.ep.host); err != nil {
			return err
		}
	}
	sio := wire.SocketIO(conn)
	r := wire.NewReader(sio, wire.DefaultBufferSize)
	w := wire.NewWriter(sio, wire.DefaultBufferSize)
	params := t.params
	if s.repl != replNone {
		params = append(slices.Clip(t.params), s.replExtra...)
	}
	login, err := auth.LoginToServer(r, w, params, p.credentials())
	if err != nil {
		conn.Close()
		return err
	}
	conn.SetDeadline(time.Time{})
	now := p.svc.clock.Now()
	if tc, ok := conn.(*tls.Conn); ok && p.svc.logConnections() {
		// PgBouncer's line, which it logs before the login.
		p.serverLoggerAt(s, conn.RemoteAddr().String()).Info("SSL established: " + auth.TLSInfo(tc.ConnectionState()))
	}
	s.conn, s.r, s.w = conn, r, w
	s.pid, s.cancelKey, s.params = login.PID, login.CancelKey, login.Params
	s.noteReadOnly()
	s.noteAppName(login.Params["application_name"])
	s.created, s.lastUsed = now, now
	return nil
}

// dialTimeout opens a connection to Postgres through the service's dial
// hook, bounded by timeout (0: none), as net.DialTimeout would: a timeout
// reads "i/o timeout" either way. A TCP connection gets the tcp_* options.
func (s *Service) dialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	conn, err := s.dial(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		// tcp_* (sockopts.go); PgBouncer fails a connection it cannot tune.
		if err := sockopt.Tune(tc, s.settings(), false); err != nil {
			s.log.Warn(err.Error())
			conn.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
	}
	return conn, nil
}

// errDialAborted ends a server login that a lowered limit made unwanted.
var errDialAborted = errors.New("server login aborted: limit lowered")

// execResult is the outcome of a query the pooler runs on its own.
type execResult struct {
	status byte
	err    *wire.ErrorFields // first ErrorResponse, if any
	// value is the first column of the first row, if any (NULL reads "").
	value    string
	hasValue bool
}

// exec runs sql as a simple query on a server nobody else is reading, and
// reads up to its ReadyForQuery. ParameterStatus messages update s.params.
func (s *server) exec(sql string, timeout time.Duration) (execResult, error) {
	var res execResult
	if timeout > 0 {
		s.conn.SetDeadline(time.Now().Add(timeout))
		defer s.conn.SetDeadline(time.Time{})
	}
	// A simple query replaces the server's unnamed statement.
	s.unnamedOwner = 0
	s.scratch = wire.AppendQuery(s.scratch[:0], sql)
	if err := s.w.Write(s.scratch); err != nil {
		return res, err
	}
	if err := s.w.Flush(); err != nil {
		return res, err
	}
	for {
		typ, _, err := s.r.Next()
		if err != nil {
			return res, err
		}
		switch typ {
		case wire.MsgReadyForQuery:
			body, err := s.r.Body()
			if err != nil {
				return res, err
			}
			res.status, err = wire.ReadyForQueryStatus(body)
			return res, err
		case wire.MsgErrorResponse:
			body, err := s.r.Body()
			if err != nil {
				return res, err
			}
			if res.err == nil {
				f, _ := wire.ParseErrorResponse(body)
				res.err = &f
			}
		case wire.MsgParameterStatus:
			body, err := s.r.Body()
			if err != nil {
				return res, err
			}
			s.noteParameter(body)
		case wire.MsgDataRow:
			body, err := s.r.Body()
			if err != nil {
				return res, err
			}
			if row, ok := wire.DecodeDataRow(body); ok && !res.hasValue {
				if v, _, ok := row.Next(); ok {
					res.value, res.hasValue = string(v), true
				}
			}
		default:
			if err := s.r.Skip(); err != nil {
				return res, err
			}
		}
	}
}

// noteParameter records a ParameterStatus body in s.params and returns the
// name and value.
func (s *server) noteParameter(body []byte) (name, value string) {
	n, v, err := wire.ParseParameterStatus(body)
	if err != nil {
		return "", ""
	}
	name = string(n)
	if old, ok := s.params[name]; ok && old == string(v) {
		return name, old
	}
	value = string(v)
	s.params[name] = value
	s.paramsGen++
	switch name {
	case "application_name":
		s.noteAppName(value)
	case "in_hot_standby", "default_transaction_read_only":
		s.noteReadOnly()
	}
	return name, value
}

// noteAppName publishes the server's application_name to SHOW SERVERS.
func (s *server) noteAppName(v string) { s.appName.Store(&v) }

// shownAppName is the application_name SHOW SERVERS lists; any goroutine.
func (s *server) shownAppName() string {
	if p := s.appName.Load(); p != nil {
		return *p
	}
	return ""
}

// sendCancel asks Postgres to cancel whatever s is running, on a new
// connection, as the protocol requires.
func (s *server) sendCancel(timeout time.Duration) error {
	c, err := s.pool.svc.dialTimeout(s.ep.network, s.ep.address, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	key := make([]byte, 0, 4+len(s.cancelKey))
	key = append(key, byte(s.pid>>24), byte(s.pid>>16), byte(s.pid>>8), byte(s.pid))
	key = append(key, s.cancelKey...)
	if _, err := c.Write(wire.AppendCancelRequest(nil, key)); err != nil {
		return err
	}
	// Postgres closes the connection when done; wait for that so the cancel
	// has been delivered before we report it sent.
	var b [1]byte
	c.Read(b[:])
	return nil
}

// close terminates the connection politely and frees the socket.
func (s *server) close() {
	s.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	s.w.Write(wire.AppendTerminate(nil))
	s.w.Flush()
	s.conn.Close()
	s.wakeAwaiter()
}

// queryRow runs sql with text parameters through the extended protocol on
// a server nobody else is reading and returns the first row's columns (nil
// for NULL), or ok=false when there is no row. prelude, when not empty, is
// a statement without parameters run first in the same implicit
// transaction (one Sync for both), whose rows are ignored: a SET LOCAL or
// set_config(…, true) there holds for sql and ends with it.
func (s *server) queryRow(prelude, sql string, timeout time.Duration, args ...string) (cols []*string, ok bool, err error) {
	if timeout > 0 {
		s.conn.SetDeadline(time.Now().Add(timeout))
		defer s.conn.SetDeadline(time.Time{})
	}
	s.unnamedOwner = 0 // the unnamed statement is ours now
	b := s.scratch[:0]
	if prelude != "" {
		// Parse after the prelude's Execute: names in sql are resolved
		// at Parse, under what the prelude set.
		b = wire.AppendParse(b, "", prelude, nil)
		b = wire.AppendBind(b, "", "", nil)
		b = wire.AppendExecute(b, "", 0)
	}
	inPrelude := prelude != ""
	b = wire.AppendParse(b, "", sql, nil)
	b = wire.AppendBind(b, "", "", args)
	b = wire.AppendExecute(b, "", 0)
	b = wire.AppendSync(b)
	s.scratch = b
	if err := s.w.Write(b); err != nil {
		return nil, false, err
	}
	if err := s.w.Flush(); err != nil {
		return nil, false, err
	}
	var qerr error
	for {
		typ, _, err := s.r.Next()
		if err != nil {
			return nil, false, err
		}
		body, err := s.r.ReadBody(nil)
		if err != nil {
			return nil, false, err
		}
		switch typ {
		case wire.MsgCommandComplete:
			inPrelude = false
		case wire.MsgDataRow:
			if ok || inPrelude {
				continue
			}
			row, rowOK := wire.DecodeDataRow(body)
			if !rowOK {
				continue // no column count: not a row
			}
			for row.Len() > 0 {
				v, null, colOK := row.Next()
				if !colOK {
					return nil, false, errors.New("malformed DataRow")
				}
				if null {
					cols = append(cols, nil)
					continue
				}
				str := string(v)
				cols = append(cols, &str)
			}
			ok = true
		case wire.MsgErrorResponse:
			f, _ := wire.ParseErrorResponse(body)
			qerr = errors.New(f.Severity + ": " + f.Message + " (SQLSTATE " + f.Code + ")")
		case wire.MsgParameterStatus:
			s.noteParameter(body)
		case wire.MsgReadyForQuery:
			return cols, ok, qerr
		}
	}
}

// closedByPeer reports, without blocking, whether Postgres closed this idle
// connection or sent something unasked (a FATAL before closing): a peek
// at the socket that finds EOF or data. Nothing is consumed. Where the
// system has no peek (netpoll.CanPeek is false) it reports false: the
// server counts as healthy until a read says otherwise.
func (s *server) closedByPeer() bool {
	if !netpoll.CanPeek {
		return false
	}
	if s.peekRaw == nil {
		// Made once per server, like the method value: each is an
		// allocation.
		sc, ok := tlsconn.NetConn(s.conn).(syscall.Conn)
		if !ok {
			return false
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		s.peekRaw = raw
		s.peekFn = s.peekOnce
	}
	s.peekDead = false
	err := s.peekRaw.Read(s.peekFn)
	return s.peekDead || err != nil
}

// peekOnce is closedByPeer's one non-blocking MSG_PEEK (netpoll.PeekClosed,
// a raw system call like wire.SocketIO's: it cannot block, and it keeps the
// P out of the scheduler's syscall state).
func (s *server) peekOnce(fd uintptr) bool {
	if netpoll.PeekClosed(fd, &s.peekBuf) {
		s.peekDead = true // EOF, data, or a socket error
	}
	return true // never wait
}
