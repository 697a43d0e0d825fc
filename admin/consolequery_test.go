package admin

import "testing"

// Every query the console runs is counted (ConsoleQuery), the failing and
// the unknown ones too, as PgBouncer counts each in its pgbouncer pool's
// stats before it looks at it.
func TestConsoleQueriesCounted(t *testing.T) {
	con := newFake()
	run(t, con, RoleAdmin, "SHOW VERSION", "SHOW NO_SUCH_THING", "PAUSE")
	if con.queries != 3 {
		t.Fatalf("ConsoleQuery called %d times for 3 queries", con.queries)
	}
}
