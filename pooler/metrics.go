package pooler

import (
	"bytes"
	"fmt"
	"io"
	runtimemetrics "runtime/metrics"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"
	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/metricdoc"
)

// Prometheus metrics. Per-pool histograms and the event counters live in
// the service's metrics.Set, created with the pool (never looked up on the
// hot path), so that every pool has all its series, at zero, from its
// creation; gauges and the traffic counters are written at scrape time
// from the same snapshots SHOW POOLS and SHOW STATS print, so the two
// always agree. Every series of a pool is labelled {database,user}; every
// family gets its HELP text from internal/metricdoc.

// latencyBuckets are the upper bounds of the latency histograms, in
// seconds: from 50 µs, so that the sub-millisecond queries and waits of a
// healthy pool are told apart, up to a minute.
var latencyBuckets = []float64{
	50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3,
	1, 2.5, 5, 10, 30, 60,
}

// poolMetrics are the per-pool instruments.
type poolMetrics struct {
	set    *metrics.Set
	labels string // database="…",user="…"

	queryDuration *metrics.PrometheusHistogram
	waitDuration  *metrics.PrometheusHistogram
	// connectWait sums the time the pool's growth waited for a create
	// token (server_connect_rate).
	connectWait *metrics.FloatCounter

	connects, connectAttempts, loginFailures *metrics.Counter
	closeDeferred, drainRollbacks            *metrics.Counter
}

// Event counters whose label values are known in advance: each pool has
// their series from its creation. (Server closes are counted by reason,
// a free text, so a reason's series starts with its first close.)
var (
	drainOutcomes      = []string{"drained", "cancelled", "closed"}
	drainCancelResults = []string{"sent", "no_slot", "failed"}
)

func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func (s *Service) newPoolMetrics(db, user string) poolMetrics {
	m := poolMetrics{set: s.metrics, labels: fmt.Sprintf(`database="%s",user="%s"`, labelValue(db), labelValue(user))}
	l := "{" + m.labels + "}"
	m.queryDuration = s.metrics.GetOrCreatePrometheusHistogramExt("pgturnstile_query_duration_seconds"+l, latencyBuckets)
	m.waitDuration = s.metrics.GetOrCreatePrometheusHistogramExt("pgturnstile_wait_duration_seconds"+l, latencyBuckets)
	m.connectWait = s.metrics.GetOrCreateFloatCounter("pgturnstile_server_connect_wait_seconds_total" + l)
	m.connects = s.metrics.GetOrCreateCounter("pgturnstile_server_connects_total" + l)
	m.connectAttempts = s.metrics.GetOrCreateCounter("pgturnstile_server_connect_attempts_total" + l)
	m.loginFailures = s.metrics.GetOrCreateCounter("pgturnstile_server_login_failures_total" + l)
	m.closeDeferred = s.metrics.GetOrCreateCounter("pgturnstile_server_close_deferred_total" + l)
	m.drainRollbacks = s.metrics.GetOrCreateCounter("pgturnstile_server_drain_rollbacks_total" + l)
	for _, o := range drainOutcomes {
		m.event("pgturnstile_server_drain_total", "outcome", o, 0)
	}
	for _, r := range drainCancelResults {
		m.event("pgturnstile_server_drain_cancels_total", "result", r, 0)
	}
	return m
}

// count adds one to the pool's series of an event counter with one more
// label, e.g. server closes by reason. Not on the hot path.
func (m *poolMetrics) count(name, label, value string) {
	m.event(name, label, value, 1)
}

func (m *poolMetrics) event(name, label, value string, n int) {
	m.set.GetOrCreateCounter(fmt.Sprintf(`%s{%s,%s="%s"}`, name, m.labels, label, labelValue(value))).Add(n)
}

func init() {
	// Emit # HELP/# TYPE so Prometheus knows counters from gauges and
	// sees the histograms as histograms.
	metrics.ExposeMetadata(true)
}

// WriteMetrics writes every metric in Prometheus text format, each family
// with its HELP text (internal/metricdoc). Families with one series per pool
// or database get their metadata once, then the samples.
func (s *Service) WriteMetrics(w io.Writer) {
	var b bytes.Buffer
	s.writeMetrics(&b)
	metricdoc.Write(w, b.Bytes())
}

func (s *Service) writeMetrics(w io.Writer) {
	// The pool gauges are SHOW POOLS' columns, read from the pools'
	// per-state counts (servers: pool.go; clients: clientstate.go),
	// so the two never disagree.
	pools := s.Console().Pools()
	for _, g := range []struct {
		name string
		v    func(p *admin.Pool) int
	}{
		{"pgturnstile_pool_clients_active", func(p *admin.Pool) int { return p.ClActive }},
		{"pgturnstile_pool_clients_waiting", func(p *admin.Pool) int { return p.ClWaiting }},
		{"pgturnstile_pool_servers_active", func(p *admin.Pool) int { return p.SvActive }},
		{"pgturnstile_pool_servers_idle", func(p *admin.Pool) int { return p.SvIdle }},
		{"pgturnstile_pool_servers_login", func(p *admin.Pool) int { return p.SvLogin }},
		{"pgturnstile_pool_servers_being_canceled", func(p *admin.Pool) int { return p.SvBeingCanceled }},
		{"pgturnstile_pool_size", func(p *admin.Pool) int { return p.PoolSize }},
	} {
		metrics.WriteMetadataIfNeeded(w, g.name, "gauge")
		for i := range pools {
			p := &pools[i]
			fmt.Fprintf(w, "%s%s %d\n", g.name, poolLabels(p.Database, p.User), max(g.v(p), 0))
		}
	}
	metrics.WriteMetadataIfNeeded(w, "pgturnstile_pool_maxwait_seconds", "gauge")
	for _, p := range pools {
		fmt.Fprintf(w, "pgturnstile_pool_maxwait_seconds%s %g\n", poolLabels(p.Database, p.User), p.MaxWait.Seconds())
	}
	// SHOW STATS' totals, per pool (SHOW STATS adds a database's pools
	// up): every series of a pool has the same labels. Times are kept in
	// microseconds, as SHOW STATS prints them, and exposed in seconds.
	const µsPerSecond = 1e6
	type poolTotals struct {
		labels string
		t      admin.Counters
	}
	var totals []poolTotals
	for _, p := range s.allPools() {
		totals = append(totals, poolTotals{"{" + p.metrics.labels + "}", p.stats.totals()})
	}
	for _, c := range []struct {
		name string
		v    func(t *admin.Counters) float64
	}{
		{"pgturnstile_server_assignments_total", func(t *admin.Counters) float64 { return float64(t.ServerAssignmentCount) }},
		{"pgturnstile_transactions_total", func(t *admin.Counters) float64 { return float64(t.XactCount) }},
		{"pgturnstile_queries_total", func(t *admin.Counters) float64 { return float64(t.QueryCount) }},
		{"pgturnstile_received_bytes_total", func(t *admin.Counters) float64 { return float64(t.Received) }},
		{"pgturnstile_sent_bytes_total", func(t *admin.Counters) float64 { return float64(t.Sent) }},
		{"pgturnstile_transaction_time_seconds_total", func(t *admin.Counters) float64 { return float64(t.XactTime) / µsPerSecond }},
		{"pgturnstile_query_time_seconds_total", func(t *admin.Counters) float64 { return float64(t.QueryTime) / µsPerSecond }},
		{"pgturnstile_wait_time_seconds_total", func(t *admin.Counters) float64 { return float64(t.WaitTime) / µsPerSecond }},
		{"pgturnstile_client_parses_total", func(t *admin.Counters) float64 { return float64(t.ClientParseCount) }},
		{"pgturnstile_server_parses_total", func(t *admin.Counters) float64 { return float64(t.ServerParseCount) }},
		{"pgturnstile_binds_total", func(t *admin.Counters) float64 { return float64(t.BindCount) }},
		{"pgturnstile_client_logins_total", func(t *admin.Counters) float64 { return float64(t.ClientLoginCount) }},
	} {
		metrics.WriteMetadataIfNeeded(w, c.name, "counter")
		for i := range totals {
			fmt.Fprintf(w, "%s%s %g\n", c.name, totals[i].labels, max(c.v(&totals[i].t), 0))
		}
	}
	s.writeAdmissionMetrics(w)
	metrics.WriteGaugeUint64(w, "pgturnstile_clients", uint64(max(s.clientCount.Load(), 0)))
	metrics.WriteGaugeUint64(w, "pgturnstile_clients_parked", uint64(s.ParkedClients()))
	// What clients make the pooler hold: messages being received whole
	// (held_message_budget) and prepared-statement text
	// (prepared_statement_budget).
	metrics.WriteGaugeUint64(w, "pgturnstile_held_message_bytes", uint64(max(s.held.InUse(), 0)))
	metrics.WriteGaugeUint64(w, "pgturnstile_prepared_statement_bytes", uint64(max(s.stmts.bytes.Load(), 0)))
	s.metrics.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
	writeLiveHeap(w)
}

// liveHeapSample reads the heap the last garbage collection found live.
// go_memstats_heap_inuse_bytes also counts garbage not yet collected, up
// to GOGC's share more: this is what the pooler actually holds.
var liveHeapSample = []runtimemetrics.Sample{{Name: "/gc/heap/live:bytes"}}

var liveHeapMu sync.Mutex

func writeLiveHeap(w io.Writer) {
	liveHeapMu.Lock()
	runtimemetrics.Read(liveHeapSample)
	v := liveHeapSample[0].Value
	liveHeapMu.Unlock()
	if v.Kind() == runtimemetrics.KindUint64 {
		metrics.WriteGaugeUint64(w, "go_gc_heap_live_bytes", v.Uint64())
	}
}

func poolLabels(db, user string) string {
	return fmt.Sprintf(`{database="%s",user="%s"}`, labelValue(db), labelValue(user))
}

// writeAdmissionMetrics writes the gates' state from the rows SHOW
// ADMISSION prints: capacity, tickets and the busy accounting per pool;
// debt, demand, allowed slots, tickets, LIFO mode and waiters per tier;
// tickets and waiters per fair-share node. Decision counters and wait
// histograms live in s.metrics (admission.go).
func (s *Service) writeAdmissionMetrics(w io.Writer) {
	rows := s.Console().Admission()
	if len(rows) == 0 {
		return
	}
	type series struct {
		name, kind string
		v          func(r *admin.AdmissionRow) float64
	}
	for _, g := range []series{
		{"pgturnstile_admission_capacity", "pool", func(r *admin.AdmissionRow) float64 { return float64(r.Capacity) }},
		{"pgturnstile_admission_in_use", "pool", func(r *admin.AdmissionRow) float64 { return float64(r.InUse) }},
		{"pgturnstile_admission_debt", "tier", func(r *admin.AdmissionRow) float64 { return r.Debt }},
		{"pgturnstile_admission_demand", "tier", func(r *admin.AdmissionRow) float64 { return r.Demand }},
		{"pgturnstile_admission_allowed", "tier", func(r *admin.AdmissionRow) float64 { return float64(r.Allowed) }},
		{"pgturnstile_admission_tier_in_use", "tier", func(r *admin.AdmissionRow) float64 { return float64(r.InUse) }},
		{"pgturnstile_admission_lifo", "tier", func(r *admin.AdmissionRow) float64 {
			if r.Mode == "lifo" {
				return 1
			}
			return 0
		}},
		{"pgturnstile_admission_waiting", "tier", func(r *admin.AdmissionRow) float64 { return float64(r.Waiting) }},
		{"pgturnstile_admission_node_in_use", "node", func(r *admin.AdmissionRow) float64 { return float64(r.InUse) }},
		{"pgturnstile_admission_node_waiting", "node", func(r *admin.AdmissionRow) float64 { return float64(r.Waiting) }},
	} {
		metrics.WriteMetadataIfNeeded(w, g.name, "gauge")
		for i := range rows {
			r := &rows[i]
			if r.Kind != g.kind {
				continue
			}
			labels := poolLabels(r.Database, r.User)
			switch r.Kind {
			case "tier":
				labels = fmt.Sprintf(`{database="%s",user="%s",priority="%s"}`, labelValue(r.Database), labelValue(r.User), labelValue(r.Name))
			case "node":
				labels = fmt.Sprintf(`{database="%s",user="%s",category="%s"}`, labelValue(r.Database), labelValue(r.User), labelValue(r.Name))
			}
			fmt.Fprintf(w, "%s%s %g\n", g.name, labels, g.v(r))
		}
	}
	// The busy accounting: the lifetime fraction, and the two integrals
	// as counters, so rate(in_use) ÷ rate(capacity) is the busy fraction
	// over any window. They restart with the gate (a policy reload).
	for _, c := range []struct {
		name, typ string
		v         func(r *admin.AdmissionRow) float64
	}{
		{"pgturnstile_admission_busy_ratio", "gauge", func(r *admin.AdmissionRow) float64 { return r.Busy }},
		{"pgturnstile_admission_in_use_seconds_total", "counter", func(r *admin.AdmissionRow) float64 { return r.InUseSeconds }},
		{"pgturnstile_admission_capacity_seconds_total", "counter", func(r *admin.AdmissionRow) float64 { return r.CapacitySeconds }},
	} {
		metrics.WriteMetadataIfNeeded(w, c.name, c.typ)
		for i := range rows {
			if r := &rows[i]; r.Kind == "pool" {
				fmt.Fprintf(w, "%s%s %g\n", c.name, poolLabels(r.Database, r.User), c.v(r))
			}
		}
	}
}
