package admin

import (
	"testing"
	"time"
)

// every is Counters with each field n, so that a field left out of Add or
// Sub shows.
func every(n int64) Counters {
	return Counters{n, n, n, n, n, n, n, n, n, n, n, n}
}

func TestCountersAddSub(t *testing.T) {
	if got := every(3).Add(every(4)); got != every(7) {
		t.Errorf("Add: %+v", got)
	}
	if got := every(7).Sub(every(4)); got != every(3) {
		t.Errorf("Sub: %+v", got)
	}
	a := Counters{XactCount: 5, Received: 100, WaitTime: 9}
	if got := a.Add(every(2)).Sub(every(2)); got != a {
		t.Errorf("Add then Sub: %+v; want %+v", got, a)
	}
}

// A period's growth becomes rates per second, and times per transaction,
// query and server assignment, as PgBouncer's averages are.
func TestPeriodAverages(t *testing.T) {
	d := Counters{
		ServerAssignmentCount: 20, XactCount: 10, QueryCount: 40,
		Received: 1000, Sent: 5000,
		XactTime: 10 * 300, QueryTime: 40 * 50, WaitTime: 20 * 7,
		ClientParseCount: 30, ServerParseCount: 10, BindCount: 60, ClientLoginCount: 5,
	}
	want := Counters{
		ServerAssignmentCount: 2, XactCount: 1, QueryCount: 4,
		Received: 100, Sent: 500,
		XactTime: 300, QueryTime: 50, WaitTime: 7,
		ClientParseCount: 3, ServerParseCount: 1, BindCount: 6, ClientLoginCount: 0,
	}
	if got := d.PeriodAverages(10 * time.Second); got != want {
		t.Errorf("over 10 s: %+v; want %+v", got, want)
	}
	// Under a second counts as one; nothing done divides by nothing.
	if got := (Counters{XactCount: 3}).PeriodAverages(100 * time.Millisecond); got != (Counters{XactCount: 3}) {
		t.Errorf("over 100 ms: %+v", got)
	}
	if got := (Counters{}).PeriodAverages(time.Minute); got != (Counters{}) {
		t.Errorf("an idle period: %+v", got)
	}
}

func TestStatsLine(t *testing.T) {
	a := Counters{XactCount: 1, QueryCount: 2, ClientParseCount: 3, ServerParseCount: 4, BindCount: 5,
		Received: 6, Sent: 7, XactTime: 8, QueryTime: 9, WaitTime: 10}
	want := "stats: 1 xacts/s, 2 queries/s, 3 client parses/s, 4 server parses/s, 5 binds/s, in 6 B/s, out 7 B/s, xact 8 us, query 9 us, wait 10 us"
	if got := a.StatsLine(); got != want {
		t.Errorf("%q\nwant %q", got, want)
	}
}
