//go:build linux

package integration

import (
	"fmt"
	"testing"
	"time"
)

// TestReloadWarmsNewDatabase: a [databases] entry with a forced user and
// min_pool_size added by RELOAD is warmed as at start (TestWarm), with no
// client: Postgres has min_pool_size backends of it shortly after RELOAD.
func TestReloadWarmsNewDatabase(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	admin := adminConsole(t, p)
	p.WriteConfig(iniSettings(withConsoleUsers(nil), fmt.Sprintf("[databases]\nrwarm = host=127.0.0.1 port=@PGPORT@ dbname=%s user=%s min_pool_size=2 pool_size=5\n", otherDB, appUser)), opsUserlist)
	if tag := adminExec(t, admin, "RELOAD"); tag != "RELOAD" {
		t.Fatalf("RELOAD tag %q", tag)
	}
	waitPool(t, admin, "rwarm", appUser, 10*time.Second, "warmed to min_pool_size after RELOAD", func(r map[string]string) bool {
		return num(t, r, "sv_idle") == 2
	})
	waitBackends(t, otherDB, appUser, 10*time.Second, "2", func(n int) bool { return n == 2 })
	selectOne(t, p.ConnString("rwarm", appUser, appPassword))
}
