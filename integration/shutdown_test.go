//go:build linux

package integration

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestKillWithoutDatabaseSparesConsole: KILL with no argument kills the
// clients of real databases; the console sessions, the one that sent it
// among them, stay connected and usable.
func TestKillWithoutDatabaseSparesConsole(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	ctx := ctxT(t, 30*time.Second)
	app := connectPgx(t, p.App())
	queryInt(t, app, "SELECT 1")
	other := adminConsole(t, p)
	console := adminConsole(t, p)

	adminExec(t, console, "KILL")

	if _, err := app.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("the application client was not killed")
	}
	for i, c := range []*pgx.Conn{console, other} {
		res, err := tryShow(c, "SHOW CLIENTS")
		if err != nil {
			t.Fatalf("console session %d after KILL: %v", i, err)
		}
		for _, r := range res.rows {
			if r["database"] != "pgbouncer" {
				t.Errorf("SHOW CLIENTS after KILL still lists %v", r)
			}
		}
		if len(res.rows) != 2 {
			t.Errorf("SHOW CLIENTS after KILL: %d rows, want the 2 console sessions", len(res.rows))
		}
	}
	adminExec(t, console, "RESUME")
}
