package pooler

import (
	"crypto/tls"
	"syscall"

	"github.com/pgturnstile/pgturnstile/internal/tlsconn"
)

// Direct TLS (PostgreSQL 17's sslnegotiation=direct, PgBouncer 1.25): as
// in PgBouncer the first byte is peeked only when client TLS is configured
// and only on TCP; a client that sends a startup packet (libpq before 17,
// or sslnegotiation=postgres) is read as before. The first byte's test
// and the ALPN rule are internal/tlsconn's.

// directTLS starts TLS at once when the client's first byte begins a TLS
// handshake; asked.ssl is then set, so that an SSLRequest inside that TLS
// is refused as a repeated one.
func (c *client) directTLS(asked *encryptionAsked) error {
	if c.local || c.tls {
		return nil
	}
	cfg := c.svc.gen.Load().sec.ClientTLS
	if cfg == nil {
		return nil
	}
	sc, ok := c.conn.(syscall.Conn)
	if !ok {
		return nil
	}
	direct, err := tlsconn.StartsDirect(sc)
	if err != nil || !direct {
		return err
	}
	asked.ssl = true
	c.debugf("starting direct TLS handshake")
	tc := tls.Server(tlsconn.Transport(c.conn, c.plainIO()), cfg)
	if err := tc.Handshake(); err != nil {
		return err
	}
	if tc.ConnectionState().NegotiatedProtocol != tlsconn.ALPNPostgres {
		c.logger().Info(tlsconn.ErrDirectNoALPN.Error())
		tc.Close()
		return errSilent
	}
	c.useTLS(tc)
	return nil
}
