//go:build linux

package integration

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/testcert"
)

// testPKI is a throwaway certificate authority made by a test
// (internal/testcert): a CA, a server certificate for 127.0.0.1 and
// localhost, and client certificates issued on demand. Every file is PEM
// in Dir (keys PKCS#8, mode 0600).
type testPKI struct {
	Dir        string
	CAFile     string // the CA certificate
	ServerCert string // for 127.0.0.1 and localhost
	ServerKey  string

	ca *testcert.CA
}

// newPKI makes a CA named name and its server certificate in a temp dir.
func newPKI(t testing.TB, name string) *testPKI {
	t.Helper()
	k := &testPKI{Dir: t.TempDir()}
	var err error
	if k.ca, err = testcert.NewCA(k.Dir, name+" test CA"); err != nil {
		t.Fatal(err)
	}
	k.CAFile = k.ca.File
	server := testcert.Server{CommonName: "localhost", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
	if k.ServerCert, k.ServerKey, err = k.ca.Issue(k.Dir, "server", server, nil); err != nil {
		t.Fatal(err)
	}
	return k
}

// ClientCert issues a client certificate whose CN is cn and returns the
// certificate and key files.
func (k *testPKI) ClientCert(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, err := k.ca.IssueClient(k.Dir, "client-"+cn, cn)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
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
func (k *testPKI) Pool() *x509.CertPool { return k.ca.Pool }

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
