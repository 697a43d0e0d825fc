//go:build linux

package integration

import (
	"fmt"
	"testing"
	"time"
)

// TestReloadRetargetsPools: RELOAD of a [databases] entry whose dbname
// changed sends the pool's next transactions to the new target, for a pool
// of the client's user and for a forced-user pool, while the clients stay
// connected; a transaction open at the RELOAD finishes on its old server;
// the old target's servers close with PgBouncer's reason.
func TestReloadRetargetsPools(t *testing.T) {
	ini := func(dbname string) string {
		return iniSettings(withConsoleUsers(nil), fmt.Sprintf(
			"[databases]\nrt = host=127.0.0.1 port=@PGPORT@ dbname=%s\nrtf = host=127.0.0.1 port=@PGPORT@ dbname=%s user=%s\n",
			dbname, dbname, appUser))
	}
	p := startPooler(t, ini(appDB), opsUserlist)
	admin := adminConsole(t, p)

	idle := connectPgx(t, p.ConnString("rt", appUser, appPassword))
	forced := connectPgx(t, p.ConnString("rtf", appUser, appPassword))
	inTx := connectPgx(t, p.ConnString("rt", appUser, appPassword))
	if got := queryText(t, idle, "SELECT current_database()"); got != appDB {
		t.Fatalf("rt before RELOAD: %s, want %s", got, appDB)
	}
	if got := queryText(t, forced, "SELECT current_database()"); got != appDB {
		t.Fatalf("rtf before RELOAD: %s, want %s", got, appDB)
	}
	if _, err := inTx.Exec(ctxT(t, 10*time.Second), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	oldPID := queryInt(t, inTx, "SELECT pg_backend_pid()")

	p.WriteConfig(ini(otherDB), opsUserlist)
	reloaded := time.Now()
	if tag := adminExec(t, admin, "RELOAD"); tag != "RELOAD" {
		t.Fatalf("RELOAD tag %q", tag)
	}
	// The first transaction after RELOAD already runs on the new target:
	// the idle servers of the old one closed during RELOAD.
	if got := queryText(t, idle, "SELECT current_database()"); got != otherDB {
		t.Fatalf("rt after RELOAD: %s, want %s", got, otherDB)
	}
	t.Logf("first transaction on the new target %v after RELOAD was sent", time.Since(reloaded))
	if got := queryText(t, forced, "SELECT current_database()"); got != otherDB {
		t.Fatalf("rtf (forced user) after RELOAD: %s, want %s", got, otherDB)
	}
	// The open transaction keeps its server (and database) to its end.
	if got := queryText(t, inTx, "SELECT current_database()"); got != appDB {
		t.Errorf("open transaction after RELOAD: %s, want %s (its own server)", got, appDB)
	}
	if pid := queryInt(t, inTx, "SELECT pg_backend_pid()"); pid != oldPID {
		t.Errorf("open transaction moved from backend %d to %d", oldPID, pid)
	}
	if _, err := inTx.Exec(ctxT(t, 10*time.Second), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if got := queryText(t, inTx, "SELECT current_database()"); got != otherDB {
		t.Errorf("after its COMMIT: %s, want %s", got, otherDB)
	}
	// The old target's servers are gone from Postgres, with PgBouncer's
	// reason in the log.
	waitBackends(t, appDB, appUser, 10*time.Second, "backends of the old target", func(n int) bool { return n == 0 })
	if !p.WaitLog("closing because: database configuration changed", 5*time.Second) {
		t.Errorf("no server closed with \"database configuration changed\":\n%s", p.Log())
	}
}
