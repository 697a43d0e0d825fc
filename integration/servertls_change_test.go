//go:build linux

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestServerTLSChange (issue 18, causes 3 and 4): a change of server_tls_*
// by SET closes the servers connected with the old settings (the next
// transaction runs on a new backend) and forgets the login error cached
// under them; server_tls_sslmode = allow uses TLS, as PgBouncer (it is
// prefer there).
func TestServerTLSChange(t *testing.T) {
	needPG(t)
	pki := newPKI(t, "postgres")
	tc := startTLSCluster(t, pki) // refuses plaintext
	extra := fmt.Sprintf("[databases]\ntlsdb = host=127.0.0.1 port=%d dbname=%s pool_mode=transaction\nplaindb = host=127.0.0.1 port=@PGPORT@ dbname=%s pool_mode=transaction\n",
		tc.port, appDB, appDB)
	settings := withConsoleUsers(map[string]string{
		"server_tls_sslmode": "disable", "server_tls_ca_file": pki.CAFile, "server_login_retry": "30",
	})
	p := startPooler(t, iniSettings(settings, extra), opsUserlist)
	admin := adminConsole(t, p)

	// Plaintext: the TLS cluster refuses the login, and the error is
	// cached for server_login_retry.
	plain := connectPgx(t, p.ConnString("plaindb", appUser, appPassword))
	oldPID := queryInt(t, plain, "SELECT pg_backend_pid()")
	if _, err := tryConnectPgx(t, pgxConfig(t, p.ConnString("tlsdb", appUser, appPassword))); err == nil {
		t.Fatal("tlsdb with server_tls_sslmode = disable: connected, want the cluster's refusal")
	}

	adminExec(t, admin, "SET server_tls_sslmode = 'allow'")
	sslOf := "SELECT coalesce((SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()), 'no row')"
	conn, err := tryConnectPgx(t, pgxConfig(t, p.ConnString("tlsdb", appUser, appPassword)))
	if err != nil {
		t.Fatalf("tlsdb after SET server_tls_sslmode = allow: %v\n%s", err, p.Log())
	}
	if got := queryText(t, conn, sslOf); got != "true" {
		t.Errorf("pg_stat_ssl.ssl with server_tls_sslmode = allow: %q, want true", got)
	}
	// The plaintext server of plaindb was made under the old settings.
	if pid := queryInt(t, plain, "SELECT pg_backend_pid()"); pid == oldPID {
		t.Errorf("plaindb still on backend %d after server_tls_sslmode changed; want a new server", pid)
	}
	if !p.WaitLog("closing because: database configuration changed", 5*time.Second) {
		t.Errorf("no close of the old server logged:\n%s", p.Log())
	}
	if strings.Contains(p.Log(), "panic") {
		t.Errorf("the pooler panicked:\n%s", p.Log())
	}
}
