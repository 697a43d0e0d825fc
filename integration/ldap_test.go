//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/testldap"
)

// TestLDAPAuth: auth_type = ldap and an auth_hba_file ldap rule, against a
// real slapd and Postgres. The user is in no auth_file: LDAP accepts the
// password, and the pooler logs in to Postgres with it (the role's password
// there is the same, as with PgBouncer). A wrong password is PgBouncer's
// "LDAP authentication failed", its reason in the log.
func TestLDAPAuth(t *testing.T) {
	srv := testldap.Start(t)
	const user, password = "ldapuser2", "secret2"
	su := directSuperuser(t, appDB)
	ctx := ctxT(t, 10*time.Second)
	if _, err := su.Exec(ctx, fmt.Sprintf(`DO $$BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN CREATE ROLE %[1]s LOGIN; END IF;
	END$$`, user)); err != nil {
		t.Fatal(err)
	}
	if _, err := su.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", user, password)); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(t.TempDir(), "hba.conf")
	if err := os.WriteFile(hba, []byte(fmt.Sprintf(
		"host all %s 127.0.0.1/32 ldap ldapserver=127.0.0.1 ldapport=%d ldapbasedn=\"dc=example,dc=net\" ldapsearchattribute=uid\n"+
			"host all all 127.0.0.1/32 scram-sha-256\n", user, srv.Port)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(hba), 0o755); err != nil { // the pooler runs as another user
		t.Fatal(err)
	}
	for name, settings := range map[string]map[string]string{
		"auth_type": {"auth_type": "ldap", "auth_ldap_options": fmt.Sprintf(`ldapurl="ldap://127.0.0.1:%d/dc=example,dc=net?uid?sub"`, srv.Port)},
		"hba":       {"auth_type": "hba", "auth_hba_file": hba},
	} {
		t.Run(name, func(t *testing.T) {
			p := startPooler(t, iniSettings(settings, ""), testUserlist)
			conn := connectPgx(t, p.ConnString(appDB, user, password))
			if got := queryText(t, conn, "SELECT current_user"); got != user {
				t.Errorf("current_user = %q", got)
			}
			_ = conn.Close(context.Background())
			_, err := tryConnectPgx(t, pgxConfig(t, p.ConnString(appDB, user, "wrong")))
			wantPgError(t, err, "FATAL", "08P01", "LDAP authentication failed")
			if !p.WaitLog("LDAP login failed for user uid="+user+",dc=example,dc=net", 5*time.Second) {
				t.Errorf("no LDAP reason in the log:\n%s", p.Log())
			}
			if name == "hba" {
				// Other users still go by their own rule.
				selectOne(t, p.App())
			}
		})
	}
}
