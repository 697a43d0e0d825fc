//go:build linux

package integration

import (
	"strings"
	"testing"
)

// TestDirectTLS: pgx with sslnegotiation=direct (PostgreSQL 17's direct
// TLS: ClientHello first, ALPN "postgresql") logs in to the pooler and
// through it to Postgres; libpq 15 (psql), which knows only the SSLRequest,
// logs in over TLS as before; pgx with the default negotiation too.
func TestDirectTLS(t *testing.T) {
	needPG(t)
	pki := newPKI(t, "pooler")
	p := startPooler(t, iniSettings(tlsSettings(pki, "require", map[string]string{"log_connections": "1"}), ""), testUserlist)
	base := withPassword(poolerConn(p, appDB, appUser)+" sslmode=verify-full sslrootcert="+pki.CAFile, appPassword)

	cfg := pgxConfig(t, base+" sslnegotiation=direct")
	if cfg.SSLNegotiation != "direct" {
		t.Fatalf("pgx did not take sslnegotiation=direct: %q", cfg.SSLNegotiation)
	}
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatalf("pgx sslnegotiation=direct: %v", err)
	}
	if got := queryText(t, conn, "SELECT current_user"); got != appUser {
		t.Errorf("direct: current_user = %q", got)
	}
	if got := queryText(t, conn, "SELECT 'x' || 'y'"); got != "xy" {
		t.Errorf("direct: query = %q", got)
	}
	if !p.LogContains("user=" + appUser + " tls=TLSv1.3") {
		t.Errorf("the direct-TLS login is not logged as TLS:\n%s", p.Log())
	}

	// The SSLRequest way: pgx's default and libpq 15.
	wantLogin(t, poolerConn(p, appDB, appUser)+" sslmode=verify-full sslrootcert="+pki.CAFile, appPassword, appUser, nil)
	out, errOut, err := psql(t, appPassword, "-w", poolerConn(p, appDB, appUser)+" sslmode=require", "-tAc", "SELECT current_user")
	if err != nil || strings.TrimSpace(out) != appUser {
		t.Errorf("psql sslmode=require: out=%q err=%v stderr=%q", out, err, errOut)
	}
}
