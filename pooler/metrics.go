package pooler

import (
	"bytes"
	"fmt"
	"io"

	"github.com/VictoriaMetrics/metrics"
	"github.com/pgturnstile/pgturnstile/internal/metricdoc"
	"github.com/pgturnstile/pgturnstile/internal/metricrows"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// Prometheus metrics. Per-pool histograms and the event counters live in
// the service's metrics.Set, created with the pool (never looked up on the
// hot path), so that every pool has all its series, at zero, from its
// creation; gauges and the traffic counters are written at scrape time
// from the same snapshots SHOW POOLS and SHOW STATS print, so the two
// always agree (internal/metricrows). Every series of a pool is labelled
// {database,user}; every family gets its HELP text from internal/metricdoc.

// latencyBuckets are the latency histograms' buckets (internal/metricrows).
var latencyBuckets = metricrows.LatencyBuckets

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

func labelValue(s string) string { return metricrows.LabelValue(s) }

func (s *Service) newPoolMetrics(db, user string) poolMetrics {
	m := poolMetrics{set: s.metrics, labels: metricrows.PoolLabels(db, user)}
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
	metricrows.WritePools(w, s.Console().Pools())
	var totals []metricrows.PoolTotals
	for _, p := range s.allPools() {
		totals = append(totals, metricrows.PoolTotals{Labels: p.metrics.labels, Totals: p.stats.totals()})
	}
	metricrows.WriteTotals(w, totals)
	// Decision counters and wait histograms live in s.metrics
	// (admission.go).
	metricrows.WriteAdmission(w, s.Console().Admission())
	g := s.gen.Load()
	metricrows.WriteRoutes(w, s.Console().Routes(), g.seq, g.shards != nil)
	s.writeShardSourceMetrics(w, g)
	metrics.WriteGaugeUint64(w, "pgturnstile_clients", uint64(max(s.clientCount.Load(), 0)))
	metrics.WriteGaugeUint64(w, "pgturnstile_clients_parked", uint64(s.ParkedClients()))
	metrics.WriteCounterUint64(w, "pgturnstile_event_loop_transactions_total", s.loopRelays.Load())
	metrics.WriteCounterUint64(w, "pgturnstile_event_loop_moves_total", netpoll.Moves())
	metricrows.WritePollerLoads(w, netpoll.PollerLoads())
	// What clients make the pooler hold: messages being received whole
	// (held_message_budget) and prepared-statement text
	// (prepared_statement_budget).
	metrics.WriteGaugeUint64(w, "pgturnstile_held_message_bytes", uint64(max(s.held.InUse(), 0)))
	metrics.WriteGaugeUint64(w, "pgturnstile_prepared_statement_bytes", uint64(max(s.stmts.TextBytes(), 0)))
	s.metrics.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
	metricrows.WriteLiveHeap(w)
}
