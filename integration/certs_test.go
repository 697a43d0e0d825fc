//go:build linux

package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI is a throwaway certificate authority made by a test: a CA, a
// server certificate for 127.0.0.1 and localhost, and client certificates
// issued on demand. Every file is PEM in Dir (keys PKCS#8, mode 0600).
type testPKI struct {
	Dir        string
	CAFile     string // the CA certificate
	ServerCert string // for 127.0.0.1 and localhost
	ServerKey  string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	pool  *x509.CertPool
}

// newPKI makes a CA named name and its server certificate in a temp dir.
func newPKI(t testing.TB, name string) *testPKI {
	t.Helper()
	k := &testPKI{Dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if k.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	k.caKey = key
	k.pool = x509.NewCertPool()
	k.pool.AddCert(k.ca)
	k.CAFile = filepath.Join(k.Dir, "ca.crt")
	writePEM(t, k.CAFile, "CERTIFICATE", der)
	k.ServerCert, k.ServerKey = k.issue(t, "server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return k
}

// ClientCert issues a client certificate whose CN is cn and returns the
// certificate and key files.
func (k *testPKI) ClientCert(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	return k.issue(t, "client-"+cn, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// TLSCert loads a certificate and key written by the PKI for crypto/tls.
func (k *testPKI) TLSCert(t testing.TB, certFile, keyFile string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Pool is a cert pool holding the CA.
func (k *testPKI) Pool() *x509.CertPool { return k.pool }

func (k *testPKI) issue(t testing.TB, name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, big.NewInt(1<<62)); err != nil {
		t.Fatal(err)
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, k.ca, &key.PublicKey, k.caKey)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(k.Dir, name+".crt")
	keyFile = filepath.Join(k.Dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", pk)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsClusterHBA admits TCP clients only over TLS (SCRAM), and the harness's
// superuser over the unix socket.
const tlsClusterHBA = `local all all trust
hostssl all all 127.0.0.1/32 scram-sha-256
hostssl all all 127.0.0.2/32 scram-sha-256
hostnossl all all 0.0.0.0/0 reject
`

// startTLSCluster starts a second PostgreSQL with ssl=on, serving pki's
// server certificate (key 0600, owned by the postgres OS user) on 127.0.0.1
// and 127.0.0.2, with tlsClusterHBA and the role app (SCRAM, appPassword).
// It is stopped in t.Cleanup.
func startTLSCluster(t testing.TB, pki *testPKI) *cluster {
	t.Helper()
	needPG(t)
	c, err := initCluster()
	if c != nil {
		t.Cleanup(c.stop)
	}
	if err != nil {
		t.Fatalf("initdb for the TLS cluster: %v", err)
	}
	for src, dst := range map[string]string{pki.ServerCert: "server.crt", pki.ServerKey: "server.key", pki.CAFile: "ca.crt"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(c.dataDir, dst)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if c.cred != nil {
			if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(c.dataDir, "pg_hba.conf"), []byte(tlsClusterHBA), 0o600); err != nil {
		t.Fatal(err)
	}
	c.extraArgs = []string{
		"-c", "ssl=on",
		"-c", "ssl_cert_file=server.crt",
		"-c", "ssl_key_file=server.key",
		"-c", "ssl_ca_file=ca.crt",
		"-c", "listen_addresses=127.0.0.1,127.0.0.2",
		"-c", "max_connections=20",
	}
	if err := c.startOnFreePort(); err != nil {
		t.Fatalf("starting the TLS cluster: %v", err)
	}
	c.createApp(t, "TLS cluster")
	if on := strings.TrimSpace(queryTextOn(t, c, "SHOW ssl")); on != "on" {
		t.Fatalf("TLS cluster: ssl = %q", on)
	}
	return c
}

// queryTextOn runs a one-value query on c's monitoring connection.
func queryTextOn(t testing.TB, c *cluster, sql string, args ...any) string {
	t.Helper()
	c.monitorMu.Lock()
	defer c.monitorMu.Unlock()
	var s string
	if err := c.monitor.QueryRow(ctxT(t, 10*time.Second), sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}
