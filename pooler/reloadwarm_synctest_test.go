package pooler

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
)

// A database with a forced user and min_pool_size added by RELOAD is
// warmed as at start, with no client: its pool is created and filled to
// min_pool_size (PgBouncer's maintenance creates such pools).
func TestTimingReloadWarmsNewForcedPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "")
		// The rig's file, plus the new database.
		ini := strings.Replace(timingIni(""), "[databases]\n",
			"[databases]\nwarm = host=fake.invalid port=5432 dbname=fake user=forced min_pool_size=2\n", 1)
		cfg, err := config.Parse("timing.ini", []byte(ini))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.svc.Apply(cfg, true); err != nil {
			t.Fatal(err)
		}
		r.sleepUntil(3 * janitorPeriod)
		var got admin.Pool
		for _, p := range r.svc.Console().Pools() {
			if p.Database == "warm" && p.User == "forced" {
				got = p
			}
		}
		if got.SvIdle != 2 {
			t.Errorf("pool warm/forced after RELOAD: %+v; want 2 idle servers", got)
		}
		if n := r.pg.logins(); n != 2 {
			t.Errorf("%d server logins; want 2", n)
		}
		time.Sleep(time.Second) // no more than min_pool_size
		if n := r.pg.logins(); n != 2 {
			t.Errorf("%d server logins a second later; want 2", n)
		}
	})
}
