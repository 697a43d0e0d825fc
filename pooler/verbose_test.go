package pooler

import (
	"context"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/admin"
)

// optionsClient logs in to database db of tp with the options startup
// parameter and returns a function that runs one simple query.
func optionsClient(t *testing.T, tp *testPooler, db, options string) func(q string) {
	t.Helper()
	_, query := queryClient(t, tp, [][2]string{{"user", "u"}, {"database", db}, {"options", options}})
	return query
}

// A client's DateStyle is SET on its server once, in PgBouncer's form
// and logged as PgBouncer does at verbose=1 (its suite's
// test_equivalent_startup_param); the canonical form Postgres reports
// back ("German, DMY") becomes the client's, so the next transaction on
// the same server needs no SET.
func TestParamSyncCanonicalAndDebugLog(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"tx": "pool_mode=transaction"}, "verbose = 1\n")
	t.Cleanup(func() {
		tp.svc.Shutdown(context.Background(), admin.ShutdownImmediate)
		tp.stop()
		fake.Close()
	})
	query := optionsClient(t, tp, "tx", "-c DateStyle=German")
	fake.take()
	query("SELECT 1")
	query("SELECT 1")
	sets := 0
	for _, m := range fake.take() {
		if m.typ == 'Q' && strings.Contains(string(m.body), "SET DateStyle") {
			sets++
			if got := strings.TrimRight(string(m.body), "\x00"); got != "SET DateStyle='German';" {
				t.Errorf("the pooler sent %q, want PgBouncer's form SET DateStyle='German';", got)
			}
		}
	}
	if sets != 1 {
		t.Errorf("DateStyle was SET %d times for two transactions, want 1", sets)
	}
	log := tp.log.tail()
	for _, want := range []string{
		"varcache_apply: SET DateStyle='German';",
		"varcache_set_canonical: setting DateStyle to its canonical version German -> German, DMY",
		"got var from options: DateStyle=German",
	} {
		if n := strings.Count(log, want); n != 1 {
			t.Errorf("%d log lines %q, want 1:\n%s", n, want, log)
		}
	}
}

// At verbose=0 nothing is logged below LOG.
func TestNoDebugLinesByDefault(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"tx": "pool_mode=transaction"}, "")
	t.Cleanup(func() {
		tp.svc.Shutdown(context.Background(), admin.ShutdownImmediate)
		tp.stop()
		fake.Close()
	})
	query := optionsClient(t, tp, "tx", "-c DateStyle=German")
	query("SELECT 1")
	if log := tp.log.tail(); strings.Contains(log, "DEBUG") || strings.Contains(log, "varcache") {
		t.Errorf("debug lines at verbose=0:\n%s", log)
	}
}
