package pooler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/clientcount"
	"github.com/pgturnstile/pgturnstile/internal/stmtcache"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

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
	conn net.Conn
	// sock mirrors the socket under conn for dropClient, which closes it
	// without mu (closeSocket): mu may be held by a goroutine waiting on
	// the client, and closing the socket is what ends that wait. nil
	// while parked; conn's TLS layer is not in it (see closeSocket).
	sock atomic.Pointer[net.Conn]
	// lp is the client's event-loop state (loop.go), made when it first
	// rests on the loop with its socket; other goroutines use it only to
	// ask it off (pullFromLoop).
	lp    atomic.Pointer[clientLoop]
	raddr netip.AddrPort // the peer, for TCP (kept: conn goes when parked)
	laddr netip.AddrPort // our end, for TCP
	r     *wire.Reader   // nil while parked, as is w
	w     *wire.Writer
	// connected is when the client connected, in Unix nanoseconds
	// (connectedAt): a time.Time is 24 bytes, and the struct is every
	// client's, parked ones included, its size class what each costs.
	connected int64

	user   string // login user
	dbName string // database name the client asked for
	pool   *serverPool
	mode   config.PoolMode
	// repl (below, with the other one-byte fields) is set for a
	// replication connection (replication.go), and replOptions is its
	// options startup parameter as given (nil when there was none): its
	// server logs in with them. Set at login. (A pointer, as are the
	// rarely set fields below: the struct is every client's, parked
	// thousands included, and its size class is what each one costs.)
	replOptions *string
	key         [8]byte
	// params are the client's values of tracked parameters, keyed by the
	// canonical name. serve reads them when it links a server; the pump
	// updates them from ParameterStatus while linked.
	params map[string]string
	// shard is set for a client of a sharded cluster (shardroute.go):
	// its router, pins, held BEGIN, shard pools. Serve's goroutine only.
	shard *shardSession
	// startPin is the router's pgturnstile.shard_key, .colo and .shard
	// from the startup options, for shard's session pin; nil when the
	// options set none.
	startPin *shard.Pin
	// caps is what the client counts in the client caps (clientcaps.go),
	// guarded by the service's caps.mu.
	caps clientcount.Entry

	// mu guards the fields in it, which the client's goroutines (serve,
	// the pump) share with the console, cancel requests and the janitor,
	// and the link's fields in its own mu group (link.mu). Each field's
	// owning goroutine may read it without mu where nothing else writes
	// it; every other reader holds mu.
	mu struct {
		sync.Mutex
		// state is where the client is in its life (clientstate.go);
		// only setStateLocked writes it.
		state clientState
		// link is what serving the client needs beyond its session: the
		// linked server and the protocol position on it, the pump, the
		// waits, the drain. nil while the client is parked: park.go
		// drops it and resume makes it anew, both on serve's goroutine,
		// which reads it without mu.
		link *link
		// parkedSrv is the server a session-mode client parked with:
		// while SUSPEND is in force, a session client whose server is
		// idle (ReadyForQuery 'I', nothing outstanding, no COPY) parks
		// with it, still linked (serverActive, held by this client), so
		// that an online restart hands both over and the session goes on
		// on the same backend (takeover.go). resume links it again. nil
		// otherwise.
		parkedSrv *server
		// queryStart is when the current (or last) request started.
		queryStart time.Time
		// stmts maps the client's prepared-statement names to
		// definitions, each with the shape epoch of the client's
		// description of it.
		stmts map[string]*stmtcache.ClientStmt
		// unconfirmed are names in stmts whose Parse the server did not
		// run, failed or skipped after an error (errorLocked); nil when
		// none.
		unconfirmed map[string]bool
		// discarded are names the client's DISCARD ALL or DEALLOCATE ALL
		// dropped and it has not prepared again: a Bind or Describe of
		// one gets Postgres's 26000, not PgBouncer's 08P01 for a name
		// never prepared (refuseUnknownLocked). Bounded by maxDiscarded.
		discarded map[string]struct{}
		// unnamedParse is the body of the client's last Parse of the
		// unnamed statement, and unnamedGen counts them
		// (relay_prepared.go).
		unnamedParse []byte
		unnamedGen   uint64
	}

	adm *clientAdmission // admission state (admission_file), serve's; nil until needed

	// gone: the client reached clientDraining (it left while linked) and
	// the pump drains its link. It mirrors the state for the pump, which
	// reads it on every server message without c.mu, and stays set once
	// the client is closed, as the drain may outlive it. Written only by
	// setStateLocked.
	gone atomic.Bool
	// closeLogged: the pump closed the client with a pooler error
	// (closeClient) and logged why; serve's read then ends on the closed
	// socket and must not log a second, wrong reason.
	closeLogged atomic.Bool
	// parkWanted: the janitor (or the login grace) asked serve to park:
	// a request, not a state.
	parkWanted atomic.Bool
	// killed: KILL_CLIENT dropped the client; a parked client ends when
	// it resumes. A fact apart from the state: a killed client goes on
	// through its states until its goroutine sees the closed socket.
	// Atomic, as sock is, so that dropClient needs no mu: it sets killed
	// before it reads sock, and resume sets sock before it reads killed,
	// so one of them closes the new socket.
	killed atomic.Bool
	tls    bool // the connection switched to TLS
	local  bool // connected over the Unix socket
	// tracking is set when protocol-level prepared statements are mapped
	// (transaction/statement mode, max_prepared_statements > 0).
	tracking bool
	repl     replication // see replOptions
	// unixPeer is a Unix-socket client's address in the log prefix,
	// PgBouncer's "unix(pid):port" (logprefix.go); set at accept.
	unixPeer string

	// scratch is serve's buffer for the messages it writes to the client
	// itself (login, errors). It goes with r and w when the client parks:
	// it belongs to the connection, not to a link (login uses it before
	// any link exists).
	scratch []byte
}

// connectedAt is when the client connected.
func (c *client) connectedAt() time.Time { return time.Unix(0, c.connected) }

// setSocket records the socket that dropClient closes (nil while
// parked). serve's goroutine calls it when it makes or drops the conn.
func (c *client) setSocket(conn net.Conn) {
	if conn == nil {
		c.sock.Store(nil)
		return
	}
	c.sock.Store(&conn)
}

// closeSocket closes the client's socket without c.mu, from outside its
// goroutines (dropClient). A TLS client's conn is its TLS layer, made at
// login before any other goroutine can see the client and never replaced
// (TLS clients never park), so it is read without mu and closed as
// before: tls.Conn.Close breaks a write in flight by closing the socket
// under it instead of sending close_notify.
func (c *client) closeSocket() {
	if c.tls {
		c.conn.Close()
		return
	}
	if p := c.sock.Load(); p != nil {
		(*p).Close()
	}
	c.pullFromLoop() // on the loop: its goroutine comes back to see it closed
}

func (c *client) String() string { return fmt.Sprintf("C-%d", c.id) }

// addrParts is an address as SHOW CLIENTS lists it: "unix" and port 0 for
// the Unix socket.
func (c *client) addrParts(a netip.AddrPort) (string, int) {
	if c.local {
		return "unix", 0
	}
	return a.Addr().String(), int(a.Port())
}

// setParamLocked records the client's new value of a tracked parameter.
// Parameter maps are never changed in place: clients with the same
// parameters share one map (serverPool.loginParams), so a change copies it.
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

// maxProtocolMessage is the largest message (type byte and length field
// included) any Postgres takes: its length field may not exceed
// PQ_LARGE_MESSAGE_LIMIT (1 GiB - 2), and Postgres ends the session over a
// larger one.
const maxProtocolMessage = 1<<30 - 1

// adminDB is the virtual database of the admin console.
const adminDB = "pgbouncer"

// smallMessageLimit is the largest body Postgres takes in a message that
// carries no query or data (PQ_SMALL_MESSAGE_LIMIT): Describe, Close, Sync,
// Flush, Terminate, CopyDone and CopyFail.
const smallMessageLimit = 10000

// mappedNameLimit is the longest Describe or Close a client may send while
// the pooler maps its statement names (and the longest name it maps): the
// server gets the pooler's own short name, so Postgres's smallMessageLimit
// bounds what reaches the server, not the client's name. PgBouncer takes
// such names too. One that is passed on unmapped is still held to
// smallMessageLimit (errUnmappedTooLong).
const mappedNameLimit = 64 << 10

// largeMessageLimit is Postgres's limit for every other message
// (PQ_LARGE_MESSAGE_LIMIT), below the largest max_packet_size.
const largeMessageLimit = 1<<30 - 2
