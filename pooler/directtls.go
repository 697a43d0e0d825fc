package pooler

import (
	"crypto/tls"
	"errors"
	"syscall"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// Direct TLS (PostgreSQL 17's sslnegotiation=direct, PgBouncer 1.25): a
// TCP client may start the TLS handshake at once instead of sending an
// SSLRequest first. Its first byte is then a TLS handshake record's
// (0x16), which no startup packet begins with (it would be a length of
// hundreds of megabytes). As in PgBouncer the first byte is peeked only
// when client TLS is configured and only on TCP; a client that sends a
// startup packet (libpq before 17, or sslnegotiation=postgres) is read as
// before. As PostgreSQL requires, a direct-TLS client must negotiate the
// ALPN protocol "postgresql": one that offers another gets TLS's
// no_application_protocol alert (Go's server, as PgBouncer's OpenSSL
// callback), one that offers none is closed after the handshake with
// PostgreSQL's log line.

// tlsHandshakeRecord is the first byte of a TLS handshake record.
const tlsHandshakeRecord = 0x16

// alpnPostgres is the ALPN protocol name PostgreSQL 17 registered.
const alpnPostgres = "postgresql"

// errDirectTLSNoALPN is PostgreSQL's refusal of a direct-TLS client
// without ALPN (logged only, as there: the client gets no message).
var errDirectTLSNoALPN = errors.New("received direct SSL connection request without ALPN protocol negotiation extension")

// directTLS starts TLS at once when the client's first byte begins a TLS
// handshake; asked.ssl is then set, so that an SSLRequest inside that TLS
// is refused as a repeated one.
func (c *client) directTLS(asked *encryptionAsked) error {
	if c.local || c.tls {
		return nil
	}
	cfg := c.svc.gen.Load().sec.clientTLS
	if cfg == nil {
		return nil
	}
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return nil
	}
	b, err := netpoll.PeekByte(sc)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return err
	}
	if b != tlsHandshakeRecord {
		return nil
	}
	asked.ssl = true
	c.debugf("starting direct TLS handshake")
	tc := tls.Server(tlsTransport(c.conn, c.plainIO()), cfg)
	if err := tc.Handshake(); err != nil {
		return err
	}
	if tc.ConnectionState().NegotiatedProtocol != alpnPostgres {
		c.logger().Info(errDirectTLSNoALPN.Error())
		tc.Close()
		return errSilent
	}
	c.useTLS(tc)
	return nil
}
