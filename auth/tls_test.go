package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// server_tls_sslmode: disable asks for no TLS; allow is prefer, as in
// PgBouncer (TLS is asked for, without verifying the server, and a refusal
// is accepted); require also encrypts without verifying but needs TLS.
func TestServerTLSConfigModes(t *testing.T) {
	for _, tc := range []struct {
		mode           string
		wantTLS        bool
		wantRequired   bool
		wantSkipVerify bool
	}{
		{TLSDisable, false, false, false},
		{"", false, false, false},
		{TLSAllow, true, false, true},
		{TLSPrefer, true, false, true},
		{TLSRequire, true, true, true},
	} {
		cfg, _, err := ServerTLSConfig(TLSSettings{Mode: tc.mode}, "db.example")
		if err != nil {
			t.Errorf("%q: %v", tc.mode, err)
			continue
		}
		if (cfg != nil) != tc.wantTLS {
			t.Errorf("%q: TLS config %v; want TLS asked for: %v", tc.mode, cfg != nil, tc.wantTLS)
			continue
		}
		if cfg != nil && cfg.InsecureSkipVerify != tc.wantSkipVerify {
			t.Errorf("%q: InsecureSkipVerify %v; want %v", tc.mode, cfg.InsecureSkipVerify, tc.wantSkipVerify)
		}
		if got := ServerTLSRequired(tc.mode); got != tc.wantRequired {
			t.Errorf("%q: ServerTLSRequired %v; want %v", tc.mode, got, tc.wantRequired)
		}
	}
}

// verify-ca and verify-full without server_tls_ca_file verify against the
// system's trust store, as PgBouncer does, instead of being refused: a
// server whose certificate no system CA signed fails the handshake, and
// the same certificate passes with its CA named.
func TestServerTLSVerifyWithoutCAFileUsesSystemRoots(t *testing.T) {
	ca, caFile := testCA(t)
	for _, mode := range []string{TLSVerifyCA, TLSVerifyFull} {
		base, _, err := ServerTLSConfig(TLSSettings{Mode: mode}, "")
		if err != nil {
			t.Fatalf("%s without server_tls_ca_file: %v", mode, err)
		}
		if base.RootCAs != nil {
			t.Errorf("%s without server_tls_ca_file: RootCAs set; want nil (the system's)", mode)
		}
		err = handshakeWith(t, ca, ServerTLSForHost(base, mode, "127.0.0.1"))
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Errorf("%s without server_tls_ca_file, server signed by a test CA: %v; want x509.UnknownAuthorityError", mode, err)
		}
		withCA, _, err := ServerTLSConfig(TLSSettings{Mode: mode, CAFile: caFile}, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := handshakeWith(t, ca, ServerTLSForHost(withCA, mode, "127.0.0.1")); err != nil {
			t.Errorf("%s with the CA file: %v", mode, err)
		}
	}
}

// verify-full accepts a certificate without SANs whose Common Name is
// the host, as libtls (PgBouncer) and libpq do and crypto/tls does not,
// and refuses one whose Common Name is another host.
func TestServerTLSVerifyFullCommonName(t *testing.T) {
	server, caFile := testCAFor(t, "localhost", nil)
	base, _, err := ServerTLSConfig(TLSSettings{Mode: TLSVerifyFull, CAFile: caFile}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := handshakeWith(t, server, ServerTLSForHost(base, TLSVerifyFull, "LocalHost")); err != nil {
		t.Errorf("verify-full to localhost, certificate with CN=localhost and no SANs: %v", err)
	}
	var hostErr x509.HostnameError
	if err := handshakeWith(t, server, ServerTLSForHost(base, TLSVerifyFull, "db.example")); !errors.As(err, &hostErr) {
		t.Errorf("verify-full to db.example, certificate with CN=localhost: %v; want x509.HostnameError", err)
	}
	// verify-ca checks no name.
	ca, _, err := ServerTLSConfig(TLSSettings{Mode: TLSVerifyCA, CAFile: caFile}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := handshakeWith(t, server, ServerTLSForHost(ca, TLSVerifyCA, "db.example")); err != nil {
		t.Errorf("verify-ca to db.example: %v", err)
	}
	for _, tc := range []struct {
		cn, host string
		want     bool
	}{
		{"*.example.com", "db.example.com", true},
		{"*.example.com", "a.db.example.com", false},
		{"*.example.com", "example.com", false},
		{"localhost.", "localhost", true},
		{"127.0.0.1", "127.0.0.1", true},
		{"", "", false},
	} {
		if got := commonNameMatches(tc.cn, tc.host); got != tc.want {
			t.Errorf("commonNameMatches(%q, %q) = %v; want %v", tc.cn, tc.host, got, tc.want)
		}
	}
}

// testCA is a throwaway CA and a server certificate for 127.0.0.1 it
// signed, with the CA's PEM file.
func testCA(t *testing.T) (server tls.Certificate, caFile string) {
	return testCAFor(t, "127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1)})
}

// testCAFor is testCA with a server certificate whose Common Name is cn
// and whose only SANs are ips (none: a certificate of the Common Name
// alone, as PgBouncer's suite makes).
func testCAFor(t *testing.T, cn string, ips []net.IP) (server tls.Certificate, caFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "auth test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		IPAddresses: ips,
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, caFile
}

// handshakeWith runs a TLS handshake over loopback TCP between a server
// with cert and a client with cfg, and returns the client's error. (A
// net.Pipe would deadlock: both ends write at once when one fails.)
func handshakeWith(t *testing.T, cert tls.Certificate, cfg *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(10 * time.Second))
		_ = tls.Server(s, &tls.Config{Certificates: []tls.Certificate{cert}}).Handshake()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return tls.Client(c, cfg).Handshake()
}
