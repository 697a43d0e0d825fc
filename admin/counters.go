package admin

import (
	"fmt"
	"time"
)

// The arithmetic of the pooler's statistics on Counters: a pool's totals
// are running sums, its averages are the growth over one stats_period,
// and a database's SHOW STATS row adds up its pools'.

// Add is a + b, field by field: two pools' totals, or their averages.
func (a Counters) Add(b Counters) Counters {
	return Counters{
		ServerAssignmentCount: a.ServerAssignmentCount + b.ServerAssignmentCount,
		XactCount:             a.XactCount + b.XactCount,
		QueryCount:            a.QueryCount + b.QueryCount,
		Received:              a.Received + b.Received,
		Sent:                  a.Sent + b.Sent,
		XactTime:              a.XactTime + b.XactTime,
		QueryTime:             a.QueryTime + b.QueryTime,
		WaitTime:              a.WaitTime + b.WaitTime,
		ClientParseCount:      a.ClientParseCount + b.ClientParseCount,
		ServerParseCount:      a.ServerParseCount + b.ServerParseCount,
		BindCount:             a.BindCount + b.BindCount,
		ClientLoginCount:      a.ClientLoginCount + b.ClientLoginCount,
	}
}

// Sub is a − b, field by field: how much the totals a grew since the
// totals b were taken.
func (a Counters) Sub(b Counters) Counters {
	return Counters{
		ServerAssignmentCount: a.ServerAssignmentCount - b.ServerAssignmentCount,
		XactCount:             a.XactCount - b.XactCount,
		QueryCount:            a.QueryCount - b.QueryCount,
		Received:              a.Received - b.Received,
		Sent:                  a.Sent - b.Sent,
		XactTime:              a.XactTime - b.XactTime,
		QueryTime:             a.QueryTime - b.QueryTime,
		WaitTime:              a.WaitTime - b.WaitTime,
		ClientParseCount:      a.ClientParseCount - b.ClientParseCount,
		ServerParseCount:      a.ServerParseCount - b.ServerParseCount,
		BindCount:             a.BindCount - b.BindCount,
		ClientLoginCount:      a.ClientLoginCount - b.ClientLoginCount,
	}
}

// PeriodAverages turns d, a stats_period's growth of the counters, into
// PgBouncer's averages: counts and bytes per second (a period under a
// second counts as one), transaction and query times per transaction and
// query, the wait per server assignment.
func (d Counters) PeriodAverages(period time.Duration) Counters {
	secs := int64(period / time.Second)
	if secs < 1 {
		secs = 1
	}
	avg := Counters{
		ServerAssignmentCount: d.ServerAssignmentCount / secs,
		XactCount:             d.XactCount / secs,
		QueryCount:            d.QueryCount / secs,
		Received:              d.Received / secs,
		Sent:                  d.Sent / secs,
		ClientParseCount:      d.ClientParseCount / secs,
		ServerParseCount:      d.ServerParseCount / secs,
		BindCount:             d.BindCount / secs,
		ClientLoginCount:      d.ClientLoginCount / secs,
	}
	if d.XactCount > 0 {
		avg.XactTime = d.XactTime / d.XactCount
	}
	if d.QueryCount > 0 {
		avg.QueryTime = d.QueryTime / d.QueryCount
	}
	if d.ServerAssignmentCount > 0 {
		avg.WaitTime = d.WaitTime / d.ServerAssignmentCount
	}
	return avg
}

// StatsLine is PgBouncer's periodic log line (log_stats) of a, the
// averages of all pools over the last stats_period.
func (a Counters) StatsLine() string {
	return fmt.Sprintf("stats: %d xacts/s, %d queries/s, %d client parses/s, %d server parses/s, %d binds/s, in %d B/s, out %d B/s, xact %d us, query %d us, wait %d us",
		a.XactCount, a.QueryCount, a.ClientParseCount, a.ServerParseCount, a.BindCount,
		a.Received, a.Sent, a.XactTime, a.QueryTime, a.WaitTime)
}
