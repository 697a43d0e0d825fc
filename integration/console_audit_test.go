//go:build linux

package integration

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Each console command that changes something is logged with who issued
// it, in PgBouncer's words where PgBouncer logs the command ("PAUSE
// 'appdb' command issued"), at LOG with the console client's prefix.
func TestConsoleAuditLines(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	admin := adminConsole(t, p)
	stats := consoleAs(t, p, statsUser, statsPass, nil)
	adminExecErr(t, stats, "PAUSE", "08P01", "admin access needed") // refused: not logged
	for _, q := range []string{
		"PAUSE appdb", "RESUME appdb", "PAUSE", "RESUME", "RELOAD",
		"KILL otherdb", "RESUME otherdb", "RECONNECT appdb", "WAIT_CLOSE appdb",
		"SET default_pool_size = 7", "SET USER app = 'pool_size=5'",
		"SET POOL app.appdb = 'pool_size=4'",
	} {
		adminExec(t, admin, q)
	}
	adminExecErr(t, admin, "KILL_CLIENT 999999", "08P01", "")
	p.WaitLog("KILL_CLIENT 999999 command issued", 5*time.Second) // the log is read from a pipe
	prefix := `LOG C-\d+: pgbouncer/admin@127\.0\.0\.1:\d+ `
	for _, line := range []string{
		"PAUSE 'appdb' command issued", "RESUME 'appdb' command issued",
		"PAUSE command issued", "RESUME command issued", "RELOAD command issued",
		"KILL 'otherdb' command issued", "RESUME 'otherdb' command issued",
		"RECONNECT 'appdb' command issued", "WAIT_CLOSE 'appdb' command issued",
		"SET default_pool_size=7 command issued",
		"SET USER app='pool_size=5' command issued",
		"SET POOL app.appdb='pool_size=4' command issued",
		"KILL_CLIENT 999999 command issued",
	} {
		re := regexp.MustCompile(prefix + regexp.QuoteMeta(line))
		if !re.MatchString(p.Log()) {
			t.Errorf("no line %q with the console's prefix in the log:\n%s", line, p.Log())
		}
	}
	if regexp.MustCompile(`pgbouncer/stats@\S+ PAUSE`).MatchString(p.Log()) {
		t.Errorf("a command refused to a stats user was logged:\n%s", p.Log())
	}
	adminExec(t, admin, "SHUTDOWN WAIT_FOR_CLIENTS")
	if !p.WaitLog("SHUTDOWN WAIT_FOR_CLIENTS command issued", 5*time.Second) {
		t.Errorf("no SHUTDOWN line:\n%s", p.Log())
	}
}

// SET USER and SET POOL keep their by-name semantics, but a user or a
// database not known now is answered with a NOTICE; a SET POOL name
// given database first (as SHOW POOLS prints it) gets a hint.
func TestConsoleSetOverrideUnknownNames(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	var mu sync.Mutex
	var got []*pgconn.Notice
	admin := consoleAs(t, p, adminUser, adminPass, func(n *pgconn.Notice) {
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
	})
	notices := func(q string) []*pgconn.Notice {
		mu.Lock()
		got = nil
		mu.Unlock()
		if tag := adminExec(t, admin, q); !strings.HasPrefix(tag, "SET ") {
			t.Errorf("%s: tag %q", q, tag)
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]*pgconn.Notice(nil), got...)
	}
	// Known names: no NOTICE.
	for _, q := range []string{"SET USER app = 'pool_size=5'", "SET POOL app.appdb = 'pool_size=4'"} {
		if ns := notices(q); len(ns) != 0 {
			t.Errorf("%s: NOTICEs %v", q, ns)
		}
	}
	ns := notices("SET USER nosuch = 'pool_size=5'")
	if len(ns) != 1 || ns[0].Severity != "NOTICE" || ns[0].Code != "00000" || ns[0].Message != "no such user: nosuch" {
		t.Errorf("SET USER nosuch: NOTICEs %+v", ns)
	}
	ns = notices("SET POOL appdb.app = 'pool_size=4'")
	if len(ns) != 2 || ns[0].Message != "no such user: appdb" || ns[1].Message != "no such database: app" ||
		ns[1].Hint != "SET POOL takes user.database: did you mean SET POOL app.appdb?" {
		for _, n := range ns {
			t.Logf("NOTICE %q hint %q", n.Message, n.Hint)
		}
		t.Errorf("SET POOL appdb.app: want NOTICEs for user appdb and database app with a hint, got %d", len(ns))
	}
	// Kept by name: SHOW USERS lists nosuch with its pool_size.
	if r := show(t, admin, "SHOW USERS").one(t, "name", "nosuch"); strings.TrimSpace(r["pool_size"]) != "5" {
		t.Errorf("SHOW USERS nosuch: %v", r)
	}
}
