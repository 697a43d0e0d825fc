// Package testldap starts a real OpenLDAP slapd for tests: its own
// slapd.conf, an LDIF database filled by slapadd, plain LDAP and LDAPS
// listeners on 127.0.0.1 (ports below 32768, clear of the ephemeral
// range), and a throwaway CA whose certificate the tests trust. Tests skip
// where /usr/sbin/slapd is missing (scripts/test-deps.sh installs it).
package testldap

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/testcert"
)

// Slapd is the binary Start runs.
const Slapd = "/usr/sbin/slapd"

// BaseDN is the suffix of the test directory.
const BaseDN = "dc=example,dc=net"

// Users and their passwords in the directory (entries uid=NAME,BaseDN).
// twin1 and twin2 share description "twins", for a search that finds two.
var Users = map[string]string{"ldapuser1": "secret1", "ldapuser2": "secret2", "twin1": "t1", "twin2": "t2"}

// Server is a running slapd.
type Server struct {
	Port, TLSPort int
	CAFile        string // PEM certificate of the CA that signed the server's
	Dir           string
}

// Start runs slapd for the test and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := os.Stat(Slapd); err != nil {
		t.Skip("slapd not installed (scripts/test-deps.sh installs it)")
	}
	dir := t.TempDir()
	s := &Server{Dir: dir, CAFile: filepath.Join(dir, "ca.crt")}
	if err := writeCerts(dir); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "slapd.conf")
	schema := "/etc/ldap/schema"
	text := fmt.Sprintf(`include %[1]s/core.schema
include %[1]s/cosine.schema
include %[1]s/nis.schema
include %[1]s/inetorgperson.schema
pidfile %[2]s/slapd.pid
TLSCACertificateFile %[2]s/ca.crt
TLSCertificateFile %[2]s/server.crt
TLSCertificateKeyFile %[2]s/server.key
access to * by * read by anonymous auth
database ldif
directory %[3]s
suffix "%[4]s"
rootdn "cn=Manager,%[4]s"
rootpw secret
`, schema, dir, data, BaseDN)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	ldif := fmt.Sprintf("dn: %s\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: ExampleCo\n", BaseDN)
	for _, u := range []string{"ldapuser1", "ldapuser2", "twin1", "twin2"} {
		ldif += fmt.Sprintf("\ndn: uid=%s,%s\nobjectClass: inetOrgPerson\nuid: %s\nsn: Test\ncn: %s\nmail: %s@example.net\nuserPassword: %s\n",
			u, BaseDN, u, u, u, Users[u])
		if u == "twin1" || u == "twin2" {
			ldif += "description: twins\n"
		}
	}
	ldifFile := filepath.Join(dir, "data.ldif")
	if err := os.WriteFile(ldifFile, []byte(ldif), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/sbin/slapadd", "-f", conf, "-l", ldifFile).CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}
	for try := 0; try < 20; try++ {
		s.Port, s.TLSPort = freePort(t), freePort(t)
		if s.Port == s.TLSPort {
			continue
		}
		urls := fmt.Sprintf("ldap://127.0.0.1:%d/ ldaps://127.0.0.1:%d/", s.Port, s.TLSPort)
		cmd := exec.Command(Slapd, "-f", conf, "-h", urls, "-d", "0")
		logf, err := os.Create(filepath.Join(dir, "slapd.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
		if waitListening(s.Port, done) && waitListening(s.TLSPort, done) {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-done
			})
			return s
		}
		_ = cmd.Process.Kill()
		<-done
	}
	log, _ := os.ReadFile(filepath.Join(dir, "slapd.log"))
	t.Fatalf("slapd did not start:\n%s", log)
	return nil
}

// freePort picks a port in 20000-32767 that nothing listens on now.
func freePort(t testing.TB) int {
	for {
		n, err := rand.Int(rand.Reader, big.NewInt(12767))
		if err != nil {
			t.Fatal(err)
		}
		p := 20000 + int(n.Int64())
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			l.Close()
			return p
		}
	}
}

func waitListening(port int, exited <-chan struct{}) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// writeCerts writes ca.crt, server.crt and server.key (CN=server, no
// names: only a client that does not verify, or verifies with its own
// ServerName, accepts it for 127.0.0.1).
func writeCerts(dir string) error {
	ca, err := testcert.NewCA(dir, "CA")
	if err != nil {
		return err
	}
	_, _, err = ca.Issue(dir, "server", testcert.Server{CommonName: "server", DNSNames: []string{"server"}}, nil)
	return err
}
