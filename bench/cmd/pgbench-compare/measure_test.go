//go:build linux

package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
	"github.com/pgturnstile/pgturnstile/bench/internal/pgbrun"
)

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

func TestMeasure(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000)
	var txns []pgbrun.Txn
	for i := int64(1); i <= 5000; i++ {
		txns = append(txns, pgbrun.Txn{End: t0 + i*1000, Lat: i % 100})
	}
	var samples []pgbrun.Sample
	for at := t0 - 500_000; at <= t0+5_500_000; at += 50_000 {
		samples = append(samples, pgbrun.Sample{At: at, Ticks: (at - t0 + 500_000) / 10_000})
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
	rep := report(o, in, workloads(), rs, idle, nil)
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

// TestSummarizeOverload: attempts before the window, in it and running past
// its end; success and latency go by start, TPS by completion.
func TestSummarizeOverload(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	txns := []otxn{
		// Started before the window (warm = 1 s): left out of success and
		// latency; the first completes in the window and counts for TPS.
		{Start: ms(900), End: ms(1100), High: true},
		{Start: ms(500), End: ms(600), High: true, Out: outShed},
		// High in the window: 4 successes (20, 30, 40, 400 ms), 1 shed,
		// 1 other error.
		{Start: ms(1000), End: ms(1020), High: true},
		{Start: ms(1500), End: ms(1530), High: true},
		{Start: ms(2000), End: ms(2040), High: true},
		{Start: ms(2500), End: ms(2510), High: true, Out: outShed},
		{Start: ms(2600), End: ms(2700), High: true, Out: outOther},
		// Started in the window, completed after its end (3 s): its
		// latency counts, its completion does not.
		{Start: ms(2900), End: ms(3300), High: true},
		// Low: 2 completions in the window, 3 sheds, 1 other error, and a
		// shed that started after the end.
		{Start: ms(1100), End: ms(1120)},
		{Start: ms(1200), End: ms(1220)},
		{Start: ms(1300), End: ms(1305), Out: outShed},
		{Start: ms(1400), End: ms(1405), Out: outShed},
		{Start: ms(1500), End: ms(1505), Out: outShed},
		{Start: ms(1600), End: ms(1601), Out: outOther},
		{Start: ms(3000), End: ms(3005), Out: outShed},
	}
	var r overloadResult
	if err := summarizeOverload(&r, txns, time.Second, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if r.WindowS != 2 {
		t.Errorf("window = %v s, want 2", r.WindowS)
	}
	if r.HighTxns != 6 || r.HighOK != 4 || r.HighShed != 1 {
		t.Errorf("high: %d attempts, %d ok, %d shed; want 6, 4, 1", r.HighTxns, r.HighOK, r.HighShed)
	}
	if got := r.highSuccessPct(); math.Abs(got-400.0/6) > 1e-9 {
		t.Errorf("high success = %v %%, want 66.67", got)
	}
	if r.LowTxns != 6 || r.LowShed != 3 || r.OtherErrs != 2 {
		t.Errorf("low: %d attempts, %d shed, %d other errors; want 6, 3, 2", r.LowTxns, r.LowShed, r.OtherErrs)
	}
	// Nearest rank of 20, 30, 40, 400 ms: p50 = 2nd, p99 = 4th.
	if r.HighP50us != 30_000 || r.HighP99us != 400_000 {
		t.Errorf("high p50 %v µs, p99 %v µs; want 30000, 400000", r.HighP50us, r.HighP99us)
	}
	// High completions in [1 s, 3 s): 1.1, 1.02, 1.53, 2.04 → 4 in 2 s.
	if r.HighTPS != 2 || r.LowTPS != 1 || r.totalTPS() != 3 {
		t.Errorf("tps high %v low %v total %v; want 2, 1, 3", r.HighTPS, r.LowTPS, r.totalTPS())
	}

	// All high attempts shed: a result (0 %), with no latency.
	var s overloadResult
	if err := summarizeOverload(&s, []otxn{{Start: ms(1500), End: ms(1600), High: true, Out: outShed}}, time.Second, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if s.highSuccessPct() != 0 || !math.IsNaN(s.HighP50us) || !math.IsNaN(s.HighP99us) {
		t.Errorf("all shed: success %v, p50 %v, p99 %v", s.highSuccessPct(), s.HighP50us, s.HighP99us)
	}
	// No high attempt in the window, or no window: an error.
	if err := summarizeOverload(&overloadResult{}, txns[8:], time.Second, 3*time.Second); err == nil {
		t.Error("no error without high-priority attempts")
	}
	if err := summarizeOverload(&overloadResult{}, txns, time.Second, time.Second+50*time.Millisecond); err == nil {
		t.Error("no error for a 50 ms window")
	}
}

func TestOverloadReport(t *testing.T) {
	o := options{rounds: 3, overloadDur: 8 * time.Second}
	mk := func(tg string, round int, p50, p99, high, low float64) overloadResult {
		busy := math.NaN() // PgBouncer has no gate
		if tg == tTurnstile {
			busy = 0.9 + 0.01*float64(round)
		}
		return overloadResult{Target: tg, Round: round, OK: true, WindowS: 7, HighTxns: 100, HighOK: 99, HighShed: 1,
			HighP50us: p50 * 1000, HighP99us: p99 * 1000, HighTPS: high, LowTPS: low, LowShed: 500 * round, LowTxns: 1000, Busy: busy}
	}
	over := []overloadResult{
		mk(tBouncer, 1, 360, 400, 11, 170), mk(tTurnstile, 1, 36, 80, 150, 40),
		mk(tTurnstile, 2, 24, 40, 160, 30), mk(tBouncer, 2, 400, 500, 10, 180),
		mk(tBouncer, 3, 300, 400, 12, 170),
		{Target: tTurnstile, Round: 3, Err: "logins: 68 of 68 failed; first: boom", HighP50us: math.NaN(), HighP99us: math.NaN()},
	}
	sec := overloadSection(o, over)
	for _, want := range []string{
		"## Overload (admission control)",
		"3 rounds of 8s per pooler",
		"from 1s after the start",
		"≈ 320 ms",
		"| pgbouncer | 99.0 (99.0–99.0) | 360.0 (300.0–400.0) | 400.0 (400.0–500.0) | 11 (10–12) | 170 (170–180) | 1000 (500–1500) | — | 0 (0–0) | 3/3 |",
		"| pgturnstile | 99.0 (99.0–99.0) | 30.0 (24.0–36.0) | 60.0 (40.0–80.0) | 155 (150–160) | 35 (30–40) | 750 (500–1000) | 0.915 (0.910–0.920) | 0 (0–0) | 2/3 ⚠ logins: 68 of 68 failed; first: boom |",
		// Round 1: 36/360, 80/400, 40/170; round 2: 24/400, 40/500, 30/180.
		"| ratio within each round, median (min–max) | 0.080 (0.060–0.100) | 0.140 (0.080–0.200) | 0.20 (0.17–0.24) |",
		// pgturnstile's rounds 1 and 2: 99 %, p99 80 and 40 ms.
		"| high-priority success % | ≥ 99.9 | 99.00 (99.00–99.00) | **no** |",
		"| high-priority p99 ms | ≤ 10 | 60.00 (40.00–80.00) | **no** |",
		"| low-priority TPS ÷ PgBouncer's (no policy), pair by pair | ≥ 0.70 | 0.20 (0.17–0.24) | **no** |",
		"| pool busy fraction (the gate's accounting) | ≥ 0.90 | 0.92 (0.91–0.92) | yes |",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("overload section lacks %q\n%s", want, sec)
		}
	}
	rep := report(o, info{}, nil, nil, nil, over)
	if !strings.Contains(summaryText(rep), "## Overload (admission control)") {
		t.Error("the overload section is not in the printed summary")
	}
	if !strings.Contains(rep, "- overload, round 3, pgturnstile: logins: 68 of 68 failed") {
		t.Errorf("failed overload run not listed:\n%s", rep)
	}
	if !strings.Contains(rep, "| 2 | pgbouncer | 100 | 99.00 | 1 | 400.0 | 500.0 | 10.0 | 1000 | 180.0 | 1000 | — | 0 | 0 | 7.00 |") {
		t.Errorf("raw overload row missing:\n%s", rep)
	}
	if rep := report(o, info{}, nil, nil, nil, nil); strings.Contains(rep, "Overload") {
		t.Error("overload section without overload runs")
	}
}

// TestOverloadIssue16Verdicts: issue 16's criteria are met when
// pgturnstile's medians are within their bounds, the goodput ratio taken
// round by round against PgBouncer.
func TestOverloadIssue16Verdicts(t *testing.T) {
	o := options{rounds: 2, overloadDur: 8 * time.Second}
	mk := func(tg string, round, ok int, p99, low float64) overloadResult {
		return overloadResult{Target: tg, Round: round, OK: true, WindowS: 7, HighTxns: 10000, HighOK: ok,
			HighP50us: 300, HighP99us: p99 * 1000, HighTPS: 9000, LowTPS: low, Busy: 0.95}
	}
	sec := overloadSection(o, []overloadResult{
		mk(tBouncer, 1, 10000, 330, 190), mk(tTurnstile, 1, 9995, 4.2, 150),
		mk(tTurnstile, 2, 10000, 3.8, 140), mk(tBouncer, 2, 10000, 340, 200),
	})
	for _, want := range []string{
		"| high-priority success % | ≥ 99.9 | 99.97 (99.95–100.00) | yes |",
		"| high-priority p99 ms | ≤ 10 | 4.00 (3.80–4.20) | yes |",
		// 150/190 = 0.79, 140/200 = 0.70.
		"| low-priority TPS ÷ PgBouncer's (no policy), pair by pair | ≥ 0.70 | 0.74 (0.70–0.79) | yes |",
		"| pool busy fraction (the gate's accounting) | ≥ 0.90 | 0.95 (0.95–0.95) | yes |",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("overload section lacks %q\n%s", want, sec)
		}
	}
}

// TestParseBusy: the gate's integrals are summed over the series of
// /metrics, other lines ignored; none at all is an error.
func TestParseBusy(t *testing.T) {
	text := `# TYPE pgturnstile_admission_in_use_seconds_total counter
pgturnstile_admission_in_use_seconds_total{database="bench",user="bench"} 54.5
pgturnstile_admission_in_use_seconds_total{database="other",user="bench"} 0.5
pgturnstile_admission_busy_ratio{database="bench",user="bench"} 0.9
pgturnstile_admission_capacity_seconds_total{database="bench",user="bench"} 60
pgturnstile_admission_capacity_seconds_total{database="other",user="bench"} 4
`
	g, err := parseBusy(text)
	if err != nil {
		t.Fatal(err)
	}
	if g.inUseS != 55 || g.capacityS != 64 {
		t.Errorf("in use %v s, capacity %v s; want 55 and 64", g.inUseS, g.capacityS)
	}
	if _, err := parseBusy("go_goroutines 12\n"); err == nil {
		t.Error("no error without the gate's counters")
	}
}

// TestPoolerINI: the overload poolers' ini differs from the others only in
// the pool size and, for pgturnstile, the admission policy.
func TestPoolerINI(t *testing.T) {
	e := &env{Env: &benchenv.Env{Dir: t.TempDir(), PGPort: 5432}}
	ini, err := e.poolerINI(6432, iniOpts{PoolSize: overloadPoolSize, Extra: "admission_file = /x/admission.toml\n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\ndefault_pool_size = 4\n", "\npool_mode = transaction\n", "\nlisten_port = 6432\n", "\nadmission_file = /x/admission.toml\n"} {
		if !strings.Contains(ini, want) {
			t.Errorf("ini lacks %q:\n%s", want, ini)
		}
	}
	if strings.Count(ini, "default_pool_size") != 1 {
		t.Errorf("default_pool_size set more than once:\n%s", ini)
	}
	ini, err = e.poolerINI(6433, iniOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ini, "\ndefault_pool_size = 20\n") || strings.Contains(ini, "admission_file") {
		t.Errorf("default ini:\n%s", ini)
	}
}

// TestNoiseReport: an A/A report gives B/A pair by pair, judges PgBouncer
// against itself by issue 6's criteria, and lists every round's p99 ratio.
func TestNoiseReport(t *testing.T) {
	o := options{rounds: 3, targetRounds: 3, duration: 4 * time.Second, aa: true}
	mk := func(w, tg string, round int, tps, p99ms float64) runResult {
		return runResult{Workload: w, Target: tg, Round: round, OK: true, TPS: tps, P50us: 40000, P99us: p99ms * 1000, CPUus: 40, Txns: 100, WindowS: 1}
	}
	rs := []runResult{
		mk("S-ext-500", tBouncer, 1, 10000, 100), mk("S-ext-500", tBouncerB, 1, 9000, 110),
		mk("S-ext-500", tBouncerB, 2, 10000, 90), mk("S-ext-500", tBouncer, 2, 10000, 100),
		mk("S-ext-500", tBouncer, 3, 10000, 100), {Workload: "S-ext-500", Target: tBouncerB, Round: 3, Err: "pgbench: exit status 1"},
	}
	var ws []workload
	for _, w := range workloads() {
		if targetWorkloads[w.Key] {
			ws = append(ws, w)
		}
	}
	rep := noiseReport(o, info{Bouncer: "PgBouncer 1.18.0"}, ws, rs)
	for _, want := range []string{
		"| S-ext-500: p99 ≤ 1.0 | 1.00 (0.90–1.10) | yes |",
		"| S-simple-500: p99 ≤ 1.0 | — | n/a |",
		"| select-only -M extended, 500 clients | 0.95 (0.90–1.00) | 1.00 (1.00–1.00) | 1.00 (1.00–1.00) | 1.00 (0.90–1.10) | 1.10, 0.90, — |",
		"| select-only -M extended, 500 clients | pgbouncer B | 9500 (9000–10000) |",
		"2/3 ⚠ pgbench: exit status 1",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q\n%s", want, rep)
		}
	}
	if strings.Contains(rep, "| "+tTurnstile+" |") {
		t.Errorf("an A/A report has a pgturnstile row:\n%s", rep)
	}
}
