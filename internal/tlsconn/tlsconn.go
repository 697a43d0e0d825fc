// Package tlsconn is TLS over the pooler's sockets: the connection
// crypto/tls reads and writes a client's or a server's records through
// (raw system calls where wire.SocketIO makes them), the socket found
// again under a TLS connection, a direct-TLS client (PostgreSQL 17's
// sslnegotiation=direct) told from its first byte, and a server login's
// SSLRequest and handshake (server.go).
package tlsconn

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// rawNetConn is a socket as crypto/tls sees it: reads and writes go
// through the raw I/O wire.SocketIO made of it, the rest is the
// net.Conn's. A call entered the ordinary way, as net.Conn's Read makes
// it, wakes the runtime's sysmon thread when the pooler was idle, and
// sysmon then polls every 20 µs for a while: on a connect-per-transaction
// load those wake-ups cost more CPU than the calls themselves.
type rawNetConn struct {
	net.Conn
	io io.ReadWriter
}

func (r *rawNetConn) Read(p []byte) (int, error)  { return r.io.Read(p) }
func (r *rawNetConn) Write(p []byte) (int, error) { return r.io.Write(p) }

// Transport is the connection crypto/tls reads and writes a client's or
// a server's records through: conn, with raw system calls where
// wire.SocketIO made sio (its I/O) of them.
func Transport(conn net.Conn, sio io.ReadWriter) net.Conn {
	if c, same := sio.(net.Conn); same && c == conn {
		return conn
	}
	return &rawNetConn{Conn: conn, io: sio}
}

// NetConn is the socket under a TLS connection (and under Transport), or
// conn itself.
func NetConn(conn net.Conn) net.Conn {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if rc, ok := conn.(*rawNetConn); ok {
		conn = rc.Conn
	}
	return conn
}

// Direct TLS (PostgreSQL 17's sslnegotiation=direct, PgBouncer 1.25): a
// TCP client may start the TLS handshake at once instead of sending an
// SSLRequest first. Its first byte is then a TLS handshake record's
// (0x16), which no startup packet begins with (it would be a length of
// hundreds of megabytes). As PostgreSQL requires, a direct-TLS client
// must negotiate the ALPN protocol "postgresql": one that offers another
// gets TLS's no_application_protocol alert (Go's server, as PgBouncer's
// OpenSSL callback), one that offers none is closed after the handshake
// with PostgreSQL's log line (ErrDirectNoALPN).

// handshakeRecord is the first byte of a TLS handshake record.
const handshakeRecord = 0x16

// ALPNPostgres is the ALPN protocol name PostgreSQL 17 registered.
const ALPNPostgres = "postgresql"

// ErrDirectNoALPN is PostgreSQL's refusal of a direct-TLS client without
// ALPN (logged only, as there: the client gets no message).
var ErrDirectNoALPN = errors.New("received direct SSL connection request without ALPN protocol negotiation extension")

// StartsDirect peeks at the first byte a client sent, leaving it to be
// read, and reports whether it begins a TLS handshake; false where the
// system cannot peek (netpoll.PeekByte).
func StartsDirect(sc syscall.Conn) (bool, error) {
	b, err := netpoll.PeekByte(sc)
	if errors.Is(err, errors.ErrUnsupported) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return b == handshakeRecord, nil
}
