//go:build linux

package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestClientCaps: max_db_client_connections and max_user_client_connections
// (PgBouncer 1.25) against real Postgres. A database's own cap and a
// [users] cap refuse the client over them with PgBouncer's FATAL 08P01
// while those within keep working; SHOW DATABASES and SHOW USERS show the
// caps and the counts; SET of the global cap applies to the next login,
// and a RELOAD with a new [users] line lets the user in again. The admin
// console counts in its own database, where the admin is exempt.
func TestClientCaps(t *testing.T) {
	needPG(t)
	ini := func(aliceCap int) string {
		return iniSettings(withConsoleUsers(nil), fmt.Sprintf(
			"[databases]\ncapdb = host=127.0.0.1 port=@PGPORT@ dbname=%s max_db_client_connections=2\n\n[users]\n%s = max_user_client_connections=%d\n",
			appDB, aliceUser, aliceCap))
	}
	p := startPooler(t, ini(1), opsUserlist)

	capdb := p.ConnString("capdb", appUser, appPassword)
	c1, c2 := connectPgx(t, capdb), connectPgx(t, capdb)
	_, err := tryConnectPgx(t, pgxConfig(t, capdb))
	wantPgError(t, err, "FATAL", "08P01", "client connections exceeded (max_db_client_connections)")
	// Those within the cap are served (by Postgres, through the pool).
	for i, c := range []*pgx.Conn{c1, c2} {
		if n := queryInt(t, c, "SELECT $1::int + 1", i); n != int64(i+1) {
			t.Fatalf("client %d within the cap: %d", i, n)
		}
	}

	// alice's own cap counts her clients across databases.
	alice := connectPgx(t, p.ConnString(appDB, aliceUser, alicePass))
	if got := queryText(t, alice, "SELECT current_user"); got != aliceUser {
		t.Fatalf("alice is %q on Postgres", got)
	}
	_, err = tryConnectPgx(t, pgxConfig(t, p.ConnString(otherDB, aliceUser, alicePass)))
	wantPgError(t, err, "FATAL", "08P01", "client connections exceeded (max_user_client_connections)")

	admin := adminConsole(t, p)
	dbs := show(t, admin, "SHOW DATABASES")
	wantCols(t, "SHOW DATABASES capdb", dbs.one(t, "name", "capdb"),
		"max_client_connections", 2, "current_client_connections", 2)
	wantCols(t, "SHOW DATABASES appdb", dbs.one(t, "name", appDB),
		"max_client_connections", 0, "current_client_connections", 1)
	users := show(t, admin, "SHOW USERS")
	wantCols(t, "SHOW USERS alice", users.one(t, "name", aliceUser),
		"max_user_client_connections", 1, "current_client_connections", 1)

	// The global cap, set on the console, applies to the next login;
	// the console itself counts in pgbouncer, where its admin is exempt.
	if _, err := admin.Exec(ctxT(t, 10*time.Second), "SET max_db_client_connections = 1"); err != nil {
		t.Fatal(err)
	}
	_, err = tryConnectPgx(t, pgxConfig(t, p.App()))
	wantPgError(t, err, "FATAL", "08P01", "client connections exceeded (max_db_client_connections)")
	_ = consoleAs(t, p, adminUser, adminPass, nil)
	_, err = tryConnectPgx(t, pgxConfig(t, p.ConnString("pgbouncer", statsUser, statsPass)))
	wantPgError(t, err, "FATAL", "08P01", "client connections exceeded (max_db_client_connections)")
	wantCols(t, "SHOW DATABASES pgbouncer", show(t, admin, "SHOW DATABASES").one(t, "name", "pgbouncer"),
		"max_client_connections", 1, "current_client_connections", 2)

	// A RELOAD of a file that raises alice's cap (and has no global one)
	// lets her second client in.
	p.WriteConfig(ini(2), opsUserlist)
	p.Reload()
	alice2 := connectPgx(t, p.ConnString(otherDB, aliceUser, alicePass))
	if got := queryText(t, alice2, "SELECT current_database()"); got != otherDB {
		t.Fatalf("alice's second client is on %q", got)
	}
	wantCols(t, "SHOW USERS alice after RELOAD", show(t, admin, "SHOW USERS").one(t, "name", aliceUser),
		"max_user_client_connections", 2, "current_client_connections", 2)
}
