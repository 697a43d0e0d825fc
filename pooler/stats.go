package pooler

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
)

// poolStats are one pool's counters for SHOW STATS and /metrics. The hot
// path adds to them once per query or batch, not per message.
//
// A transaction may run on another pool than the client's own (the
// router's linkTo: link.pool is not c.pool). Its statistics count where
// PgBouncer counts a transaction's, in the pool whose server ran it
// (link.pool, which is srv.pool): serverAssignments and waitTime (the
// checkout, and the wait in that pool's queue and at its admission gate),
// xacts, queries and their times, received (the client's bytes forwarded
// to the server) and sent (the server's replies relayed), serverParses
// and binds (a statement prepared on, and bound by, that server), and the
// admission decisions and drain outcomes. What is the client's counts in
// its own pool (c.pool): logins and clientParses (a statement name the
// client registers, which may reach no server), as its SHOW POOLS client
// counts and SHOW CLIENTS row do.
type poolStats struct {
	serverAssignments, xacts, queries atomic.Int64
	received, sent                    atomic.Int64
	xactTime, queryTime, waitTime     atomic.Int64 // microseconds
	clientParses, serverParses, binds atomic.Int64
	logins                            atomic.Int64

	mu   sync.Mutex
	prev admin.Counters // totals at the start of the current stats_period
	avg  admin.Counters // per-second averages over the last stats_period
}

func (ps *poolStats) totals() admin.Counters {
	return admin.Counters{
		ServerAssignmentCount: ps.serverAssignments.Load(),
		XactCount:             ps.xacts.Load(),
		QueryCount:            ps.queries.Load(),
		Received:              ps.received.Load(),
		Sent:                  ps.sent.Load(),
		XactTime:              ps.xactTime.Load(),
		QueryTime:             ps.queryTime.Load(),
		WaitTime:              ps.waitTime.Load(),
		ClientParseCount:      ps.clientParses.Load(),
		ServerParseCount:      ps.serverParses.Load(),
		BindCount:             ps.binds.Load(),
		ClientLoginCount:      ps.logins.Load(),
	}
}

// rollPeriod closes a stats_period: averages become the per-second rates
// over it (times: per transaction or query, as PgBouncer reports them). It
// returns the period's growth of the totals, for the stats log line.
func (ps *poolStats) rollPeriod(period time.Duration) admin.Counters {
	t := ps.totals()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	d := subCounters(t, ps.prev)
	ps.avg = periodAverages(d, period)
	ps.prev = t
	return d
}

// periodAverages turns a stats_period's growth of the counters into
// PgBouncer's averages: counts and bytes per second, transaction and
// query times per transaction and query, the wait per server assignment.
func periodAverages(d admin.Counters, period time.Duration) admin.Counters {
	secs := int64(period / time.Second)
	if secs < 1 {
		secs = 1
	}
	avg := admin.Counters{
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

// statsLine is PgBouncer's periodic log line (log_stats): the averages of
// all pools over the last stats_period.
func statsLine(a admin.Counters) string {
	return fmt.Sprintf("stats: %d xacts/s, %d queries/s, %d client parses/s, %d server parses/s, %d binds/s, in %d B/s, out %d B/s, xact %d us, query %d us, wait %d us",
		a.XactCount, a.QueryCount, a.ClientParseCount, a.ServerParseCount, a.BindCount,
		a.Received, a.Sent, a.XactTime, a.QueryTime, a.WaitTime)
}

func (ps *poolStats) averages() admin.Counters {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.avg
}

func subCounters(a, b admin.Counters) admin.Counters {
	return admin.Counters{
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

func addCounters(a, b admin.Counters) admin.Counters {
	return admin.Counters{
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
