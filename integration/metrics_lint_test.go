//go:build linux

package integration

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// promtoolPath finds promtool (Debian's prometheus package, which
// scripts/test-deps.sh installs for make test).
func promtoolPath(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found: scripts/test-deps.sh installs it (Debian package prometheus)")
	}
	return path
}

// TestMetricsPassPromtool: a live /metrics, after traffic with admission
// on, passes `promtool check metrics` with no finding at all; every pool
// has a series in every per-pool family, labelled {database,user}, from
// the pool's creation; the latency histograms start at 50 µs.
func TestMetricsPassPromtool(t *testing.T) {
	promtool := promtoolPath(t)
	p := startAdmissionPooler(t, fairPolicy, map[string]string{"default_pool_size": "2"})
	admin := adminConsole(t, p)

	// Traffic: two categories and the default one, more clients than
	// servers (waits), pgx's prepared statements (parses, binds), a
	// transaction, a second database; then RECONNECT closes servers.
	var wg sync.WaitGroup
	for _, app := range []string{"a-1", "a-2", "b-1", "b-2", "web"} {
		c := connectApp(t, p, app)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				if _, err := c.Exec(ctxT(t, 10*time.Second), "SELECT pg_sleep(0.005)"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	tx := connectPgx(t, p.App())
	for _, q := range []string{"BEGIN", "SELECT 1", "COMMIT"} {
		if _, err := tx.Exec(ctxT(t, 10*time.Second), q); err != nil {
			t.Fatal(err)
		}
	}
	other := connectPgx(t, p.ConnString(otherDB, appUser, appPassword))
	queryInt(t, other, "SELECT 3")
	adminExec(t, admin, "RECONNECT")
	queryInt(t, tx, "SELECT 4")

	resp, err := http.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v, %d findings:\n%s", err, strings.Count(strings.TrimSpace(string(out)), "\n")+1, out)
	}

	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}

	// Every pool SHOW POOLS lists (but the console's own) is in every
	// family that has per-pool series, and nothing else is.
	pools := map[string]bool{}
	for _, row := range show(t, admin, "SHOW POOLS").rows {
		if row["database"] != "pgbouncer" {
			pools[row["database"]+"/"+row["user"]] = true
		}
	}
	if len(pools) < 2 {
		t.Fatalf("SHOW POOLS lists %d pools, want appdb's and otherdb's", len(pools))
	}
	perPool := 0
	for name, f := range families {
		if !strings.HasPrefix(name, "pgturnstile_") {
			continue
		}
		seen := map[string]bool{}
		hasDB := false
		for _, m := range f.Metric {
			l := labelMap(m)
			db, ok := l["database"]
			if !ok {
				continue
			}
			hasDB = true
			user, ok := l["user"]
			if !ok {
				t.Errorf("%s%v: a series with database but no user label", name, l)
				continue
			}
			seen[db+"/"+user] = true
		}
		if !hasDB {
			continue
		}
		perPool++
		for k := range pools {
			if !seen[k] {
				t.Errorf("%s has no series for pool %s", name, k)
			}
		}
		for k := range seen {
			if !pools[k] && k != "pgbouncer/pgbouncer" {
				t.Errorf("%s has a series for %s, which SHOW POOLS does not list", name, k)
			}
		}
	}
	if perPool < 20 {
		t.Errorf("only %d per-pool families in /metrics", perPool)
	}

	// Each pool's gate has a wait histogram for every tier of the policy
	// from its start: fairPolicy's low tier, which no client used, too.
	for k := range pools {
		for _, prio := range []string{"high", "low"} {
			found := false
			for _, m := range families["pgturnstile_admission_wait_seconds"].GetMetric() {
				l := labelMap(m)
				found = found || (l["database"]+"/"+l["user"] == k && l["priority"] == prio)
			}
			if !found {
				t.Errorf("pgturnstile_admission_wait_seconds has no priority=%q series for pool %s", prio, k)
			}
		}
	}

	// The latency histograms start at 50 µs: a sub-millisecond query or
	// wait is not lumped in with 5 ms ones.
	for _, name := range []string{"pgturnstile_query_duration_seconds", "pgturnstile_wait_duration_seconds", "pgturnstile_admission_wait_seconds"} {
		f := families[name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.Metric) == 0 {
			t.Errorf("%s: no histogram in /metrics", name)
			continue
		}
		b := f.Metric[0].GetHistogram().GetBucket()
		if len(b) == 0 || b[0].GetUpperBound() != 50e-6 {
			t.Errorf("%s: first bucket %v, want le=5e-05", name, b)
		}
	}
}

func labelMap(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, lp := range m.Label {
		l[lp.GetName()] = lp.GetValue()
	}
	return l
}
