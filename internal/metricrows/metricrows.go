// Package metricrows writes the /metrics series that are read at scrape
// time from the rows the admin console prints (SHOW POOLS, SHOW STATS,
// SHOW ADMISSION), so that the two never disagree, in Prometheus text
// format, each family with its TYPE line; it also holds the label
// spelling every per-pool series shares and the latency histograms'
// buckets. HELP texts are internal/metricdoc's.
package metricrows

import (
	"fmt"
	"io"
	runtimemetrics "runtime/metrics"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"
	"github.com/pgturnstile/pgturnstile/admin"
)

// LatencyBuckets are the upper bounds of the latency histograms, in
// seconds: from 50 µs, so that the sub-millisecond queries and waits of a
// healthy pool are told apart, up to a minute.
var LatencyBuckets = []float64{
	50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3,
	1, 2.5, 5, 10, 30, 60,
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// LabelValue escapes s for a label value in the text format.
func LabelValue(s string) string { return labelEscaper.Replace(s) }

// PoolLabels are a pool's labels without braces: database="…",user="…".
func PoolLabels(db, user string) string {
	return fmt.Sprintf(`database="%s",user="%s"`, LabelValue(db), LabelValue(user))
}

func poolLabels(db, user string) string { return "{" + PoolLabels(db, user) + "}" }

// WritePools writes the pool gauges: SHOW POOLS' columns, one series per
// pool.
func WritePools(w io.Writer, pools []admin.Pool) {
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
}

// PoolTotals are one pool's SHOW STATS totals, with its labels
// (PoolLabels).
type PoolTotals struct {
	Labels string
	Totals admin.Counters
}

// WriteTotals writes SHOW STATS' totals per pool (SHOW STATS adds a
// database's pools up): every series of a pool has the same labels. Times
// are kept in microseconds, as SHOW STATS prints them, and exposed in
// seconds.
func WriteTotals(w io.Writer, totals []PoolTotals) {
	const µsPerSecond = 1e6
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
			fmt.Fprintf(w, "%s{%s} %g\n", c.name, totals[i].Labels, max(c.v(&totals[i].Totals), 0))
		}
	}
}

// WriteAdmission writes the gates' state from the rows SHOW ADMISSION
// prints: capacity, tickets and the busy accounting per pool; debt,
// demand, allowed slots, tickets, LIFO mode and waiters per tier; tickets
// and waiters per fair-share node. (Decision counters and wait histograms
// are instruments of their own.)
func WriteAdmission(w io.Writer, rows []admin.AdmissionRow) {
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
				labels = fmt.Sprintf(`{database="%s",user="%s",priority="%s"}`, LabelValue(r.Database), LabelValue(r.User), LabelValue(r.Name))
			case "node":
				labels = fmt.Sprintf(`{database="%s",user="%s",category="%s"}`, LabelValue(r.Database), LabelValue(r.User), LabelValue(r.Name))
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

// liveHeapSample reads the heap the last garbage collection found live.
// go_memstats_heap_inuse_bytes also counts garbage not yet collected, up
// to GOGC's share more: this is what the pooler actually holds. mu is a
// leaf lock.
var liveHeap struct {
	mu     sync.Mutex
	sample []runtimemetrics.Sample
}

// WriteLiveHeap writes go_gc_heap_live_bytes.
func WriteLiveHeap(w io.Writer) {
	liveHeap.mu.Lock()
	if liveHeap.sample == nil {
		liveHeap.sample = []runtimemetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	}
	runtimemetrics.Read(liveHeap.sample)
	v := liveHeap.sample[0].Value
	liveHeap.mu.Unlock()
	if v.Kind() == runtimemetrics.KindUint64 {
		metrics.WriteGaugeUint64(w, "go_gc_heap_live_bytes", v.Uint64())
	}
}

// WriteRoutes writes the sharding router's decision counters (SHOW
// ROUTES' rows): pgturnstile_route_decisions_total by cluster, colo and
// source, the refusals again by reason, and the configuration generation
// whose shard map is in force.
func WriteRoutes(w io.Writer, rows []admin.RouteRow, generation uint64, haveMap bool) {
	if haveMap {
		metrics.WriteGaugeUint64(w, "pgturnstile_shard_map_generation", generation)
	}
	if len(rows) == 0 {
		return
	}
	type key struct{ cluster, colo, source string }
	var order []key
	sums := map[key]uint64{}
	for _, r := range rows {
		k := key{r.Cluster, r.Colo, r.Source}
		if _, ok := sums[k]; !ok {
			order = append(order, k)
		}
		sums[k] += r.Count
	}
	metrics.WriteMetadataIfNeeded(w, "pgturnstile_route_decisions_total", "counter")
	for _, k := range order {
		fmt.Fprintf(w, "pgturnstile_route_decisions_total{cluster=\"%s\",colo=\"%s\",source=\"%s\"} %d\n",
			LabelValue(k.cluster), LabelValue(k.colo), LabelValue(k.source), sums[k])
	}
	metrics.WriteMetadataIfNeeded(w, "pgturnstile_route_refusals_total", "counter")
	for _, r := range rows {
		if r.Reason != "" {
			fmt.Fprintf(w, "pgturnstile_route_refusals_total{cluster=\"%s\",colo=\"%s\",reason=\"%s\"} %d\n",
				LabelValue(r.Cluster), LabelValue(r.Colo), LabelValue(r.Reason), r.Count)
		}
	}
}

// WritePollerLoads writes each event-loop poller's load (0 to 1), by its
// place among the pollers; nothing before the pollers start.
func WritePollerLoads(w io.Writer, loads []float64) {
	if len(loads) == 0 {
		return
	}
	metrics.WriteMetadataIfNeeded(w, "pgturnstile_event_loop_poller_load", "gauge")
	for i, l := range loads {
		fmt.Fprintf(w, "pgturnstile_event_loop_poller_load{poller=\"%d\"} %g\n", i, l)
	}
}
