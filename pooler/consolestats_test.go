package pooler

import (
	"testing"
)

// The console's queries count in SHOW STATS as the pgbouncer database's
// transactions and queries, one each, so SHOW TOTALS adds them to the
// pools' as PgBouncer's does (its suite's test_show_stats).
func TestConsoleQueriesInStats(t *testing.T) {
	svc := newTestService(t)
	con := svc.Console()
	con.ConsoleQuery()
	con.ConsoleQuery()
	var found bool
	for _, st := range con.Stats() {
		if st.Database != adminDB {
			continue
		}
		found = true
		if st.Total.XactCount != 2 || st.Total.QueryCount != 2 {
			t.Errorf("pgbouncer: %d transactions, %d queries; want 2 and 2", st.Total.XactCount, st.Total.QueryCount)
		}
	}
	if !found {
		t.Fatalf("SHOW STATS has no %s row: %+v", adminDB, con.Stats())
	}
}
