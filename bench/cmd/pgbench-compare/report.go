//go:build linux

package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// agg is the median, min and max of a set of per-round figures.
type agg struct {
	Med, Lo, Hi float64
	N           int
}

func aggregate(xs []float64) agg {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return agg{Med: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	}
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return agg{Med: m, Lo: v[0], Hi: v[len(v)-1], N: len(v)}
}

// cell formats an agg as "median (min–max)", with prec decimals.
func (a agg) cell(prec int) string {
	if a.N == 0 {
		return "—"
	}
	if a.N == 1 {
		return fmtF(a.Med, prec)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtF(a.Med, prec), fmtF(a.Lo, prec), fmtF(a.Hi, prec))
}

func fmtF(x float64, prec int) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

func fmtKB(kb int64) string {
	if kb <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

type resultKey struct {
	workload, target string
	round            int
}

// table indexes results by workload, target and round.
type table map[resultKey]runResult

// index indexes results by workload, target and round. A target that got a
// server error in any round of a workload (PgBouncer 1.18 with -M prepared,
// which only gets through when no client happens to land on a server that
// another client already prepared on) is left out of that workload's figures
// altogether: it does not work, and a lucky round is no comparison.
func index(rs []runResult) table {
	t := table{}
	broken := map[[2]string]bool{}
	for _, r := range rs {
		if !r.OK && strings.Contains(r.Err, "ERROR:") {
			broken[[2]string{r.Workload, r.Target}] = true
		}
	}
	for _, r := range rs {
		if r.OK && broken[[2]string{r.Workload, r.Target}] {
			r.OK = false
			r.Err = "left out: other rounds failed with a server error"
		}
		t[resultKey{r.Workload, r.Target, r.Round}] = r
	}
	return t
}

// perTarget collects field f of the OK runs of (workload, target).
func (t table) perTarget(w, tgt string, rounds int, f func(runResult) float64) agg {
	var xs []float64
	for i := 1; i <= rounds; i++ {
		if r, ok := t[resultKey{w, tgt, i}]; ok && r.OK {
			xs = append(xs, f(r))
		}
	}
	return aggregate(xs)
}

// pairs applies f to the runs of a and b in the same round (both OK), and
// aggregates over rounds: the noise of one round hits both alike.
func (t table) pairs(w, a, b string, rounds int, f func(x, y runResult) float64) agg {
	var xs []float64
	for i := 1; i <= rounds; i++ {
		x, ok1 := t[resultKey{w, a, i}]
		y, ok2 := t[resultKey{w, b, i}]
		if ok1 && ok2 && x.OK && y.OK {
			xs = append(xs, f(x, y))
		}
	}
	return aggregate(xs)
}

func (t table) runs(w, tgt string, rounds int) (ok, all int, firstErr string) {
	for i := 1; i <= rounds; i++ {
		if r, found := t[resultKey{w, tgt, i}]; found {
			all++
			if r.OK {
				ok++
			} else if firstErr == "" {
				firstErr = r.Err
			}
		}
	}
	return
}

var (
	fTPS = func(r runResult) float64 { return r.TPS }
	fP50 = func(r runResult) float64 { return r.P50us / 1000 }
	fP99 = func(r runResult) float64 { return r.P99us / 1000 }
	fCPU = func(r runResult) float64 { return r.CPUus }
	fRSS = func(r runResult) float64 {
		if r.PeakRSSKB <= 0 {
			return math.NaN()
		}
		return float64(r.PeakRSSKB) / 1024
	}
	ratio = func(f func(runResult) float64) func(x, y runResult) float64 {
		return func(x, y runResult) float64 { return f(x) / f(y) }
	}
)

const startMarker = "<!-- tables -->"
const rawMarker = "<!-- raw -->"

func report(o options, in info, ws []workload, rs []runResult, idle []idleResult, over []overloadResult) string {
	t := index(rs)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# Benchmarks\n\n")
	p("pgturnstile side by side with PgBouncer, and PostgreSQL directly as the reference. ")
	p("Written by `make bench` (`bench/cmd/pgbench-compare`); how it measures and how to read it: [bench/README.md](bench/README.md).\n\n")
	if o.quick {
		p("> **QUICK run** (`make bench QUICK=1`): a smoke test with short runs on a small data set. Do not quote these figures; run `make bench`.\n\n")
	}
	p("- **Date:** %s\n", in.Date)
	p("- **Machine:** %s CPUs (`nproc`), %s, %s RAM, %s. Everything (PostgreSQL, the poolers, pgbench) runs on this one machine, which is shared and noisy.\n", in.Nproc, in.CPU, in.Mem, in.Kernel)
	p("- **Versions:** %s; %s; %s; %s; %s.\n", in.Turnstile, in.Bouncer, in.Postgres, in.Pgbench, in.Go)
	p("- **Command:** %s; wall time %s.\n", commandLine(in), in.Elapsed.Round(1e9))
	p("- **Setup:** PostgreSQL %s; `pgbench -i -s %d`. Both poolers: `pool_mode = transaction`, `default_pool_size = 20`, `max_client_conn = 6000`, `auth_type = scram-sha-256` with the password in `auth_file` (also used to log in to PostgreSQL with SCRAM), `log_connections = 0`, `log_disconnections = 0`; pgbench with `PGSSLMODE=disable`, `-j 2`. The connect-per-transaction workloads other than the plain-password one run on a fresh PgBouncer and pgturnstile each, configured as production is: the role's secret from `pg_authid` in the userlist (SCRAM, or md5 with `auth_type = md5` for a role whose password PostgreSQL stores as md5), and over TLS `client_tls_sslmode = require` with a self-signed ECDSA P-256 or RSA-2048 certificate (pgbench with `PGSSLMODE=require`). Open-files limit raised to %d.\n",
		in.PostgresConf, o.scale, in.Nofile)
	if extra := iniExtra(o.poolerINI); extra != "" {
		p("- **pgturnstile's ini also has** (`-pgturnstile-ini`): `%s`.\n", strings.ReplaceAll(strings.TrimSpace(extra), "\n", "`, `"))
	}
	p("- **Runs:** %d rounds per workload (%d for the target workloads S-ext-100, S-simple-500 and S-ext-500), `pgbench -T %d` (%s at 500 clients and %s for the judged connect-per-transaction workloads S-connect-50 and S-connect-tls-ecdsa-20; plus, for logging in, 1 s at 100 clients, 3 s at 500, and for direct PostgreSQL 2 s at 50 and 4 s at 100), targets interleaved (round 1: %s; round 2 the reverse; …); a target that fails round 1 of a workload with a server error is not run again in it, and one with a server error in any round is left out of that workload's figures. Figures are over each run's steady window (from 1 s after the first transaction to 0.2 s before the last); cells are *median (min–max)* over rounds.\n",
		o.rounds, max(o.rounds, o.targetRounds), int(o.duration.Seconds()), o.durationOf(workload{Clients: 500}), o.durationOf(workload{Key: "S-connect-50"}), targetList(o))
	var loads []float64
	retries := 0
	for _, r := range rs {
		if r.Load > 0 { // 0: a skipped run
			loads = append(loads, r.Load)
		}
		if r.Retried != "" {
			retries++
		}
	}
	p("- **Machine load:** 1-minute load average %s at the start, %s at the end, %s (median; min–max in brackets) at the starts of the runs, on %s CPUs.", fmtF(in.LoadStart, 1), fmtF(in.LoadEnd, 1), aggregate(loads).cell(1), in.Nproc)
	if retries > 0 {
		p(" %d runs left too little to measure (pgbench's -T ran out while its clients logged in) and were run again with a longer -T.", retries)
	}
	p("\n")
	if !o.direct500 {
		p("- **Direct PostgreSQL at 500 clients is not run:** 500 backends on this 2-core machine took longer to log in than a run lasts (no transaction within 13 s in trials); `-direct-500` runs it.\n")
	}
	p("- **Noise floor:** `make bench AA=1` measures PgBouncer against a second PgBouncer by this same method; its ratios ([bench/NOISE-FLOOR.md](bench/NOISE-FLOOR.md)) show how far noise alone moves the ratios below.\n")
	for _, n := range in.Notes {
		p("- **Note:** %s\n", n)
	}
	p("\n%s\n\n", startMarker)

	// Verdict against the issues' "Done when".
	p("## Targets (issues 6, 22 and 34, \"Done when\")\n\n")
	p("| Criterion | Figure (median of pair-by-pair ratios, min–max) | Met |\n|---|---|---|\n")
	for _, c := range pooledCriteria(t, o, tTurnstile, tBouncer, []string{"simple", "ext", "prep"}) {
		p("| %s pgturnstile/PgBouncer %s | %s | %s |\n", c.what, c.bound, c.fig.cell(2), c.verdict("**no**"))
	}
	idleC := criterion{what: fmt.Sprintf("idle: RSS per client at %d clients,", o.idleClients), bound: "≤ 2.0", fig: idleRatio(idle), meets: func(x float64) bool { return x <= 2.0 }}
	p("| %s pgturnstile/PgBouncer %s | %s | %s |\n", idleC.what, idleC.bound, idleC.fig.cell(2), idleC.verdict("**no**"))
	for _, c := range loginCriteria(t, o) {
		if c.meets == nil {
			// Figures beside the judged ones (issue 22): no bound.
			p("| issue 22: %s pgturnstile/PgBouncer (informational) | %s | — |\n", c.what, c.fig.cell(2))
			continue
		}
		p("| issue 22: %s pgturnstile/PgBouncer %s | %s | %s |\n", c.what, c.bound, c.fig.cell(2), c.verdict("**no**"))
	}
	for _, c := range shardCriteria(t, o) {
		p("| issue 34: %s %s | %s | %s |\n", c.what, c.bound, c.fig.cell(2), c.verdict("**no**"))
	}
	p("\n")

	p("## pgturnstile / PgBouncer, pair by pair\n\n")
	p("Each cell: the ratio within each round, then median (min–max) over rounds. TPS above 1 and the other columns below 1 favour pgturnstile. ")
	p("With `-C` (reconnect per transaction) one transaction is one connection, so pooler CPU µs/txn is pooler CPU µs per connection: login, one transaction and logout.\n\n")
	if o.oneProc {
		p("| Workload | TPS | Pooler CPU µs/txn (-C: per connection) | p50 | p99 | TPS, GOMAXPROCS=1 | CPU µs/txn, GOMAXPROCS=1 |\n|---|---|---|---|---|---|---|\n")
	} else {
		p("| Workload | TPS | Pooler CPU µs/txn (-C: per connection) | p50 | p99 |\n|---|---|---|---|---|\n")
	}
	for _, w := range ws {
		p("| %s | %s | %s | %s | %s |", w.Name,
			t.pairs(w.Key, tTurnstile, tBouncer, o.roundsOf(w.Key), ratio(fTPS)).cell(2),
			t.pairs(w.Key, tTurnstile, tBouncer, o.roundsOf(w.Key), ratio(fCPU)).cell(2),
			t.pairs(w.Key, tTurnstile, tBouncer, o.roundsOf(w.Key), ratio(fP50)).cell(2),
			t.pairs(w.Key, tTurnstile, tBouncer, o.roundsOf(w.Key), ratio(fP99)).cell(2))
		if o.oneProc {
			p(" %s | %s |", t.pairs(w.Key, tTurnOne, tBouncer, o.roundsOf(w.Key), ratio(fTPS)).cell(2),
				t.pairs(w.Key, tTurnOne, tBouncer, o.roundsOf(w.Key), ratio(fCPU)).cell(2))
		}
		p("\n")
	}
	p("\n")

	b.WriteString(loginSection(t, o, ws))
	b.WriteString(shardSection(t, o, ws))

	p("## Results per target\n\n")
	p("TPS and latency as pgbench sees them; *pooler CPU* is the pooler process's utime+stime over the window ÷ transactions in it; *peak RSS* is the pooler's VmHWM during the run.\n\n")
	// The sharding router's workloads have their own (shardSection).
	unsharded := slices.DeleteFunc(slices.Clone(ws), func(w workload) bool { return w.Shards > 0 })
	b.WriteString(perTargetTable(t, o, unsharded, []string{tDirect, tBouncer, tTurnstile, tTurnOne}))
	p("\n")

	if slices.ContainsFunc(ws, func(w workload) bool { return w.Key == "S-simple-1" }) {
		p("## Added latency, 1 client (`-S`, simple protocol)\n\n")
		p("Pooler minus direct PostgreSQL in the same round, µs.\n\n")
		p("| Target | p50 added µs | p99 added µs |\n|---|---|---|\n")
		for _, tg := range []string{tBouncer, tTurnstile, tTurnOne} {
			d50 := t.pairs("S-simple-1", tg, tDirect, o.roundsOf("S-simple-1"), func(x, y runResult) float64 { return x.P50us - y.P50us })
			d99 := t.pairs("S-simple-1", tg, tDirect, o.roundsOf("S-simple-1"), func(x, y runResult) float64 { return x.P99us - y.P99us })
			p("| %s | %s | %s |\n", tg, d50.cell(0), d99.cell(0))
		}
		p("\n")
	}

	if len(idle) > 0 {
		p("## Idle client connections\n\n")
		p("A fresh instance of each pooler per round; one client logs in and runs a query, then RSS is read (*before*); then %d more clients log in with SCRAM and stay idle, and RSS is read again 3 s later (*with*). Per client = (with − before) ÷ clients, split into its anonymous part (RssAnon: heap and stacks, what the clients hold) and its file-backed part (RssFile: pages of the executable run for the first time by the logins, held by no client).\n\n", o.idleClients)
		p("| Pooler | Clients | RSS before MiB | RSS with MiB | KiB per client | of which anonymous | of which file-backed | Logins took s | Rounds OK |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, tg := range []string{tBouncer, tTurnstile} {
			var bf, wi, pc, an, fi, cs []float64
			ok, all, ferr := 0, 0, ""
			for _, r := range idle {
				if r.Target != tg {
					continue
				}
				all++
				if !r.OK {
					if ferr == "" {
						ferr = r.Err
					}
					continue
				}
				ok++
				bf = append(bf, float64(r.BeforeKB)/1024)
				wi = append(wi, float64(r.WithKB)/1024)
				pc = append(pc, r.PerClient)
				an = append(an, r.AnonPerClient)
				fi = append(fi, r.FilePerClient)
				cs = append(cs, r.ConnectS)
			}
			runs := fmt.Sprintf("%d/%d", ok, all)
			if ferr != "" {
				runs += " ⚠ " + shorten(ferr, 140)
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", tg, o.idleClients, aggregate(bf).cell(1), aggregate(wi).cell(1),
				aggregate(pc).cell(1), aggregate(an).cell(2), aggregate(fi).cell(2), aggregate(cs).cell(1), mdEscape(runs))
		}
		p("\n")
	}

	if len(over) > 0 {
		b.WriteString(overloadSection(o, over))
	}

	// Failures, in full.
	var fails []string
	for _, r := range rs {
		if !r.OK {
			fails = append(fails, fmt.Sprintf("- %s, round %d, %s: %s", r.Workload, r.Round, r.Target, mdEscape(shorten(r.Err, 400))))
		}
	}
	for _, r := range idle {
		if !r.OK {
			fails = append(fails, fmt.Sprintf("- idle, round %d, %s: %s", r.Round, r.Target, mdEscape(shorten(r.Err, 400))))
		}
	}
	for _, r := range over {
		if !r.OK {
			fails = append(fails, fmt.Sprintf("- %s, round %d, %s: %s", overloadKey, r.Round, r.Target, mdEscape(shorten(r.Err, 400))))
		}
	}
	if len(fails) > 0 {
		p("## Failed runs\n\n%s\n\n", strings.Join(fails, "\n"))
		if slices.ContainsFunc(rs, func(r runResult) bool {
			return !r.OK && r.Target == tBouncer && strings.HasPrefix(r.Workload, "S-prep")
		}) && strings.Contains(in.Bouncer, "1.18") {
			p("PgBouncer before 1.21 does not support protocol-level prepared statements in transaction mode (`max_prepared_statements` came in 1.21), so `-M prepared` through it fails by design; pgturnstile supports them.\n\n")
		}
	}
	p("%s\n\n", rawMarker)

	p("<details><summary>Every run</summary>\n\n")
	b.WriteString(runsTable(rs))
	if len(idle) > 0 {
		p("\n| Idle round | Pooler | Clients | RSS before KiB | RSS with KiB | KiB per client | Logins s | Error |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range idle {
			p("| %d | %s | %d | %d | %d | %.1f | %.1f | %s |\n", r.Round, r.Target, r.Clients, r.BeforeKB, r.WithKB, r.PerClient, r.ConnectS, mdEscape(shorten(r.Err, 200)))
		}
	}
	if len(over) > 0 {
		p("\n| Overload round | Target | High attempts | High OK %% | High shed | High p50 ms | High p99 ms | High TPS | Low attempts | Low TPS | Low shed | Busy | Other errors | Reconnects | Window s | Logins ms | Load | Note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range over {
			note := r.FirstOther
			if !r.OK {
				note = r.Err
				p("| %d | %s | | | | | | | | | | | | | | %d | %s | %s |\n", r.Round, r.Target, r.LoginMs, fmtF(r.Load, 1), mdEscape(shorten(note, 200)))
				continue
			}
			p("| %d | %s | %d | %s | %d | %s | %s | %.1f | %d | %.1f | %d | %s | %d | %d | %.2f | %d | %s | %s |\n", r.Round, r.Target,
				r.HighTxns, fmtF(r.highSuccessPct(), 2), r.HighShed, fmtF(r.HighP50us/1000, 1), fmtF(r.HighP99us/1000, 1), r.HighTPS,
				r.LowTxns, r.LowTPS, r.LowShed, fmtF(r.Busy, 3), r.OtherErrs, r.Reconnects, r.WindowS, r.LoginMs, fmtF(r.Load, 1), mdEscape(shorten(note, 200)))
		}
	}
	p("\n</details>\n")
	return b.String()
}

// criterion is one of issue 6's thresholds on a ratio of medians.
type criterion struct {
	what, bound string // "S-ext-500: p99", "≤ 1.0"
	fig         agg
	meets       func(float64) bool
}

// verdict is "yes", no (as given) or "n/a" when nothing was measured.
func (c criterion) verdict(no string) string {
	switch {
	case c.fig.N == 0:
		return "n/a"
	case c.meets(c.fig.Med):
		return "yes"
	}
	return no
}

// pooledCriteria are issue 6's criteria on the pgbench runs, a's figures
// over b's pair by pair: TPS and CPU at 100 clients (extended), and p99 at
// 500 clients for each protocol in p99Modes ("simple", "ext", "prep").
func pooledCriteria(t table, o options, a, b string, p99Modes []string) []criterion {
	n := o.roundsOf("S-ext-100")
	cs := []criterion{
		{what: "select-only extended, 100 clients: TPS", bound: "≥ 1.0", fig: t.pairs("S-ext-100", a, b, n, ratio(fTPS)), meets: func(x float64) bool { return x >= 1.0 }},
		{what: "select-only extended, 100 clients: pooler CPU µs/txn", bound: "≤ 1.2", fig: t.pairs("S-ext-100", a, b, n, ratio(fCPU)), meets: func(x float64) bool { return x <= 1.2 }},
	}
	for _, m := range p99Modes {
		w := "S-" + m + "-500"
		cs = append(cs, criterion{what: w + ": p99", bound: "≤ 1.0", fig: t.pairs(w, a, b, o.roundsOf(w), ratio(fP99)), meets: func(x float64) bool { return x <= 1.0 }})
	}
	return cs
}

// commandLine is the command that made the report, and what make ran.
func commandLine(in info) string {
	if in.Command != in.Argv {
		return fmt.Sprintf("`%s` (runs `%s`)", in.Command, in.Argv)
	}
	return fmt.Sprintf("`%s`", in.Command)
}

// perTargetTable is one row per workload and target that ran: each
// figure's median (min–max) over rounds, and the runs that failed.
func perTargetTable(t table, o options, ws []workload, targets []string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("| Workload | Target | TPS | p50 ms | p99 ms | Pooler CPU µs/txn | Peak RSS MiB | Runs OK |\n|---|---|---|---|---|---|---|---|\n")
	for _, w := range ws {
		n := o.roundsOf(w.Key)
		for _, tg := range targets {
			ok, all, ferr := t.runs(w.Key, tg, n)
			if all == 0 {
				continue
			}
			runs := fmt.Sprintf("%d/%d", ok, all)
			if ok < all {
				runs += " ⚠ " + shorten(ferr, 140)
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", w.Name, tg,
				t.perTarget(w.Key, tg, n, fTPS).cell(0),
				t.perTarget(w.Key, tg, n, fP50).cell(3),
				t.perTarget(w.Key, tg, n, fP99).cell(3),
				t.perTarget(w.Key, tg, n, fCPU).cell(1),
				t.perTarget(w.Key, tg, n, fRSS).cell(1),
				mdEscape(runs))
		}
	}
	return b.String()
}

// runsTable is the table of every pgbench run, in the order they ran.
func runsTable(rs []runResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("| Workload | Round | Target | TPS | p50 ms | p99 ms | CPU µs/txn | Peak RSS MiB | Txns in window | Window s | Logins ms | Load | Note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		note := r.Retried
		if !r.OK {
			note = r.Err
		}
		if r.OK {
			p("| %s | %d | %s | %.0f | %.3f | %.3f | %s | %s | %d | %.2f | %d | %s | %s |\n", r.Workload, r.Round, r.Target, r.TPS,
				r.P50us/1000, r.P99us/1000, fmtF(r.CPUus, 1), fmtF(fRSS(r), 1), r.Txns, r.WindowS, r.ConnectMs, fmtF(r.Load, 1), mdEscape(shorten(note, 200)))
		} else {
			p("| %s | %d | %s | | | | | | | | %d | %s | %s |\n", r.Workload, r.Round, r.Target, r.ConnectMs, fmtF(r.Load, 1), mdEscape(shorten(note, 200)))
		}
	}
	return b.String()
}

func idleRatio(idle []idleResult) agg {
	var xs []float64
	rounds := map[int][2]float64{}
	for _, r := range idle {
		if !r.OK {
			continue
		}
		v := rounds[r.Round]
		switch r.Target {
		case tTurnstile:
			v[0] = r.PerClient
		case tBouncer:
			v[1] = r.PerClient
		}
		rounds[r.Round] = v
	}
	for _, v := range rounds {
		if v[0] > 0 && v[1] > 0 {
			xs = append(xs, v[0]/v[1])
		}
	}
	return aggregate(xs)
}

func shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func mdEscape(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// summaryText is the report between the markers: what goes to stdout.
func summaryText(rep string) string {
	i := strings.Index(rep, startMarker)
	j := strings.Index(rep, rawMarker)
	if i < 0 || j < i {
		return rep
	}
	return strings.TrimSpace(rep[i+len(startMarker):j]) + "\n"
}

func targetList(o options) string {
	s := "direct PostgreSQL, PgBouncer, pgturnstile"
	if o.oneProc {
		s += ", pgturnstile with GOMAXPROCS=1"
	}
	return s
}

// overloadSection is the report's section on the overload scenario: per
// target, then pgturnstile/PgBouncer pair by pair.
func overloadSection(o options, over []overloadResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	warm := min(time.Second, o.overloadDur/4)
	p("## Overload (admission control)\n\n")
	p("A fresh PgBouncer and pgturnstile, each with `default_pool_size = 4` (otherwise the ini above); pgturnstile also gets a PGKeeper-style `admission_file` (issue 16's): the tiers `high, low`, default `high`, `short_timeout = \"5ms\"`, `long_timeout = \"100ms\"`, and one rule: `application_name = \"batch-*\"` → `low`. ")
	p("Through each, %d low-priority clients (`application_name=batch-N`) run `%s` and %d high-priority ones (`application_name=web`) run `%s`, back to back on their own connection (pgx, simple protocol): ", overloadLow, overloadLowSQL, overloadHigh, overloadHighSQL)
	p("the flood alone is about three times the %d transactions/s that %d server connections can serve, and the high-priority clients need about one of them. A client whose transaction is shed (SQLSTATE 53000) or fails waits a random 10–50 ms and goes on. ", overloadPoolSize*50, overloadPoolSize)
	p("%d %s of %s per pooler, interleaved; figures over the window from %s after the start to the end: success and latency of the attempts that started in it (latency measured by the client around each statement, successful ones only), TPS of the transactions that completed in it. Cells are *median (min–max)* over rounds.\n\n",
		o.rounds, plural(o.rounds, "round", "rounds"), o.overloadDur, warm)
	p("How to read it: PgBouncer has no priorities, so a high-priority statement queues behind the flood, first come first served (about %d ÷ %d × 20 ms ≈ %d ms); with admission control pgturnstile should serve it at once and shed low-priority work instead, ",
		overloadLow, overloadPoolSize, overloadLow*20/overloadPoolSize)
	p("while the low-priority clients still get the slots high priority does not need: their TPS (goodput) should stay near PgBouncer's, which serves them with no policy. Issue 16 asks for high success ≥ 99.9 %%, high p99 ≤ 10 ms and low-priority goodput ≥ 70 %% of what it gets without a policy (here: PgBouncer's, in the same round).\n\n")
	p("*Busy* is pgturnstile's own accounting of the pool over the window: the growth of its admission gate's in-use slot-seconds over that of its capacity slot-seconds (`pgturnstile_admission_in_use_seconds_total` and `_capacity_seconds_total`, read at both ends); PgBouncer has none.\n\n")
	p("| Target | High success %% | High p50 ms | High p99 ms | High TPS | Low TPS | Low shed (53000) | Busy | Other errors | Runs OK |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, tg := range []string{tBouncer, tTurnstile} {
		per := func(f func(overloadResult) float64) agg { return overloadPerTarget(over, tg, f) }
		ok, all, ferr := 0, 0, ""
		for _, r := range over {
			if r.Target != tg {
				continue
			}
			all++
			if r.OK {
				ok++
			} else if ferr == "" {
				ferr = r.Err
			}
		}
		if all == 0 {
			continue
		}
		runs := fmt.Sprintf("%d/%d", ok, all)
		if ferr != "" {
			runs += " ⚠ " + shorten(ferr, 140)
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", tg,
			per(overloadResult.highSuccessPct).cell(1),
			per(func(r overloadResult) float64 { return r.HighP50us / 1000 }).cell(1),
			per(func(r overloadResult) float64 { return r.HighP99us / 1000 }).cell(1),
			per(func(r overloadResult) float64 { return r.HighTPS }).cell(0),
			per(func(r overloadResult) float64 { return r.LowTPS }).cell(0),
			per(func(r overloadResult) float64 { return float64(r.LowShed) }).cell(0),
			per(func(r overloadResult) float64 { return r.Busy }).cell(3),
			per(func(r overloadResult) float64 { return float64(r.OtherErrs) }).cell(0),
			mdEscape(runs))
	}
	p("\n| pgturnstile / PgBouncer, pair by pair | High p50 | High p99 | Low TPS (goodput) |\n|---|---|---|---|\n")
	ratioOf := func(f func(overloadResult) float64) agg {
		return overloadPairs(over, func(x, y overloadResult) float64 { return f(x) / f(y) })
	}
	lowRatio := ratioOf(func(r overloadResult) float64 { return r.LowTPS })
	// Three decimals for the latency ratios: with admission control they
	// are around 0.001 (a fraction of a millisecond over PgBouncer's
	// ~320 ms).
	p("| ratio within each round, median (min–max) | %s | %s | %s |\n\n",
		ratioOf(func(r overloadResult) float64 { return r.HighP50us }).cell(3),
		ratioOf(func(r overloadResult) float64 { return r.HighP99us }).cell(3),
		lowRatio.cell(2))
	turn := func(f func(overloadResult) float64) agg { return overloadPerTarget(over, tTurnstile, f) }
	p("| Issue 16, pgturnstile | Bound | Figure | Met |\n|---|---|---|---|\n")
	for _, c := range []criterion{
		{what: "high-priority success %", bound: "≥ 99.9", fig: turn(overloadResult.highSuccessPct), meets: func(x float64) bool { return x >= 99.9 }},
		{what: "high-priority p99 ms", bound: "≤ 10", fig: turn(func(r overloadResult) float64 { return r.HighP99us / 1000 }), meets: func(x float64) bool { return x <= 10 }},
		{what: "low-priority TPS ÷ PgBouncer's (no policy), pair by pair", bound: "≥ 0.70", fig: lowRatio, meets: func(x float64) bool { return x >= 0.7 }},
		{what: "pool busy fraction (the gate's accounting)", bound: "≥ 0.90", fig: turn(func(r overloadResult) float64 { return r.Busy }), meets: func(x float64) bool { return x >= 0.9 }},
	} {
		p("| %s | %s | %s | %s |\n", c.what, c.bound, c.fig.cell(2), c.verdict("**no**"))
	}
	p("\n")
	return b.String()
}

// overloadPerTarget aggregates f over the OK overload runs of tgt.
func overloadPerTarget(over []overloadResult, tgt string, f func(overloadResult) float64) agg {
	var xs []float64
	for _, r := range over {
		if r.OK && r.Target == tgt {
			xs = append(xs, f(r))
		}
	}
	return aggregate(xs)
}

// overloadPairs applies f to pgturnstile's and PgBouncer's runs of the same
// round (both OK) and aggregates over rounds, as table.pairs does.
func overloadPairs(over []overloadResult, f func(turn, bouncer overloadResult) float64) agg {
	type pair struct{ turn, bouncer *overloadResult }
	byRound := map[int]*pair{}
	var rounds []int
	for i := range over {
		r := &over[i]
		if !r.OK {
			continue
		}
		pr := byRound[r.Round]
		if pr == nil {
			pr = &pair{}
			byRound[r.Round] = pr
			rounds = append(rounds, r.Round)
		}
		switch r.Target {
		case tTurnstile:
			pr.turn = r
		case tBouncer:
			pr.bouncer = r
		}
	}
	var xs []float64
	for _, rd := range rounds {
		if pr := byRound[rd]; pr.turn != nil && pr.bouncer != nil {
			xs = append(xs, f(*pr.turn, *pr.bouncer))
		}
	}
	return aggregate(xs)
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
