//go:build linux

package integration

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// osUserName is the name of the OS user with uid.
func osUserName(t testing.TB, uid int) string {
	t.Helper()
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		t.Skipf("uid %d has no name: %v", uid, err)
	}
	return u.Username
}

// TestPeerAuthIdentMap: hba peer over the Unix socket with real psql
// processes. The pooler's OS user (psqlAsPooler) is mapped to app by
// auth_ident_file and logs in as app, whose server login uses app's
// auth_file secret; the test's own OS user has no map line and is
// refused in PgBouncer's words, and logged as PgBouncer logs it; over
// TCP a peer rule refuses everyone.
func TestPeerAuthIdentMap(t *testing.T) {
	needPG(t)
	if os.Geteuid() != 0 || pg.cred == nil {
		t.Skip("needs root: the pooler and the refused client must run as different OS users")
	}
	poolerOS := osUserName(t, int(pg.cred.Uid))
	sock := t.TempDir()
	hba := writeTemp(t, "hba.conf", strings.Join([]string{
		"local " + appDB + " all peer map=m",
		"host all all 127.0.0.1/32 peer",
	}, "\n")+"\n")
	ident := writeTemp(t, "ident.conf", fmt.Sprintf("m %s %s\n", poolerOS, appUser))
	p := startPooler(t, iniSettings(map[string]string{
		"unix_socket_dir": sock, "auth_type": "hba", "auth_hba_file": hba, "auth_ident_file": ident,
	}, ""), testUserlist)
	port := strconv.Itoa(p.Port)

	out, stderr, err := psqlAsPooler(t, "", "-w", "-tA", "-h", sock, "-p", port, "-U", appUser, "-d", appDB, "-c", "SELECT current_user")
	if err != nil || strings.TrimSpace(out) != appUser {
		t.Fatalf("mapped OS user %s as %s: out=%q err=%v stderr=%q", poolerOS, appUser, out, err, stderr)
	}
	// The map allows app only.
	_, stderr, err = psqlAsPooler(t, "", "-w", "-tA", "-h", sock, "-p", port, "-U", md5User, "-d", appDB, "-c", "SELECT 1")
	if err == nil || !strings.Contains(stderr, "FATAL:  unix socket login rejected") {
		t.Errorf("mapped OS user as %s: err=%v stderr=%q", md5User, err, stderr)
	}
	// The test's OS user (root) has no line in the map.
	_, stderr, err = psql(t, "", "-w", "-tA", "-h", sock, "-p", port, "-U", appUser, "-d", appDB, "-c", "SELECT 1")
	if err == nil || !strings.Contains(stderr, "FATAL:  unix socket login rejected") {
		t.Errorf("unmapped OS user: err=%v stderr=%q", err, stderr)
	}
	if !p.LogContains("ident map m cannot be matched") {
		t.Errorf("no 'ident map m cannot be matched' line:\n%s", p.Log())
	}
	// Peer over TCP.
	_, stderr, err = psql(t, "", "-w", "-tA", "-h", "127.0.0.1", "-p", port, "-U", appUser, "-d", appDB, "-c", "SELECT 1")
	if err == nil || !strings.Contains(stderr, "FATAL:  unix socket login rejected") {
		t.Errorf("peer over TCP: err=%v stderr=%q", err, stderr)
	}
}

// TestCertIdentMap: an hba cert rule with map= admits a certificate whose
// name a map line pairs with the user (pgx and psql), refuses the users
// the map does not pair with it, with PgBouncer's log line.
func TestCertIdentMap(t *testing.T) {
	needPG(t)
	pki := newPKI(t, "pooler")
	certFile, keyFile := pki.ClientCert(t, "client.acme.org")
	cert := pki.TLSCert(t, certFile, keyFile)
	withCert := func(cfg *pgx.ConnConfig) { cfg.TLSConfig.Certificates = []tls.Certificate{cert} }
	hba := writeTemp(t, "hba.conf", "hostssl all all 127.0.0.1/32 cert map=certs\n")
	ident := writeTemp(t, "ident.conf", "certs  client.acme.org  "+md5User+"\ncerts  other.acme.org  "+appUser+"\n")
	p := startPooler(t, iniSettings(tlsSettings(pki, "require", map[string]string{
		"auth_type": "hba", "auth_hba_file": hba, "auth_ident_file": ident,
	}), ""), testUserlist)
	conn := func(user string) string {
		return poolerConn(p, appDB, user) + " sslmode=verify-full sslrootcert=" + pki.CAFile + " sslcert=" + certFile + " sslkey=" + keyFile
	}
	// pgx and psql (wantLogin runs both).
	wantLogin(t, conn(md5User), "", md5User, withCert)
	// The CN is app's name in no line: the map pairs other.acme.org with app.
	wantRefused(t, conn(appUser), "", "28000", `certificate authentication failed for user "`+appUser+`"`, withCert)
	if !p.LogContains("ident map: certs does not have a match") {
		t.Errorf("no 'ident map: certs does not have a match' line:\n%s", p.Log())
	}
}
