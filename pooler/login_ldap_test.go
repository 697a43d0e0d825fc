package pooler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/testldap"
)

// TestLoginLDAPTranscripts: auth_type = hba with ldap rules and auth_type =
// ldap ask for a cleartext password and admit the client when a bind to a
// real slapd as the user succeeds; users need no auth_file entry. A refused
// bind is PgBouncer's "LDAP authentication failed", the reason logged.
func TestLoginLDAPTranscripts(t *testing.T) {
	srv := testldap.Start(t)
	dir := t.TempDir()
	hba := filepath.Join(dir, "hba.conf")
	if err := os.WriteFile(hba, []byte(strings.Join([]string{
		fmt.Sprintf(`host all ldapuser1 127.0.0.1/32 ldap ldapserver=127.0.0.1 ldapport=%d ldapprefix="uid=" ldapsuffix=",dc=example,dc=net"`, srv.Port),
		fmt.Sprintf(`host all all 127.0.0.1/32 ldap ldapserver=127.0.0.1 "ldapport"=%d ldapbasedn="dc=example,dc=net" ,ldapsearchfilter="uid=$username"`, srv.Port),
	}, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	user := func(name, db string) []byte {
		return startupPacket(0, [][2]string{{"user", name}, {"database", db}})
	}
	welcome := "R3 R0 S* K Z(I)"
	failed := "R3 E(FATAL 08P01 LDAP authentication failed)"
	for _, setup := range []struct{ name, settings string }{
		{"hba", "auth_type = hba\nauth_hba_file = " + hba + "\n"},
		{"auth_type", fmt.Sprintf("auth_type = ldap\nauth_ldap_options = ldapurl=\"ldap://127.0.0.1:%d/dc=example,dc=net?uid?sub\"\n", srv.Port)},
	} {
		t.Run(setup.name, func(t *testing.T) {
			fake := startFakePostgres(t)
			tp := startTestPooler(t, fake, map[string]string{"ldb": "", "audb": "auth_user=someone"}, setup.settings)
			defer tp.shutdown(t, fake)
			for _, tc := range []struct {
				name, user, db, password, want, log string
			}{
				{"simpleBind", "ldapuser1", "ldb", "secret1", welcome, ""},
				{"searchBind", "ldapuser2", "ldb", "secret2", welcome, ""},
				{"wrongPassword", "ldapuser1", "ldb", "nope", failed, "LDAP login failed for user uid=ldapuser1,dc=example,dc=net"},
				{"unknownUser", "nobody", "ldb", "x", failed, `LDAP user "nobody" does not exist`},
				{"unknownDB", "ldapuser2", "nope", "secret2", "R3 E(FATAL 08P01 no such database: nope)", ""},
				{"authUserDB", "ldapuser2", "audb", "secret2", "E(FATAL 08P01 bouncer config error)", "LDAP can't be used together with database authentication"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					got, _ := loginTranscriptPassword(t, tp.addr, [][]byte{user(tc.user, tc.db)}, tc.password)
					if got != tc.want {
						t.Errorf("transcript\n got %q\nwant %q", got, tc.want)
					}
					if tc.log != "" && !tp.log.containsRecent(tc.log) {
						t.Errorf("no log line with %q", tc.log)
					}
				})
			}
		})
	}
}

func (l *captureLog) containsRecent(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.recent {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// TestExternalAuthStartupErrors: settings that would refuse every login
// refuse to start instead: auth_type = ldap without (valid)
// auth_ldap_options, auth_type = pam in a build without PAM.
func TestExternalAuthStartupErrors(t *testing.T) {
	cases := map[string]string{
		"auth_type = ldap\n": "auth_type=ldap needs auth_ldap_options",
		"auth_type = ldap\nauth_ldap_options = ldapserver=h\n": `auth_ldap_options: authentication method "ldap" requires argument`,
	}
	if !auth.PAMSupported {
		cases["auth_type = pam\n"] = "-tags pam"
	}
	for settings, want := range cases {
		cfg, err := config.Parse("test.ini", []byte("[databases]\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = 0\n"+settings))
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(cfg, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: New error %v, want %q", settings, err, want)
		}
	}
}

// TestLDAPUserCaps: a user LDAP let in is a user of the pooler, as in
// PgBouncer: listed by SHOW USERS and counted against
// max_user_client_connections (its first login counts once it is in, the
// next ones from the start). A refused one is not listed.
func TestLDAPUserCaps(t *testing.T) {
	srv := testldap.Start(t)
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"ldb": ""}, fmt.Sprintf(
		"auth_type = ldap\nauth_ldap_options = ldapserver=127.0.0.1 ldapport=%d ldapbasedn=\"dc=example,dc=net\"\nmax_user_client_connections = 2\n", srv.Port))
	t.Cleanup(func() { tp.shutdown(t, fake) })
	for i := 1; i <= 2; i++ {
		if got, _ := capLogin(t, tp, "ldapuser1", "ldb", "secret1"); got != "R3 R0 Z" {
			t.Fatalf("login %d: %q", i, got)
		}
	}
	// Known now: refused before the password, as PgBouncer's set_pool.
	if got, _ := capLogin(t, tp, "ldapuser1", "ldb", "secret1"); got != userFull {
		t.Errorf("login 3: %q, want %q", got, userFull)
	}
	if u, ok := userRow(tp, "ldapuser1"); !ok || u.CurrentClientConnections != 2 {
		t.Errorf("SHOW USERS ldapuser1: %+v (listed %v), want current_client_connections 2", u, ok)
	}
	if got, _ := capLogin(t, tp, "ldapuser2", "ldb", "wrong"); got != "R3 E(FATAL 08P01 LDAP authentication failed)" {
		t.Errorf("wrong password: %q", got)
	}
	if _, ok := userRow(tp, "ldapuser2"); ok {
		t.Error("a user LDAP refused is listed by SHOW USERS")
	}
}
