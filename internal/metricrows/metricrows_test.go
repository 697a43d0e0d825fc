package metricrows

import (
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/pgturnstile/pgturnstile/admin"
)

// Label values are escaped as the text format wants: backslash, quote and
// newline.
func TestPoolLabels(t *testing.T) {
	if got, want := PoolLabels(`a"b`, "c\\d\ne"), `database="a\"b",user="c\\d\ne"`; got != want {
		t.Errorf("PoolLabels = %s, want %s", got, want)
	}
}

// The rows' columns become series of the pool's labels, each family with
// its TYPE, negatives (a count caught mid-change) as 0, times in seconds;
// admission rows go to the series of their kind.
func TestWriteRows(t *testing.T) {
	metrics.ExposeMetadata(true) // as the pooler does: TYPE lines
	var b strings.Builder
	WritePools(&b, []admin.Pool{{Database: "db", User: "u", ClActive: 2, SvIdle: -1, MaxWait: 1500 * time.Millisecond}})
	WriteTotals(&b, []PoolTotals{{Labels: PoolLabels("db", "u"), Totals: admin.Counters{XactCount: 7, XactTime: 2_500_000}}})
	WriteAdmission(&b, []admin.AdmissionRow{
		{Kind: "pool", Database: "db", User: "u", Capacity: 4},
		{Kind: "tier", Database: "db", User: "u", Name: "high", Mode: "lifo"},
	})
	text := b.String()
	for _, want := range []string{
		"# TYPE pgturnstile_pool_clients_active gauge\n",
		`pgturnstile_pool_clients_active{database="db",user="u"} 2` + "\n",
		`pgturnstile_pool_servers_idle{database="db",user="u"} 0` + "\n",
		`pgturnstile_pool_maxwait_seconds{database="db",user="u"} 1.5` + "\n",
		"# TYPE pgturnstile_transactions_total counter\n",
		`pgturnstile_transactions_total{database="db",user="u"} 7` + "\n",
		`pgturnstile_transaction_time_seconds_total{database="db",user="u"} 2.5` + "\n",
		`pgturnstile_admission_capacity{database="db",user="u"} 4` + "\n",
		`pgturnstile_admission_lifo{database="db",user="u",priority="high"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
	b.Reset()
	WriteLiveHeap(&b)
	if !strings.Contains(b.String(), "\ngo_gc_heap_live_bytes ") {
		t.Errorf("live heap: %q", b.String())
	}
}
