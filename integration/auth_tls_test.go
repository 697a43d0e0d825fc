//go:build linux

package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ---------------------------------------------------------------------------
// Login helpers shared by the auth and TLS tests: each tries one identity
// with pgx and with psql.

// poolerConn is a libpq keyword/value string to p without password or
// sslmode; callers add sslmode and the TLS options they test.
func poolerConn(p *Pooler, db, user string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s connect_timeout=10", p.Port, db, user)
}

// withPassword appends password= to a connection string (an empty password
// is left out).
func withPassword(connstr, password string) string {
	if password == "" {
		return connstr
	}
	return connstr + " password=" + password
}

// wantLogin asserts that pgx (cfg tweaked by tweak, when not nil) and psql
// both log in with connstr and password, and that current_user is user.
func wantLogin(t testing.TB, connstr, password, user string, tweak func(*pgx.ConnConfig)) {
	t.Helper()
	cfg := pgxConfig(t, withPassword(connstr, password))
	if tweak != nil {
		tweak(cfg)
	}
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Errorf("pgx %q: %v", connstr, err)
	} else {
		if got := queryText(t, conn, "SELECT current_user"); got != user {
			t.Errorf("pgx %q: current_user = %q, want %q", connstr, got, user)
		}
		_ = conn.Close(context.Background())
	}
	out, errOut, err := psql(t, password, "-w", connstr, "-tAc", "SELECT current_user")
	if err != nil || strings.TrimSpace(out) != user {
		t.Errorf("psql %q: out=%q err=%v stderr=%q, want current_user %q", connstr, out, err, errOut, user)
	}
}

// wantRefused asserts that pgx gets ErrorResponse FATAL code message and
// psql fails with "FATAL:  message" on stderr.
func wantRefused(t testing.TB, connstr, password, code, message string, tweak func(*pgx.ConnConfig)) {
	t.Helper()
	cfg := pgxConfig(t, withPassword(connstr, password))
	if tweak != nil {
		tweak(cfg)
	}
	_, err := tryConnectPgx(t, cfg)
	checkPgError(t, "pgx "+connstr, err, code, message)
	out, errOut, err := psql(t, password, "-w", connstr, "-tAc", "SELECT current_user")
	if err == nil {
		t.Errorf("psql %q: logged in (out=%q), want FATAL %q", connstr, out, message)
	} else if !strings.Contains(errOut, "FATAL:  "+message+"\n") {
		t.Errorf("psql %q: stderr %q, want it to contain %q", connstr, errOut, "FATAL:  "+message)
	}
}

// checkPgError is wantPgError (severity FATAL) that reports with t.Errorf
// and carries on.
func checkPgError(t testing.TB, what string, err error, code, message string) {
	t.Helper()
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		t.Errorf("%s: succeeded, want FATAL %s %q", what, code, message)
	case !errors.As(err, &pgErr):
		t.Errorf("%s: %T %v, want FATAL %s %q", what, err, err, code, message)
	case pgErr.Severity != "FATAL" || pgErr.Code != code || pgErr.Message != message:
		t.Errorf("%s: %s %s %q, want FATAL %s %q", what, pgErr.Severity, pgErr.Code, pgErr.Message, code, message)
	}
}

// noSecretsInLog fails the test if the pooler logged any of secrets.
func noSecretsInLog(t testing.TB, p *Pooler, secrets ...string) {
	t.Helper()
	logText := p.Log()
	for _, s := range secrets {
		if s != "" && strings.Contains(logText, s) {
			t.Errorf("pooler log contains the secret %q", s)
		}
	}
}

func noHBAEntry(user, db string) string {
	return fmt.Sprintf(`no pg_hba.conf entry for host "127.0.0.1", user "%s", database "%s"`, user, db)
}

// writeTemp writes content into a new file in a temp dir and returns its path.
func writeTemp(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ---------------------------------------------------------------------------

// TestAuthTypesMore covers what TestAuthTypes does not: auth_type=any, hba
// with every method and rule form, and unknown users under each method.
// (cert is in TestClientCertAuth, which needs TLS.)
func TestAuthTypesMore(t *testing.T) {
	needPG(t)

	t.Run("any", func(t *testing.T) {
		// any ignores the client's user name and password: the database
		// must force a user, whose password comes from auth_file.
		extra := fmt.Sprintf("[databases]\nanydb = host=127.0.0.1 port=@PGPORT@ dbname=%s user=%s\n", appDB, md5User)
		p := startPooler(t, iniSettings(map[string]string{"auth_type": "any"}, extra), testUserlist)
		wantLogin(t, p.ConnString("anydb", appUser, ""), "", md5User, nil)
		wantLogin(t, p.ConnString("anydb", "nobody", ""), "wrong", md5User, nil)
	})

	t.Run("unknown-user", func(t *testing.T) {
		// Unknown users get the same answer as a wrong password (a mock
		// exchange), except under trust, which has no password to mock
		// and refuses in PgBouncer's words.
		for _, tc := range []struct{ authType, code, msg string }{
			{"trust", "08P01", `"trust" authentication failed`},
			{"plain", "28P01", "password authentication failed"},
			{"md5", "28P01", "password authentication failed"},
			{"scram-sha-256", "28P01", "SASL authentication failed"},
		} {
			t.Run(tc.authType, func(t *testing.T) {
				p := startPooler(t, iniSettings(map[string]string{"auth_type": tc.authType}, ""), testUserlist)
				wantRefused(t, p.ConnString(appDB, "ghost", ""), "ghost-pw", tc.code, tc.msg, nil)
			})
		}
	})

	t.Run("hba", func(t *testing.T) {
		users := writeTemp(t, "hbausers", "# users that may use benchdb\n"+benchUser+"\n")
		hba := strings.Join([]string{
			"# pgturnstile auth_hba_file",
			"local all all trust",
			"host appdb " + md5User + " 127.0.0.1/32 md5",
			"host appdb " + appUser + " 127.0.0.1/32 scram-sha-256",
			"host otherdb " + appUser + " 127.0.0.1 255.255.255.255 password",
			"host otherdb " + md5User + "," + benchUser + " 127.0.0.0/8 reject",
			"host " + benchDB + " @" + users + " 127.0.0.1/32 trust",
			"hostssl all all 0.0.0.0/0 md5",
			"host all all 10.0.0.0/8 trust",
		}, "\n") + "\n"
		hbaPath := writeTemp(t, "hba.conf", hba)
		p := startPooler(t, iniSettings(map[string]string{"auth_type": "hba", "auth_hba_file": hbaPath}, ""), testUserlist)

		// md5 rule
		wantLogin(t, p.ConnString(appDB, md5User, ""), md5Password, md5User, nil)
		wantRefused(t, p.ConnString(appDB, md5User, ""), "wrong", "28P01", "password authentication failed", nil)
		// scram-sha-256 rule
		wantLogin(t, p.ConnString(appDB, appUser, ""), appPassword, appUser, nil)
		wantRefused(t, p.ConnString(appDB, appUser, ""), "wrong", "28P01", "SASL authentication failed", nil)
		// password rule (address + mask)
		wantLogin(t, p.ConnString(otherDB, appUser, ""), appPassword, appUser, nil)
		wantRefused(t, p.ConnString(otherDB, appUser, ""), "wrong", "28P01", "password authentication failed", nil)
		// reject rule (user list)
		wantRefused(t, p.ConnString(otherDB, md5User, ""), md5Password, "28000", noHBAEntry(md5User, otherDB), nil)
		wantRefused(t, p.ConnString(otherDB, benchUser, ""), benchPass, "28000", noHBAEntry(benchUser, otherDB), nil)
		// trust rule (@file): any password
		wantLogin(t, p.ConnString(benchDB, benchUser, ""), "wrong", benchUser, nil)
		// no rule matches: hostssl needs TLS, 10/8 is not our address
		wantRefused(t, p.ConnString(benchDB, appUser, ""), appPassword, "28000", noHBAEntry(appUser, benchDB), nil)
		noSecretsInLog(t, p, appPassword, md5Password, benchPass)
	})
}

// tlsSettings are the client_tls_* settings for pki's server certificate.
func tlsSettings(pki *testPKI, mode string, more map[string]string) map[string]string {
	s := map[string]string{
		"client_tls_sslmode":   mode,
		"client_tls_key_file":  pki.ServerKey,
		"client_tls_cert_file": pki.ServerCert,
		"client_tls_ca_file":   pki.CAFile,
	}
	for k, v := range more {
		s[k] = v
	}
	return s
}

// tlsState is the TLS state of a pgx connection, or nil when it is plaintext.
func tlsState(conn *pgx.Conn) *tls.ConnectionState {
	if tc, ok := conn.PgConn().Conn().(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}

// TestClientTLS: client_tls_sslmode=require with a certificate made by the
// test: psql and pgx verify it (verify-full, host 127.0.0.1), a plaintext
// client is refused with "SSL required", client_tls_protocols is honoured.
func TestClientTLS(t *testing.T) {
	needPG(t)
	pki := newPKI(t, "pooler")
	p := startPooler(t, iniSettings(tlsSettings(pki, "require", nil), ""), testUserlist)
	verifyFull := poolerConn(p, appDB, appUser) + " sslmode=verify-full sslrootcert=" + pki.CAFile

	t.Run("verify-full", func(t *testing.T) {
		conn := connectPgx(t, withPassword(verifyFull, appPassword))
		st := tlsState(conn)
		if st == nil || !st.HandshakeComplete {
			t.Fatalf("pgx: connection is not TLS (%T)", conn.PgConn().Conn())
		}
		if len(st.PeerCertificates) == 0 || st.PeerCertificates[0].Subject.CommonName != "localhost" {
			t.Errorf("pgx: server certificate %v", st.PeerCertificates)
		}
		if got := queryText(t, conn, "SELECT current_user"); got != appUser {
			t.Errorf("pgx: current_user = %q", got)
		}
		t.Logf("pgx: %s", tls.VersionName(st.Version))

		out, errOut, err := psql(t, appPassword, "-w", verifyFull, "-tA", "-c", `\conninfo`, "-c", "SELECT current_user")
		if err != nil || !strings.Contains(out, "SSL connection (protocol: TLSv1.") || !strings.HasSuffix(strings.TrimSpace(out), "\n"+appUser) {
			t.Errorf("psql verify-full: out=%q err=%v stderr=%q", out, err, errOut)
		}

		// Control: the check is real, a client trusting another CA refuses.
		other := newPKI(t, "other")
		_, err = tryConnectPgx(t, pgxConfig(t, withPassword(poolerConn(p, appDB, appUser)+" sslmode=verify-full sslrootcert="+other.CAFile, appPassword)))
		if err == nil || !strings.Contains(err.Error(), "x509") {
			t.Errorf("pgx trusting another CA: %v, want a certificate verification error", err)
		}
		_, errOut, err = psql(t, appPassword, "-w", poolerConn(p, appDB, appUser)+" sslmode=verify-full sslrootcert="+other.CAFile, "-tAc", "SELECT 1")
		if err == nil || !strings.Contains(errOut, "certificate verify failed") {
			t.Errorf("psql trusting another CA: err=%v stderr=%q, want certificate verify failed", err, errOut)
		}
	})

	t.Run("plaintext-refused", func(t *testing.T) {
		wantRefused(t, poolerConn(p, appDB, appUser)+" sslmode=disable", appPassword, "08P01", "SSL required", nil)
	})

	t.Run("wrong-password-over-tls", func(t *testing.T) {
		wantRefused(t, verifyFull, "wrong", "28P01", "SASL authentication failed", nil)
	})

	t.Run("protocols", func(t *testing.T) {
		p13 := startPooler(t, iniSettings(tlsSettings(pki, "require", map[string]string{"client_tls_protocols": "tlsv1.3"}), ""), testUserlist)
		conn := connectPgx(t, withPassword(poolerConn(p13, appDB, appUser)+" sslmode=require", appPassword))
		if st := tlsState(conn); st == nil || st.Version != tls.VersionTLS13 {
			t.Errorf("tlsv1.3 only: negotiated %v", st)
		}
		cfg := pgxConfig(t, withPassword(poolerConn(p13, appDB, appUser)+" sslmode=require", appPassword))
		cfg.TLSConfig.MaxVersion = tls.VersionTLS12
		if _, err := tryConnectPgx(t, cfg); err == nil {
			t.Errorf("a TLS 1.2 client logged in to a tlsv1.3-only pooler")
		}

		p12 := startPooler(t, iniSettings(tlsSettings(pki, "require", map[string]string{"client_tls_protocols": "tlsv1.2"}), ""), testUserlist)
		conn = connectPgx(t, withPassword(poolerConn(p12, appDB, appUser)+" sslmode=require", appPassword))
		if st := tlsState(conn); st == nil || st.Version != tls.VersionTLS12 {
			t.Errorf("tlsv1.2 only: negotiated %v", st)
		}
	})
	noSecretsInLog(t, p, appPassword)
}

// TestClientCertAuth: auth_type=cert admits a client whose certificate
// (signed by client_tls_ca_file) has CN = its user, with psql (sslcert,
// sslkey) and pgx (TLSConfig.Certificates); a CN for another user, no
// certificate, or one from another CA is refused.
func TestClientCertAuth(t *testing.T) {
	needPG(t)
	pki := newPKI(t, "pooler")
	certFile, keyFile := pki.ClientCert(t, appUser)
	cert := pki.TLSCert(t, certFile, keyFile)
	withCert := func(cfg *pgx.ConnConfig) { cfg.TLSConfig.Certificates = []tls.Certificate{cert} }
	certOpts := " sslcert=" + certFile + " sslkey=" + keyFile

	p := startPooler(t, iniSettings(tlsSettings(pki, "require", map[string]string{"auth_type": "cert"}), ""), testUserlist)
	base := func(user string) string {
		return poolerConn(p, appDB, user) + " sslmode=verify-full sslrootcert=" + pki.CAFile
	}

	// pgx gets the certificate through TLSConfig, psql through sslcert.
	cfg := pgxConfig(t, base(appUser))
	withCert(cfg)
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatalf("pgx with a client certificate: %v", err)
	}
	if got := queryText(t, conn, "SELECT current_user"); got != appUser {
		t.Errorf("pgx: current_user = %q", got)
	}
	out, errOut, err := psql(t, "", "-w", base(appUser)+certOpts, "-tAc", "SELECT current_user")
	if err != nil || strings.TrimSpace(out) != appUser {
		t.Errorf("psql with sslcert: out=%q err=%v stderr=%q", out, err, errOut)
	}

	// The certificate names app, the client claims md5user.
	refused := `certificate authentication failed for user "` + md5User + `"`
	cfg = pgxConfig(t, base(md5User))
	withCert(cfg)
	_, err = tryConnectPgx(t, cfg)
	checkPgError(t, "pgx CN=app as md5user", err, "28000", refused)
	_, errOut, err = psql(t, "", "-w", base(md5User)+certOpts, "-tAc", "SELECT 1")
	if err == nil || !strings.Contains(errOut, "FATAL:  "+refused) {
		t.Errorf("psql CN=app as md5user: err=%v stderr=%q", err, errOut)
	}

	// No certificate at all (a password does not help).
	wantRefused(t, base(appUser), appPassword, "28000", `certificate authentication failed for user "`+appUser+`"`, nil)

	// A certificate with the right CN from a CA the pooler does not trust.
	other := newPKI(t, "other")
	oc, ok := other.ClientCert(t, appUser)
	cfg = pgxConfig(t, base(appUser))
	cfg.TLSConfig.Certificates = []tls.Certificate{other.TLSCert(t, oc, ok)}
	if _, err := tryConnectPgx(t, cfg); err == nil {
		t.Errorf("pgx with a certificate from an unknown CA logged in")
	}

	// verify-ca demands a certificate in the handshake, whatever auth_type.
	pv := startPooler(t, iniSettings(tlsSettings(pki, "verify-ca", nil), ""), testUserlist)
	vconn := poolerConn(pv, appDB, appUser) + " sslmode=verify-full sslrootcert=" + pki.CAFile
	if _, err := tryConnectPgx(t, pgxConfig(t, withPassword(vconn, appPassword))); err == nil {
		t.Errorf("client_tls_sslmode=verify-ca: pgx without a certificate logged in")
	}
	wantLogin(t, vconn+certOpts, appPassword, appUser, withCert)
}

// TestHBATLS: hostssl and hostnossl rules of auth_hba_file, with
// client_tls_sslmode=prefer so both kinds of client can connect.
func TestHBATLS(t *testing.T) {
	needPG(t)
	pki := newPKI(t, "pooler")
	certFile, keyFile := pki.ClientCert(t, appUser)
	cert := pki.TLSCert(t, certFile, keyFile)
	withCert := func(cfg *pgx.ConnConfig) { cfg.TLSConfig.Certificates = []tls.Certificate{cert} }
	hba := writeTemp(t, "hba.conf", strings.Join([]string{
		"hostssl appdb " + appUser + " 127.0.0.1/32 cert",
		"hostnossl appdb " + md5User + " 127.0.0.1/32 md5",
	}, "\n")+"\n")
	p := startPooler(t, iniSettings(tlsSettings(pki, "prefer", map[string]string{"auth_type": "hba", "auth_hba_file": hba}), ""), testUserlist)
	tlsConn := func(user string) string {
		return poolerConn(p, appDB, user) + " sslmode=verify-full sslrootcert=" + pki.CAFile + " sslcert=" + certFile + " sslkey=" + keyFile
	}
	plainConn := func(user string) string { return poolerConn(p, appDB, user) + " sslmode=disable" }

	wantLogin(t, tlsConn(appUser), "", appUser, withCert)
	wantRefused(t, plainConn(appUser), appPassword, "28000", noHBAEntry(appUser, appDB), nil)
	wantLogin(t, plainConn(md5User), md5Password, md5User, nil)
	wantRefused(t, tlsConn(md5User), md5Password, "28000", noHBAEntry(md5User, appDB), withCert)
}

// TestServerTLS: the pooler logs in to a Postgres started with ssl=on
// (whose pg_hba.conf refuses plaintext) with server_tls_sslmode=verify-full
// against the test CA, and pg_stat_ssl shows the server connection is TLS.
// verify-full checks the host name: the same server reached as 127.0.0.2
// (not in the certificate) is refused, though verify-ca accepts it.
func TestServerTLS(t *testing.T) {
	needPG(t)
	pki := newPKI(t, "postgres")
	tc := startTLSCluster(t, pki)

	// Control: the TLS cluster refuses plaintext and serves our certificate.
	_, err := tryConnectPgx(t, pgxConfig(t, tc.directConnString(appDB, appUser, appPassword)))
	if err == nil || !strings.Contains(err.Error(), "pg_hba.conf rejects connection") {
		t.Fatalf("plaintext straight to the TLS cluster: %v, want pg_hba.conf rejects connection", err)
	}
	direct := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=verify-full sslrootcert=%s",
		tc.port, appDB, appUser, appPassword, pki.CAFile)
	selectOne(t, direct)

	extra := fmt.Sprintf("[databases]\ntlsdb = host=127.0.0.1 port=%d dbname=%s\ntlsdb2 = host=127.0.0.2 port=%d dbname=%s\n",
		tc.port, appDB, tc.port, appDB)
	serverTLS := func(mode string) map[string]string {
		return map[string]string{"server_tls_sslmode": mode, "server_tls_ca_file": pki.CAFile, "query_wait_timeout": "3"}
	}
	sslOf := "SELECT coalesce((SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()), 'no row')"

	p := startPooler(t, iniSettings(serverTLS("verify-full"), extra), testUserlist)
	// (query_wait_timeout is 3 s in these poolers: the clients of a
	// server that fails verification wait that long.)
	conn := connectPgx(t, p.ConnString("tlsdb", appUser, appPassword))
	if got := queryText(t, conn, sslOf); got != "true" {
		t.Errorf("pg_stat_ssl.ssl through the pooler = %q, want true", got)
	}
	out, errOut, err := psql(t, appPassword, "-w", p.ConnString("tlsdb", appUser, ""), "-tAc", sslOf)
	if err != nil || strings.TrimSpace(out) != "true" {
		t.Errorf("psql: pg_stat_ssl.ssl through the pooler: out=%q err=%v stderr=%q", out, err, errOut)
	}
	// 127.0.0.2 is not in the certificate. As in PgBouncer, a server whose
	// TLS handshake fails is lost before its login: the client waits for
	// the retries until query_wait_timeout; the certificate error is
	// logged in PgBouncer's words.
	_, err = tryConnectPgx(t, pgxConfig(t, p.ConnString("tlsdb2", appUser, appPassword)))
	if err == nil || !strings.Contains(err.Error(), "query_wait_timeout") {
		t.Errorf("verify-full to 127.0.0.2 (not in the certificate): %v, want query_wait_timeout", err)
	} else if !p.WaitLog("TLS startup failed (TLS handshake error: certificate verify failed: ", 5*time.Second) || !p.WaitLog("certificate is valid for", 5*time.Second) {
		t.Errorf("verify-full to 127.0.0.2: the log does not say why:\n%s", p.Log())
	} else {
		t.Logf("verify-full to 127.0.0.2: %v", err)
	}
	noSecretsInLog(t, p, appPassword)

	pca := startPooler(t, iniSettings(serverTLS("verify-ca"), extra), testUserlist)
	conn = connectPgx(t, pca.ConnString("tlsdb2", appUser, appPassword))
	if got := queryText(t, conn, sslOf); got != "true" {
		t.Errorf("verify-ca via 127.0.0.2: pg_stat_ssl.ssl = %q, want true", got)
	}

	// A CA that did not sign the server's certificate.
	other := newPKI(t, "other")
	pbad := startPooler(t, iniSettings(map[string]string{"server_tls_sslmode": "verify-full", "server_tls_ca_file": other.CAFile, "query_wait_timeout": "3"}, extra), testUserlist)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if c, err := pgx.ConnectConfig(ctx, pgxConfig(t, pbad.ConnString("tlsdb", appUser, appPassword))); err == nil {
		_ = c.Close(ctx)
		t.Errorf("verify-full with the wrong CA: logged in")
	} else if !strings.Contains(err.Error(), "query_wait_timeout") {
		t.Errorf("verify-full with the wrong CA: %v, want query_wait_timeout", err)
	} else if !pbad.WaitLog("certificate verify failed: x509: certificate signed by unknown authority", 5*time.Second) {
		t.Errorf("verify-full with the wrong CA: the log does not say why:\n%s", pbad.Log())
	} else {
		t.Logf("verify-full with the wrong CA: %v", err)
	}
}
