package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// serverCurve runs a handshake between ClientTLSConfig(s) as the server
// and a Go client with its default curves, and returns the key exchange
// the server used.
func serverCurve(t *testing.T, s TLSSettings) tls.CurveID {
	t.Helper()
	cfg, _, err := ClientTLSConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan tls.CurveID, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, cfg)
		if tc.Handshake() != nil {
			got <- 0
			return
		}
		got <- tc.ConnectionState().CurveID
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tls.Client(c, &tls.Config{InsecureSkipVerify: true}).Handshake(); err != nil {
		t.Fatal(err)
	}
	return <-got
}

// client_tls_ecdhcurve names the one curve the pooler's TLS server
// offers, in OpenSSL's spelling or Go's; auto and none leave Go's choice;
// an unknown name is refused with PgBouncer's message.
func TestClientTLSECDHCurve(t *testing.T) {
	cert, _ := testCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "s.crt"), filepath.Join(dir, "s.key")
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	base := TLSSettings{Mode: TLSRequire, CertFile: certFile, KeyFile: keyFile, Protocols: "secure"}

	for _, tt := range []struct {
		curve string
		want  tls.CurveID
	}{
		{"secp384r1", tls.CurveP384},
		{"P-521", tls.CurveP521},
		{"prime256v1", tls.CurveP256},
		{"X25519", tls.X25519},
	} {
		s := base
		s.ECDHCurve = tt.curve
		if got := serverCurve(t, s); got != tt.want {
			t.Errorf("client_tls_ecdhcurve = %s: key exchange %v, want %v", tt.curve, got, tt.want)
		}
	}
	for _, v := range []string{"auto", "AUTO", "none"} {
		s := base
		s.ECDHCurve = v
		cfg, _, err := ClientTLSConfig(s)
		if err != nil || cfg.CurvePreferences != nil {
			t.Errorf("client_tls_ecdhcurve = %s: %v, preferences %v; want Go's defaults", v, err, cfg.CurvePreferences)
		}
	}
	s := base
	s.ECDHCurve = "brainpoolP256r1x"
	if _, _, err := ClientTLSConfig(s); err == nil || err.Error() != "invalid client_ecdhecurve: brainpoolP256r1x" {
		t.Errorf("unknown curve: %v", err)
	}
}
