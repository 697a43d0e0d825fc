package pooler

import (
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgturnstile/pgturnstile/internal/metricdoc"
	"github.com/pgturnstile/pgturnstile/internal/metricrows"
)

// nonBaseUnits are the unit words promtool check metrics rejects in a
// name (Prometheus wants seconds and bytes).
var nonBaseUnits = regexp.MustCompile(`_(nanoseconds|microseconds|milliseconds|minutes|hours|days|kilobytes|megabytes|gigabytes|kibibytes|mebibytes|bits|percent)(_|$)`)

// TestMetricsNaming: /metrics of a service with one pool that has seen no
// traffic follows Prometheus' naming rules (what promtool check metrics
// checks, which the integration test TestMetricsPassPromtool runs): every
// family has a HELP text and a TYPE; counters, and only counters, end in
// _total; no family ends in _count, _sum or _bucket; units are base
// units; every per-pool series is labelled {database,user}; the pool has
// every per-pool series already, at zero; latency histograms start at
// 50 µs.
func TestMetricsNaming(t *testing.T) {
	p := benchPool(t, 0)
	var b strings.Builder
	p.svc.WriteMetrics(&b)
	text := b.String()

	help := map[string]string{}
	types := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, h, _ := strings.Cut(rest, " ")
			help[name] = h
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if _, dup := types[name]; dup {
				t.Errorf("%s: two # TYPE lines", name)
			}
			types[name] = typ
		}
	}
	if len(types) < 40 {
		t.Fatalf("only %d families in /metrics:\n%s", len(types), text)
	}
	for name, typ := range types {
		if h := help[name]; h == "" || h == metricdoc.NoHelp {
			t.Errorf("%s: no HELP text (add it to metricdoc.Help)", name)
		}
		switch {
		case typ == "counter" && !strings.HasSuffix(name, "_total"):
			t.Errorf("%s: a counter whose name does not end in _total", name)
		case typ != "counter" && strings.HasSuffix(name, "_total"):
			t.Errorf("%s: a %s whose name ends in _total", name, typ)
		}
		for _, suffix := range []string{"_count", "_sum", "_bucket"} {
			if strings.HasSuffix(name, suffix) {
				t.Errorf("%s: a family name ending in %s", name, suffix)
			}
		}
		if nonBaseUnits.MatchString(name) {
			t.Errorf("%s: not in base units (seconds, bytes)", name)
		}
		if name != strings.ToLower(name) {
			t.Errorf("%s: not snake_case", name)
		}
	}
	for name := range help {
		if _, ok := types[name]; !ok {
			t.Errorf("%s: # HELP without # TYPE", name)
		}
	}
	// HELP text is written as is: it must need no escaping.
	for name, h := range metricdoc.Help {
		if strings.ContainsAny(h, "\\\n") {
			t.Errorf("%s: HELP text with a backslash or a newline: %q", name, h)
		}
	}

	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, text)
	}
	// Every family that has series per pool has the new pool's, labelled
	// {database,user} like every other per-pool series.
	for _, name := range []string{
		"pgturnstile_pool_clients_active", "pgturnstile_pool_servers_idle", "pgturnstile_pool_maxwait_seconds",
		"pgturnstile_queries_total", "pgturnstile_transaction_time_seconds_total", "pgturnstile_wait_time_seconds_total",
		"pgturnstile_client_logins_total", "pgturnstile_query_duration_seconds", "pgturnstile_wait_duration_seconds",
		"pgturnstile_server_connects_total", "pgturnstile_server_connect_attempts_total", "pgturnstile_server_login_failures_total",
		"pgturnstile_server_connect_wait_seconds_total", "pgturnstile_server_close_deferred_total",
		"pgturnstile_server_drain_total", "pgturnstile_server_drain_rollbacks_total", "pgturnstile_server_drain_cancels_total",
	} {
		f := families[name]
		if f == nil {
			t.Errorf("%s: no series for a pool that has seen no traffic yet", name)
			continue
		}
		found := false
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["database"] == "bench" && l["user"] == "bench" {
				found = true
				if v := sampleValue(m); v != 0 {
					t.Errorf("%s%v = %v before any traffic", name, l, v)
				}
			}
		}
		if !found {
			t.Errorf("%s: no {database=\"bench\",user=\"bench\"} series", name)
		}
	}
	for name, f := range families {
		if !strings.HasPrefix(name, "pgturnstile_") {
			continue
		}
		for _, m := range f.Metric {
			has := map[string]bool{}
			for _, lp := range m.Label {
				has[lp.GetName()] = true
			}
			if has["database"] != has["user"] {
				t.Errorf("%s: a series labelled %v; a pool's series carry both database and user", name, m.Label)
			}
		}
	}
	for _, name := range []string{"pgturnstile_query_duration_seconds", "pgturnstile_wait_duration_seconds"} {
		f := families[name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("%s: not a histogram", name)
			continue
		}
		if b := f.Metric[0].GetHistogram().GetBucket(); len(b) == 0 || b[0].GetUpperBound() != 50e-6 {
			t.Errorf("%s: first bucket %v, want le=5e-05", name, b)
		}
	}
	// The runtime collector's misnamed families come out renamed.
	for old, fix := range metricdoc.RuntimeFamilyFixes {
		if fix.Name == "" {
			continue
		}
		if _, ok := types[old]; ok {
			t.Errorf("%s: still in /metrics", old)
		}
		if _, ok := types[fix.Name]; !ok {
			t.Errorf("%s (was %s): not in /metrics", fix.Name, old)
		}
	}
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// poolLabels is a pool's label set as /metrics writes it, braces included.
func poolLabels(db, user string) string { return "{" + metricrows.PoolLabels(db, user) + "}" }
