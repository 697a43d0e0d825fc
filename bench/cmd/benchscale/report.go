//go:build linux

package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
	"github.com/pgturnstile/pgturnstile/bench/internal/scalesection"
)

// info is what the report says about the machine and the run.
type info struct {
	Machine   string // CPU model and core count: the block's key
	CPUs      []int
	Date      string
	Kernel    string
	Turnstile string
	Bouncer   string
	Postgres  string
	Go        string
	Nofile    uint64
	Elapsed   time.Duration
	Notes     []string
}

func collectInfo(o options, cpus []int, nofile uint64) info {
	first := benchenv.FirstLine
	in := info{
		Machine:   o.machine,
		CPUs:      cpus,
		Date:      time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Turnstile: first(o.turnstile, "-V"),
		Bouncer:   first(o.pgbouncer, "-V"),
		Postgres:  first(filepath.Join(o.pgBin, "postgres"), "--version"),
		Go:        runtime.Version(),
		Nofile:    nofile,
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		in.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if in.Machine == "" {
		in.Machine = fmt.Sprintf("%s, %d cores", strings.Join(strings.Fields(benchenv.CPUInfo("model name")), " "), len(cpus))
	}
	if len(cpus) <= 2 {
		in.Notes = append(in.Notes, fmt.Sprintf("%d cores: the poolers, PostgreSQL and pgbench share them, so at %d cores every pooler competes with PostgreSQL and pgbench for the same CPUs and TPS is capped by the machine, not the pooler; read CPU µs/txn. The machine may also be shared with other jobs: timings are noisy.", len(cpus), len(cpus)))
	}
	if o.quick {
		in.Notes = append(in.Notes, "QUICK run (smoke test): one short round; figures are rough.")
	}
	return in
}

// median of xs without NaNs; NaN when none.
func median(xs []float64) float64 {
	xs = slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// figure returns a target's median of f over its OK runs of (cores,
// workload).
func figure(rs []result, cores int, wk, tgt string, f func(result) float64) float64 {
	var xs []float64
	for _, r := range rs {
		if r.OK && r.Cores == cores && r.Workload == wk && r.Target == tgt {
			xs = append(xs, f(r))
		}
	}
	return median(xs)
}

// pairRatio is the median over rounds of a's figure ÷ b's in the same round
// (they ran seconds apart, so a noisy neighbour hits both alike).
func pairRatio(rs []result, cores int, wk, a, b string, f func(result) float64) float64 {
	by := map[[2]any]result{}
	for _, r := range rs {
		if r.OK && r.Cores == cores && r.Workload == wk {
			by[[2]any{r.Target, r.Round}] = r
		}
	}
	var xs []float64
	for k, ra := range by {
		if k[0] != a {
			continue
		}
		if rb, ok := by[[2]any{b, k[1]}]; ok && f(rb) > 0 {
			xs = append(xs, f(ra)/f(rb))
		}
	}
	return median(xs)
}

func num(x float64, prec int) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

func tps(r result) float64 { return r.TPS }
func cpu(r result) float64 { return r.CPUus }

// judgedKey and judgedCores are issue 35's scale check: pgturnstile's TPS at
// 16 cores ≥ 4× one PgBouncer's on select-only at 120 clients.
const (
	judgedKey   = "S-120"
	judgedCores = 16
	judgedRatio = 4.0
)

// report is this machine's block of the bench-scale section.
func report(o options, in info, ws []workload, rs []result) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("### %s\n\n", in.Machine)
	p("%s; %s; %s; %s; %s; Go %s. CPUs this process could use: %s; open-files limit %d. %d round(s) per workload of `pgbench -T %s` (plus a login allowance), targets interleaved; pgbench -i scale %d; %s in all.\n\n",
		in.Date, in.Kernel, in.Turnstile, in.Bouncer, in.Postgres, in.Go, cpuList(in.CPUs), in.Nofile, o.rounds, o.duration, o.scale, in.Elapsed.Round(time.Second))
	for _, n := range in.Notes {
		p("- %s\n", n)
	}
	if len(in.Notes) > 0 {
		p("\n")
	}
	cores := slices.Sorted(func(yield func(int) bool) {
		seen := map[int]bool{}
		for _, r := range rs {
			if !seen[r.Cores] {
				seen[r.Cores] = true
				if !yield(r.Cores) {
					return
				}
			}
		}
	})
	table := func(title string, f func(result) float64, prec int, note string) {
		p("**%s** (median over rounds; ratios pair by pair, round by round; %s)\n\n", title, note)
		p("| Workload | Cores | pgturnstile | PgBouncer ×1 | PgBouncer ×N | pgturnstile ÷ ×1 | pgturnstile ÷ ×N |\n|---|---|---|---|---|---|---|\n")
		for _, w := range ws {
			for _, n := range cores {
				many := num(figure(rs, n, w.Key, tBouncerN, f), prec)
				manyRatio := num(pairRatio(rs, n, w.Key, tTurn, tBouncerN, f), 2)
				if n == 1 {
					many, manyRatio = "(= ×1)", "(= ÷ ×1)"
				}
				p("| %s | %d | %s | %s | %s | %s | %s |\n", w.Key, n,
					num(figure(rs, n, w.Key, tTurn, f), prec), num(figure(rs, n, w.Key, tBouncer, f), prec), many,
					num(pairRatio(rs, n, w.Key, tTurn, tBouncer, f), 2), manyRatio)
			}
		}
		p("\n")
	}
	table("TPS", tps, 0, "higher is better; a ratio > 1 favours pgturnstile")
	table("Pooler CPU µs per transaction", cpu, 1, "utime+stime of the pooler's process, summed over the N PgBouncers, ÷ transactions; with `-C` one transaction is one login; lower is better; a ratio < 1 favours pgturnstile")

	p("Workloads: ")
	for i, w := range ws {
		if i > 0 {
			p("; ")
		}
		p("`%s`: %s", w.Key, w.Name)
	}
	p(".\n\n")

	top := slices.Max(append([]int{0}, cores...))
	ratio := pairRatio(rs, top, judgedKey, tTurn, tBouncer, tps)
	switch {
	case !slices.ContainsFunc(ws, func(w workload) bool { return w.Key == judgedKey }):
	case top >= judgedCores:
		verdict := "**met**"
		if math.IsNaN(ratio) || ratio < judgedRatio {
			verdict = "**not met**"
		}
		p("Issue 35 scale check: pgturnstile's TPS at %d cores ÷ one PgBouncer's on `%s`: %s (≥ %.0f needed): %s.\n\n", top, judgedKey, num(ratio, 2), judgedRatio, verdict)
	default:
		p("Issue 35 scale check (judged at %d cores; this machine has %d): pgturnstile's TPS at %d cores ÷ one PgBouncer's on `%s`: %s, informational.\n\n", judgedCores, len(in.CPUs), top, judgedKey, num(ratio, 2))
	}

	var failed []string
	for _, r := range rs {
		if !r.OK {
			failed = append(failed, fmt.Sprintf("- %d cores, `%s`, round %d, %s: %s", r.Cores, r.Workload, r.Round, r.Target, r.Err))
		} else if r.Retried != "" {
			failed = append(failed, fmt.Sprintf("- %d cores, `%s`, round %d, %s: %s", r.Cores, r.Workload, r.Round, r.Target, r.Retried))
		}
	}
	if len(failed) > 0 {
		p("Failed or retried runs:\n\n%s\n\n", strings.Join(failed, "\n"))
	}
	return b.String()
}

// cpuList writes CPUs as ranges: 0-15, or 0,2-3.
func cpuList(cs []int) string {
	var parts []string
	for i := 0; i < len(cs); {
		j := i
		for j+1 < len(cs) && cs[j+1] == cs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(cs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cs[i], cs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// intro opens the bench-scale section the first time it is written.
const intro = "`make bench-scale` (`bench/cmd/benchscale`; bench/README.md, *Scale with cores*) runs the pooler-bound shape the multi-threaded poolers publish at N = 1, 2, 4, … cores up to the machine's: **pgturnstile** with `GOMAXPROCS=N`, **PgBouncer ×1** (one process) and **PgBouncer ×N** (N processes on one port with `so_reuseport = 1`, one per core, the 40 server connections shared among them), the poolers pinned to N CPUs and PostgreSQL and pgbench to the others (to all of them when N is all there is). Every target holds at most 40 server connections; clients log in with SCRAM against the role's secret; `pool_mode = transaction`. One table per machine it ran on, replaced when it runs there again."

// writeSection puts body as machine's block into path's bench-scale
// section, keeping the rest of the file.
func writeSection(path, machine, body string, logf func(string, ...any)) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := scalesection.Put(string(old), intro, machine, body)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return err
	}
	logf("wrote %s's table into %s", machine, path)
	return nil
}

// mergeFrom puts every machine block of from's bench-scale section into
// path's.
func mergeFrom(from, path string, logf func(string, ...any)) error {
	src, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	bs := scalesection.Blocks(string(src))
	if len(bs) == 0 {
		return fmt.Errorf("%s has no bench-scale section", from)
	}
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(old)
	for _, b := range bs {
		doc = scalesection.Put(doc, intro, b.Key, b.Body)
		logf("%s: %s's table", path, b.Key)
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
