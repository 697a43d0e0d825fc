package pooler

import (
	"fmt"
	"io"
	"strings"

	"github.com/VictoriaMetrics/metrics"
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
}

func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func (s *Service) newPoolMetrics(db, user string) poolMetrics {
	l := fmt.Sprintf(`{database="%s",user="%s"}`, labelValue(db), labelValue(user))
	return poolMetrics{
		queryDuration: s.metrics.GetOrCreatePrometheusHistogram("pgturnstile_query_duration_seconds" + l),
		waitDuration:  s.metrics.GetOrCreatePrometheusHistogram("pgturnstile_wait_duration_seconds" + l),
	}
}

// countEvent adds one to an event counter with a label, e.g. server closes
// by reason. Not on the hot path.
func (s *Service) countEvent(name, label, value string) {
	s.metrics.GetOrCreateCounter(fmt.Sprintf(`%s{%s="%s"}`, name, label, labelValue(value))).Inc()
}

// WriteMetrics writes every metric in Prometheus text format.
func (s *Service) WriteMetrics(w io.Writer) {
	for _, p := range s.Pools() {
		l := fmt.Sprintf(`{database="%s",user="%s"}`, labelValue(p.Database), labelValue(p.User))
		for _, g := range []struct {
			name string
			v    int
		}{
			{"pgturnstile_pool_clients_active", p.ClActive},
			{"pgturnstile_pool_clients_waiting", p.ClWaiting},
			{"pgturnstile_pool_servers_active", p.SvActive},
			{"pgturnstile_pool_servers_idle", p.SvIdle},
			{"pgturnstile_pool_servers_login", p.SvLogin},
			{"pgturnstile_pool_size", p.PoolSize},
		} {
			metrics.WriteGaugeUint64(w, g.name+l, uint64(max(g.v, 0)))
		}
		metrics.WriteGaugeFloat64(w, "pgturnstile_pool_maxwait_seconds"+l, p.MaxWait.Seconds())
	}
	for _, st := range s.Stats() {
		l := fmt.Sprintf(`{database="%s"}`, labelValue(st.Database))
		t := st.Total
		for _, c := range []struct {
			name string
			v    int64
		}{
			{"pgturnstile_server_assignments_total", t.ServerAssignmentCount},
			{"pgturnstile_transactions_total", t.XactCount},
			{"pgturnstile_queries_total", t.QueryCount},
			{"pgturnstile_received_bytes_total", t.Received},
			{"pgturnstile_sent_bytes_total", t.Sent},
			{"pgturnstile_transaction_time_microseconds_total", t.XactTime},
			{"pgturnstile_query_time_microseconds_total", t.QueryTime},
			{"pgturnstile_wait_time_microseconds_total", t.WaitTime},
			{"pgturnstile_client_parses_total", t.ClientParseCount},
			{"pgturnstile_server_parses_total", t.ServerParseCount},
			{"pgturnstile_binds_total", t.BindCount},
			{"pgturnstile_client_logins_total", t.ClientLoginCount},
		} {
			metrics.WriteCounterUint64(w, c.name+l, uint64(max(c.v, 0)))
		}
	}
	metrics.WriteGaugeUint64(w, "pgturnstile_clients", uint64(max(s.clientCount.Load(), 0)))
	s.metrics.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
}
