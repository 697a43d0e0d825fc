//go:build linux

package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAuthQueryServerRefused: when Postgres refuses the auth_user's own
// login (here the client's database, reached through the auto-database,
// does not exist in Postgres), the client is told Postgres's words, as
// PgBouncer fails the logins waiting for that pool with the server's
// error, and the log has PgBouncer's lines for both ends.
func TestAuthQueryServerRefused(t *testing.T) {
	needPG(t)
	scenarioRoles(t)
	const db = "no_such_pg_db"
	p := startPooler(t, iniSettings(map[string]string{
		"auth_type": "md5",
		"auth_user": scenAuthUser,
	}, ""), fmt.Sprintf("%q %q\n", scenAuthUser, scenAuthPw))
	msg := fmt.Sprintf("database %q does not exist", db)
	// One client only: the next one, within server_login_retry, gets the
	// pool's cached error, as with PgBouncer.
	_, err := tryConnectPgx(t, pgxConfig(t, p.ConnString(db, scenOther, scenOtherPw)))
	checkPgError(t, "auth_query in a database Postgres does not have", err, "3D000", msg)
	// The client may read its error before the pooler's lines are
	// written: wait for them.
	for _, line := range []string{"server login failed: FATAL " + msg, "closing because: " + msg + " (age="} {
		waitFor(t, 5*time.Second, "log line "+strconv.Quote(line), func() bool { return strings.Contains(p.Log(), line) })
	}
}
