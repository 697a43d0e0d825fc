package pooler

import (
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
	d := t.Sub(ps.prev)
	ps.avg = d.PeriodAverages(period)
	ps.prev = t
	return d
}

func (ps *poolStats) averages() admin.Counters {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.avg
}
