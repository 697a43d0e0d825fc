package tlsconn

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/internal/loginfail"
	"github.com/pgturnstile/pgturnstile/internal/testcert"
)

// fakePostgres accepts one connection on a loopback socket, reads its
// SSLRequest and answers it with answer; on 'S' it then serves TLS with
// cert. It returns the pooler's side of the connection.
func fakePostgres(t *testing.T, answer byte, cert *tls.Certificate) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var req [8]byte
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		if _, err := c.Write([]byte{answer}); err != nil || answer != 'S' {
			io.Copy(io.Discard, c) // until the pooler's side closes
			return
		}
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{*cert}})
		if tc.Handshake() == nil {
			io.Copy(io.Discard, tc)
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serverCert makes a CA and a certificate for 127.0.0.1 signed by it.
func serverCert(t *testing.T, name string) (*testcert.CA, *tls.Certificate) {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcert.NewCA(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.Issue(dir, "server", testcert.Localhost, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return ca, &cert
}

func baseFor(t *testing.T, s auth.TLSSettings) *tls.Config {
	t.Helper()
	cfg, _, err := auth.ServerTLSConfig(s, "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// reason is the short reason of a failed StartServer, "" for none.
func reason(err error) string {
	var re *loginfail.ReasonError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

func TestStartServer(t *testing.T) {
	ca, cert := serverCert(t, "trusted")
	other, _ := serverCert(t, "other")
	verify := func(ca *testcert.CA) *tls.Config {
		return baseFor(t, auth.TLSSettings{Mode: auth.TLSVerifyCA, CAFile: ca.File})
	}

	// disable: no SSLRequest at all, the connection as it was.
	plain := fakePostgres(t, 'N', nil)
	if got, err := StartServer(plain, nil, auth.TLSDisable, "127.0.0.1"); err != nil || got != plain {
		t.Errorf("disable: %v, same conn %v", err, got == plain)
	}

	// prefer falls back to plaintext on 'N'; require refuses it.
	conn := fakePostgres(t, 'N', nil)
	if got, err := StartServer(conn, baseFor(t, auth.TLSSettings{Mode: auth.TLSPrefer}), auth.TLSPrefer, "127.0.0.1"); err != nil || got != conn {
		t.Errorf("prefer, refused: %v, same conn %v", err, got == conn)
	}
	conn = fakePostgres(t, 'N', nil)
	if _, err := StartServer(conn, baseFor(t, auth.TLSSettings{Mode: auth.TLSRequire}), auth.TLSRequire, "127.0.0.1"); reason(err) != "server refused SSL" {
		t.Errorf("require, refused: %v", err)
	}

	// An answer that is neither.
	conn = fakePostgres(t, 'E', nil)
	if _, err := StartServer(conn, baseFor(t, auth.TLSSettings{Mode: auth.TLSPrefer}), auth.TLSPrefer, "127.0.0.1"); reason(err) != "bad sslreq answer" {
		t.Errorf("answer 'E': %v", err)
	}

	// TLS with a certificate the CA signed.
	conn = fakePostgres(t, 'S', cert)
	got, err := StartServer(conn, verify(ca), auth.TLSVerifyCA, "127.0.0.1")
	if err != nil {
		t.Fatalf("verify-ca, trusted: %v", err)
	}
	if tc, ok := got.(*tls.Conn); !ok || !tc.ConnectionState().HandshakeComplete {
		t.Errorf("verify-ca, trusted: %T", got)
	}

	// Another CA: PgBouncer's words, which alerting looks for.
	conn = fakePostgres(t, 'S', cert)
	_, err = StartServer(conn, verify(other), auth.TLSVerifyCA, "127.0.0.1")
	if reason(err) != "TLS startup failed" || !strings.HasPrefix(err.Error(), "TLS handshake error: certificate verify failed: ") {
		t.Errorf("verify-ca, another CA: %v", err)
	}
}
