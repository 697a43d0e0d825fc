package pooler

import (
	"context"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/admin"
)

// A database served from "*" is logged once, when its first client
// arrives, in PgBouncer's words; a listed database never is.
func TestAutoDatabaseLogged(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"*": "pool_mode=session", "sd": "pool_mode=session"}, "")
	t.Cleanup(func() {
		tp.svc.Shutdown(context.Background(), admin.ShutdownImmediate)
		tp.stop()
		fake.Close()
	})
	sessionClient(t, tp, "p7")
	sessionClient(t, tp, "p7")
	sessionClient(t, tp, "sd")
	log := tp.log.tail()
	if n := strings.Count(log, "registered new auto-database: p7"); n != 1 {
		t.Errorf("%d lines register p7, want 1:\n%s", n, log)
	}
	if strings.Contains(log, "registered new auto-database: sd") {
		t.Errorf("the listed database sd was registered as an auto-database:\n%s", log)
	}
}
