package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	// comm with a space and a parenthesis, as /proc allows.
	line := "1234 (pg (bench) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 12345 1000000 500 18446744073709551615\n"
	n, err := parseStatTicks(line)
	if err != nil {
		t.Fatal(err)
	}
	if n != 325 {
		t.Fatalf("ticks = %d, want 250+75", n)
	}
	if _, err := parseStatTicks("garbage"); err == nil {
		t.Fatal("no error for a line without comm")
	}
}

func TestPercentile(t *testing.T) {
	xs := make([]int64, 100)
	for i := range xs {
		xs[i] = int64(i + 1)
	}
	for _, c := range []struct {
		p    float64
		want int64
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0, 1}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %d, want %d", c.p, got, c.want)
		}
	}
	if got := percentile([]int64{7}, 99); got != 7 {
		t.Errorf("p99 of one = %d", got)
	}
}

func TestAggregate(t *testing.T) {
	a := aggregate([]float64{3, 1, math.NaN(), 2})
	if a.Med != 2 || a.Lo != 1 || a.Hi != 3 || a.N != 3 {
		t.Errorf("odd: %+v", a)
	}
	a = aggregate([]float64{4, 1, 2, 3})
	if a.Med != 2.5 || a.N != 4 {
		t.Errorf("even: %+v", a)
	}
	if a := aggregate(nil); a.N != 0 || a.cell(1) != "—" {
		t.Errorf("empty: %+v %q", a, a.cell(1))
	}
	if got := aggregate([]float64{1.234, 2, 3}).cell(1); got != "2.0 (1.2–3.0)" {
		t.Errorf("cell = %q", got)
	}
}

func TestParseLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pgbench_log.1")
	// pgbench 15 format; a failed transaction has "failed" for its time.
	log := "0 0 512 0 1700000000 100\n1 0 1024 0 1700000000 200\n0 1 failed 0 1700000001 5\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	txns, err := readLogs(filepath.Join(dir, "pgbench_log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(txns) != 2 || txns[0] != (txn{End: 1700000000000100, Lat: 512}) || txns[1].Lat != 1024 {
		t.Fatalf("txns = %+v", txns)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("log not removed after reading: %v", err)
	}
	if err := os.WriteFile(path, []byte("0 0 12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readLogs(filepath.Join(dir, "pgbench_log")); err == nil {
		t.Error("no error for a short line")
	}
}

// TestMeasure: transactions every 1 ms for 5 s and a pooler that burns one
// tick per 10 ms sampled every 50 ms: the window leaves out the first
// second and the last 0.2 s, and CPU per transaction is exact.
func TestMeasure(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000)
	var txns []txn
	for i := int64(1); i <= 5000; i++ {
		txns = append(txns, txn{End: t0 + i*1000, Lat: i % 100})
	}
	var samples []sample
	for at := t0 - 500_000; at <= t0+5_500_000; at += 50_000 {
		samples = append(samples, sample{At: at, Ticks: (at - t0 + 500_000) / 10_000})
	}
	var r runResult
	if err := measure(&r, txns, samples, true, time.Second, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Window snaps to samples: [t0+1.001 s → t0+1.05 s, t0+4.8 s].
	if math.Abs(r.WindowS-3.75) > 1e-9 {
		t.Errorf("window = %v s, want 3.75", r.WindowS)
	}
	if r.Txns != 3750 || math.Abs(r.TPS-1000) > 1e-6 {
		t.Errorf("txns = %d, tps = %v", r.Txns, r.TPS)
	}
	// 1 tick (10 ms) per 10 ms, 1 txn per ms: 1,000 µs of CPU per txn.
	if math.Abs(r.CPUus-1000) > 1e-6 {
		t.Errorf("cpu = %v µs/txn, want 1000", r.CPUus)
	}
	if r.P50us != 49 && r.P50us != 50 {
		t.Errorf("p50 = %v", r.P50us)
	}

	// Direct PostgreSQL: no samples, the window is the raw one.
	var d runResult
	if err := measure(&d, txns, nil, false, time.Second, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(d.CPUus) && d.CPUus != 0 || d.Txns != 3799 {
		t.Errorf("direct: txns %d cpu %v", d.Txns, d.CPUus)
	}

	// Too short a run is an error, not a figure.
	if err := measure(&r, txns[:100], samples, true, time.Second, 200*time.Millisecond); err == nil {
		t.Error("no error for a run of 0.1 s")
	}
}

func TestReportSmoke(t *testing.T) {
	o := options{rounds: 2, duration: 2 * time.Second, scale: 1, idleClients: 10, oneProc: true}
	mk := func(w, tg string, round int, tps, cpu float64) runResult {
		return runResult{Workload: w, Target: tg, Round: round, OK: true, TPS: tps, P50us: 500, P99us: 2000, CPUus: cpu, PeakRSSKB: 10240, Txns: 100, WindowS: 1}
	}
	rs := []runResult{
		mk("S-ext-100", tDirect, 1, 3000, math.NaN()), mk("S-ext-100", tBouncer, 1, 1000, 50), mk("S-ext-100", tTurnstile, 1, 1100, 55),
		mk("S-ext-100", tDirect, 2, 3000, math.NaN()), mk("S-ext-100", tBouncer, 2, 2000, 50), mk("S-ext-100", tTurnstile, 2, 1800, 70),
		{Workload: "S-prep-10", Target: tBouncer, Round: 1, Err: `pgbench: exit status 2: ERROR: prepared statement "P_0" already exists`},
	}
	idle := []idleResult{
		{Target: tBouncer, Round: 1, OK: true, Clients: 10, BeforeKB: 1000, WithKB: 1010, PerClient: 1},
		{Target: tTurnstile, Round: 1, OK: true, Clients: 10, BeforeKB: 1000, WithKB: 1030, PerClient: 3},
	}
	in := info{Bouncer: "PgBouncer 1.18.0"}
	rep := report(o, in, workloads(), rs, idle)
	for _, want := range []string{
		"| select-only extended, 100 clients: TPS pgturnstile/PgBouncer ≥ 1.0 | 1.00 (0.90–1.10) | yes |",
		"pooler CPU µs/txn pgturnstile/PgBouncer ≤ 1.2 | 1.25 (1.10–1.40) | **no** |",
		"RSS per client at 10 clients, pgturnstile/PgBouncer ≤ 2.0 | 3.00 | **no** |",
		"0/1 ⚠ pgbench: exit status 2",
		"PgBouncer before 1.21",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q\n%s", want, rep)
		}
	}
	if s := summaryText(rep); strings.Contains(s, "Every run") || !strings.Contains(s, "## Targets") {
		t.Errorf("summary is not the tables part:\n%s", s)
	}
}
