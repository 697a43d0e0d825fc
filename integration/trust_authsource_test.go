//go:build linux

package integration

import (
	"fmt"
	"testing"
)

// TestTrustNeedsAnAuthSource is the Cloudflare fork's quirk 6 decided as
// PgBouncer (issue 18, cause 8): under trust a name only in [users] gives
// limits, never a login, and is refused with PgBouncer's FATAL 08P01
// "\"trust\" authentication failed"; with an auth_user, a role auth_query
// finds is admitted (and its fetched secret logs the pool in), one it does
// not find is told PgBouncer's "no such user".
func TestTrustNeedsAnAuthSource(t *testing.T) {
	needPG(t)
	scenarioRoles(t)
	users := "[users]\n" + scenApp + " = max_user_connections=2\nnobody_anywhere = max_user_connections=2\n"
	userlist := fmt.Sprintf("%q %q\n", scenAuthUser, scenAuthPw)

	p := startPooler(t, iniSettings(map[string]string{"auth_type": "trust"}, users), userlist)
	_, err := tryConnectPgx(t, pgxConfig(t, p.ConnString(appDB, scenApp, "")))
	checkPgError(t, "[users]-only user under trust", err, "08P01", `"trust" authentication failed`)
	wantLogin(t, p.ConnString(appDB, scenAuthUser, ""), "", scenAuthUser, nil)

	pq := startPooler(t, iniSettings(map[string]string{"auth_type": "trust", "auth_user": scenAuthUser}, users), userlist)
	wantLogin(t, pq.ConnString(appDB, scenApp, ""), "", scenApp, nil)
	_, err = tryConnectPgx(t, pgxConfig(t, pq.ConnString(appDB, "nobody_anywhere", "")))
	checkPgError(t, "[users]-only user auth_query does not find", err, "08P01", "no such user")
}
