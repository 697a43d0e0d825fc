//go:build linux

package main

import (
	"fmt"
	"strings"
)

// noiseReport is the report of an A/A run (-aa): PgBouncer B against
// PgBouncer A, measured exactly as BENCHMARKS.md measures pgturnstile
// against PgBouncer. On a quiet machine every ratio would be 1.00; how far
// one strays is how far this machine's noise alone moves that ratio.
func noiseReport(o options, in info, ws []workload, rs []runResult) string {
	t := index(rs)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# Noise floor: PgBouncer against itself\n\n")
	p("An A/A run of `make bench`'s method (`bench/cmd/pgbench-compare -aa`; [bench/README.md](README.md)): two instances of the same PgBouncer, with the same ini, take the places of PgBouncer and pgturnstile, and are measured pair by pair exactly as [BENCHMARKS.md](../BENCHMARKS.md) measures pgturnstile against PgBouncer. ")
	p("Nothing differs between A and B but chance, so every ratio would be 1.00 on a quiet machine. How far a ratio strays here is how far this machine's noise alone moves the same ratio in BENCHMARKS.md.\n\n")
	p("- **Date:** %s\n", in.Date)
	p("- **Machine:** %s CPUs (`nproc`), %s, %s RAM, %s; PostgreSQL, both PgBouncers and pgbench share it.\n", in.Nproc, in.CPU, in.Mem, in.Kernel)
	p("- **Versions:** %s; %s; %s.\n", in.Bouncer, in.Postgres, in.Pgbench)
	p("- **Command:** %s; wall time %s.\n", commandLine(in), in.Elapsed.Round(1e9))
	p("- **Runs:** as in BENCHMARKS.md (PostgreSQL %s; pool of 20, SCRAM; `pgbench -j 2`, `-T %d`, %s at 500 clients), %d rounds (%d for the target workloads), A and B interleaved (round 1: A B; round 2: B A; …).\n",
		in.PostgresConf, int(o.duration.Seconds()), o.durationOf(workload{Clients: 500}), o.rounds, max(o.rounds, o.targetRounds))
	p("- **Machine load:** 1-minute load average %s at the start, %s at the end.\n", fmtF(in.LoadStart, 1), fmtF(in.LoadEnd, 1))
	for _, n := range in.Notes {
		p("- **Note:** %s\n", n)
	}
	p("\n%s\n\n", startMarker)

	p("## Issue 6's criteria, B against A\n\n")
	p("Would PgBouncer pass the criteria that pgturnstile is held to, against itself?\n\n")
	p("| Criterion | B/A (median of pair-by-pair ratios, min–max) | Passes |\n|---|---|---|\n")
	for _, c := range pooledCriteria(t, o, tBouncerB, tBouncer, []string{"simple", "ext"}) {
		p("| %s %s | %s | %s |\n", c.what, c.bound, c.fig.cell(2), c.verdict("no"))
	}
	p("\n")

	p("## PgBouncer B / PgBouncer A, pair by pair\n\n")
	p("Each cell: median (min–max) of the ratios within each round; the last column lists the p99 ratio of every round in order.\n\n")
	p("| Workload | TPS | CPU µs/txn | p50 | p99 | p99 per round |\n|---|---|---|---|---|---|\n")
	for _, w := range ws {
		n := o.roundsOf(w.Key)
		var each []string
		for i := 1; i <= n; i++ {
			x, ok1 := t[resultKey{w.Key, tBouncerB, i}]
			y, ok2 := t[resultKey{w.Key, tBouncer, i}]
			if ok1 && ok2 && x.OK && y.OK {
				each = append(each, fmtF(fP99(x)/fP99(y), 2))
			} else {
				each = append(each, "—")
			}
		}
		p("| %s | %s | %s | %s | %s | %s |\n", w.Name,
			t.pairs(w.Key, tBouncerB, tBouncer, n, ratio(fTPS)).cell(2),
			t.pairs(w.Key, tBouncerB, tBouncer, n, ratio(fCPU)).cell(2),
			t.pairs(w.Key, tBouncerB, tBouncer, n, ratio(fP50)).cell(2),
			t.pairs(w.Key, tBouncerB, tBouncer, n, ratio(fP99)).cell(2),
			strings.Join(each, ", "))
	}
	p("\n")

	p("## Results per instance\n\n")
	b.WriteString(perTargetTable(t, o, ws, []string{tBouncer, tBouncerB}))
	p("\n%s\n\n", rawMarker)
	p("<details><summary>Every run</summary>\n\n")
	b.WriteString(runsTable(rs))
	p("\n</details>\n")
	return b.String()
}
