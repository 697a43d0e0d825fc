package tlsconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/internal/loginfail"
	"github.com/pgturnstile/pgturnstile/wire"
)

// A server login's TLS: the SSLRequest, Postgres's one-byte answer, the
// handshake. Each way it fails carries PgBouncer's short reason for the
// pool (internal/loginfail), and closes conn.

// StartServer asks Postgres for TLS as server_tls_sslmode (mode) says,
// with base, the server TLS in force (nil: disable): allow and prefer fall
// back to plaintext when the server answers 'N', require and verify-* fail
// instead.
func StartServer(conn net.Conn, base *tls.Config, mode, host string) (net.Conn, error) {
	if base == nil {
		return conn, nil
	}
	cfg := auth.ServerTLSForHost(base, mode, host)
	if _, err := conn.Write(wire.AppendSSLRequest(nil)); err != nil {
		conn.Close()
		return nil, err
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		conn.Close()
		return nil, err
	}
	switch b[0] {
	case 'S':
		tc := tls.Client(Transport(conn, wire.SocketIO(conn)), cfg)
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, &loginfail.ReasonError{Reason: "TLS startup failed", Err: handshakeError(err)}
		}
		return tc, nil
	case 'N':
		if auth.ServerTLSRequired(mode) {
			conn.Close()
			return nil, &loginfail.ReasonError{Reason: "server refused SSL", Err: errors.New("server does not support TLS, and server_tls_sslmode=" + mode + " requires it")}
		}
		return conn, nil
	}
	conn.Close()
	return nil, &loginfail.ReasonError{Reason: "bad sslreq answer", Err: fmt.Errorf("server answered the SSLRequest with %q", b[0])}
}

// handshakeError words a failed server TLS handshake as PgBouncer logs
// it ("TLS handshake error: … certificate verify failed"), which the
// suite and operators' alerting look for, with Go's error after it.
func handshakeError(err error) error {
	var cve *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	if errors.As(err, &cve) || errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &host) {
		return fmt.Errorf("TLS handshake error: certificate verify failed: %w", err)
	}
	return fmt.Errorf("TLS handshake error: %w", err)
}
