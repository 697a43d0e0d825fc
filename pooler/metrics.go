package pooler

import (
	"fmt"
	"io"
	runtimemetrics "runtime/metrics"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"
	"github.com/pgturnstile/pgturnstile/admin"
)

// Prometheus metrics. Per-pool histograms and the event counters live in
// the service's metrics.Set, created with the pool (never looked up on the
// hot path); gauges and the traffic counters are written at scrape time
// from the same snapshots SHOW POOLS and SHOW STATS print, so the two
// always agree.

// poolMetrics are the per-pool instruments updated on the hot path.
type poolMetrics struct {
	queryDuration *metrics.PrometheusHistogram
	waitDuration  *metrics.PrometheusHistogram
	// connectWait sums the time the pool's growth waited for a create
	// token (server_connect_rate).
	connectWait *metrics.FloatCounter
}

func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func (s *Service) newPoolMetrics(db, user string) poolMetrics {
	l := fmt.Sprintf(`{database="%s",user="%s"}`, labelValue(db), labelValue(user))
	return poolMetrics{
		queryDuration: s.metrics.GetOrCreatePrometheusHistogram("pgturnstile_query_duration_seconds" + l),
		waitDuration:  s.metrics.GetOrCreatePrometheusHistogram("pgturnstile_wait_duration_seconds" + l),
		connectWait:   s.metrics.GetOrCreateFloatCounter("pgturnstile_server_connect_wait_seconds_total" + l),
	}
}

// countEvent adds one to an event counter with a label, e.g. server closes
// by reason. Not on the hot path.
func (s *Service) countEvent(name, label, value string) {
	s.metrics.GetOrCreateCounter(fmt.Sprintf(`%s{%s="%s"}`, name, label, labelValue(value))).Inc()
}

// countEvents is countEvent with several labels, given as name, value
// pairs.
func (s *Service) countEvents(name string, labels ...string) {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `%s="%s"`, labels[i], labelValue(labels[i+1]))
	}
	b.WriteByte('}')
	s.metrics.GetOrCreateCounter(b.String()).Inc()
}

func init() {
	// Emit # HELP/# TYPE so Prometheus knows counters from gauges and
	// sees the histograms as histograms.
	metrics.ExposeMetadata(true)
}

// WriteMetrics writes every metric in Prometheus text format. Families with
// one series per pool or database get their metadata once, then the
// samples.
func (s *Service) WriteMetrics(w io.Writer) {
	// The pool gauges are SHOW POOLS' columns, read from the pools'
	// per-state counts (servers: objects.go; clients: clientstate.go),
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
	stats := s.Console().Stats()
	for _, c := range []struct {
		name string
		v    func(t *admin.Counters) int64
	}{
		{"pgturnstile_server_assignments_total", func(t *admin.Counters) int64 { return t.ServerAssignmentCount }},
		{"pgturnstile_transactions_total", func(t *admin.Counters) int64 { return t.XactCount }},
		{"pgturnstile_queries_total", func(t *admin.Counters) int64 { return t.QueryCount }},
		{"pgturnstile_received_bytes_total", func(t *admin.Counters) int64 { return t.Received }},
		{"pgturnstile_sent_bytes_total", func(t *admin.Counters) int64 { return t.Sent }},
		{"pgturnstile_transaction_time_microseconds_total", func(t *admin.Counters) int64 { return t.XactTime }},
		{"pgturnstile_query_time_microseconds_total", func(t *admin.Counters) int64 { return t.QueryTime }},
		{"pgturnstile_wait_time_microseconds_total", func(t *admin.Counters) int64 { return t.WaitTime }},
		{"pgturnstile_client_parses_total", func(t *admin.Counters) int64 { return t.ClientParseCount }},
		{"pgturnstile_server_parses_total", func(t *admin.Counters) int64 { return t.ServerParseCount }},
		{"pgturnstile_binds_total", func(t *admin.Counters) int64 { return t.BindCount }},
		{"pgturnstile_client_logins_total", func(t *admin.Counters) int64 { return t.ClientLoginCount }},
	} {
		metrics.WriteMetadataIfNeeded(w, c.name, "counter")
		for i := range stats {
			st := &stats[i]
			fmt.Fprintf(w, "%s{database=\"%s\"} %d\n", c.name, labelValue(st.Database), max(c.v(&st.Total), 0))
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
