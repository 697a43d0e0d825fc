//go:build linux

package integration

import (
	"context"
	"strings"
	"testing"
)

// TestHarnessPostgres checks the fixture itself, without the pooler: every
// role logs in over TCP with its password (SCRAM for app and bench, md5 for
// md5user), a wrong password is refused with 28P01, and the helpers that
// count backends see exactly the connections we open.
func TestHarnessPostgres(t *testing.T) {
	c := needPG(t)

	for _, tc := range []struct{ db, user, password, method string }{
		{appDB, appUser, appPassword, "SCRAM-SHA-256"},
		{otherDB, appUser, appPassword, "SCRAM-SHA-256"},
		{appDB, md5User, md5Password, "md5"},
		{benchDB, benchUser, benchPass, "SCRAM-SHA-256"},
	} {
		conn := connectPgx(t, c.directConnString(tc.db, tc.user, tc.password))
		if got := queryText(t, conn, "SELECT current_user || '@' || current_database()"); got != tc.user+"@"+tc.db {
			t.Errorf("logged in as %s, want %s@%s", got, tc.user, tc.db)
		}
		_ = conn.Close(context.Background())
		_, err := tryConnectPgx(t, pgxConfig(t, c.directConnString(tc.db, tc.user, "wrong")))
		wantPgError(t, err, "FATAL", "28P01", `password authentication failed for user "`+tc.user+`"`)
	}

	su := directSuperuser(t, "postgres")
	if enc := queryText(t, su, "SELECT substr(rolpassword, 1, 3) FROM pg_authid WHERE rolname = $1", md5User); enc != "md5" {
		t.Errorf("md5user password stored as %q..., want md5", enc)
	}

	waitNoBackends(t, otherDB, appUser)
	conns := []string{}
	for i := 0; i < 3; i++ {
		conn := connectPgx(t, c.directConnString(otherDB, appUser, appPassword))
		conns = append(conns, queryText(t, conn, "SELECT pg_backend_pid()::text"))
	}
	if n := countBackends(t, otherDB, appUser); n != 3 {
		t.Errorf("countBackends(otherdb, app) = %d with 3 direct conns (%v), want 3", n, conns)
	}

	out, errOut, err := psql(t, appPassword, c.directConnString(appDB, appUser, appPassword), "-tAc", "SELECT 40 + 2")
	if err != nil || strings.TrimSpace(out) != "42" {
		t.Errorf("psql direct: out=%q err=%v stderr=%s", out, err, errOut)
	}
}
