//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
)

// info is what the report says about the run and the machine.
type info struct {
	Command, Date                string
	Nproc, CPU, Mem, Kernel      string
	Turnstile, Bouncer, Postgres string
	Go                           string
	Tree                         string
	TurnstileSHA                 string
	Elapsed                      time.Duration
	NoPrepared                   bool // PgBouncer's ini has no max_prepared_statements
}

func gatherInfo(o options) info {
	in := info{
		Command: commandLine(),
		Date:    time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Nproc:   firstLine(exec.Command("nproc").Output()),
		CPU:     benchenv.CPUInfo("model name"),
		Mem:     meminfoTotal(),
		Kernel:  firstLine(os.ReadFile("/proc/sys/kernel/osrelease")),
		Go:      runtime.Version(),
	}
	in.Turnstile = firstLine(exec.Command(o.turnstile, "-V").CombinedOutput())
	in.Bouncer = firstLine(exec.Command(o.bouncer, "--version").CombinedOutput())
	in.Postgres = firstLine(exec.Command(filepath.Join(o.pgBin, "postgres"), "--version").CombinedOutput())
	in.TurnstileSHA = fileSHA(o.turnstile)
	in.Tree = treeState()
	return in
}

func commandLine() string {
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		if a == "" || strings.ContainsAny(a, " '\"|*?$()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args[i] = a
	}
	return strings.Join(args, " ")
}

func firstLine(b []byte, err error) string {
	if err != nil && len(b) == 0 {
		return "unknown (" + err.Error() + ")"
	}
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

func meminfoTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
			}
		}
	}
	return "unknown"
}

func fileSHA(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unknown"
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// treeState describes the source pgturnstile was built from: HEAD, and the
// uncommitted changes to Go files outside this tool, if any (they are what
// a binary built from the working tree contains).
func treeState() string {
	head := firstLine(exec.Command("git", "rev-parse", "--short", "HEAD").Output())
	out, err := exec.Command("git", "status", "--porcelain", "--", "*.go", "go.mod", "go.sum",
		":!bench/cmd/hostilemem").Output()
	if err != nil {
		return "commit " + head + " (git status failed)"
	}
	var modified, untracked []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if len(l) < 4 {
			continue
		}
		path := l[3:]
		if strings.HasPrefix(l, "??") {
			if !strings.HasSuffix(path, "_test.go") && !strings.HasSuffix(path, "/") {
				untracked = append(untracked, path)
			}
			continue
		}
		if !strings.HasSuffix(path, "_test.go") {
			modified = append(modified, path)
		}
	}
	if len(modified) == 0 && len(untracked) == 0 {
		return "commit " + head + ", clean (no uncommitted non-test Go changes)"
	}
	diff, _ := exec.Command("git", "diff", "HEAD", "--", "*.go", ":!*_test.go", ":!bench/cmd/hostilemem").Output()
	sum := sha256.Sum256(diff)
	s := fmt.Sprintf("working tree = commit %s + uncommitted changes to %d non-test Go files (%s; `git diff HEAD -- '*.go' ':!*_test.go'` sha256 %s)",
		head, len(modified), strings.Join(modified, ", "), hex.EncodeToString(sum[:])[:12])
	if len(untracked) > 0 {
		s += fmt.Sprintf(" and %d untracked non-test Go files (%s)", len(untracked), strings.Join(untracked, ", "))
	}
	return s
}

func mib(kb int64) string {
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

// got is the "what the client got" cell: the replies in order, then how the
// connection ended.
func (r result) got() string {
	var parts []string
	hasErr := false
	for _, t := range r.replies {
		if strings.HasPrefix(t, "ERROR ") || strings.HasPrefix(t, "FATAL ") || strings.HasPrefix(t, "PANIC ") {
			hasErr = true
		}
		parts = append(parts, t)
	}
	s := strings.Join(parts, " → ")
	switch {
	case strings.HasPrefix(r.ending, "open"):
	case !hasErr && strings.Contains(r.ending, "pooler"):
		if s != "" {
			s += " → "
		}
		s += "**connection closed without error** (" + r.ending + ")"
	default:
		if s != "" {
			s += " → "
		}
		s += r.ending
	}
	return s
}

func (r result) writtenCell() string {
	total := r.msgLen + 1
	if r.writeErr == "" {
		return "all " + mib(total/1024)
	}
	return fmt.Sprintf("%s of %s, then %s", mib(r.written/1024), mib(total/1024), r.writeErr)
}

func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func render(o options, in info, configs map[string]map[string]string, results []result) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Pooler memory under one huge client message: pgturnstile and PgBouncer\n\n")
	p("Written by `bench/cmd/hostilemem` (`make bench-hostile`; see [README.md](README.md)). ")
	p("One logged-in client streams one %d MiB message into the pooler; the table shows what that costs the pooler in memory, ", o.size>>20)
	p("what the client got back, and whether another client's `SELECT 1` every 5 ms kept working meanwhile.\n\n")
	p("- **Command:** `%s` (%s)\n", in.Command, in.Elapsed.Round(time.Second))
	p("- **Date:** %s\n", in.Date)
	p("- **Machine:** %s CPUs (`nproc`), %s, %s RAM, Linux %s; shared with other jobs.\n", in.Nproc, in.CPU, in.Mem, in.Kernel)
	p("- **pgturnstile:** %s, binary sha256 %s, built from %s.\n", in.Turnstile, in.TurnstileSHA, in.Tree)
	p("- **PgBouncer:** %s. **PostgreSQL:** %s. **Go** (this tool): %s.\n", in.Bouncer, in.Postgres, in.Go)
	p("- **Config, both poolers:** `pool_mode = transaction`, `max_prepared_statements = 200`, `default_pool_size = 20`, ")
	p("`auth_type = scram-sha-256` with the three roles' SCRAM secrets (from PostgreSQL's `pg_authid`) in `auth_file`, ")
	p("`admin_users = %s`, `stats_users = %s`; everything else at each pooler's default. ", adminUser, statsUser)
	if in.NoPrepared {
		p("**Except:** this PgBouncer predates `max_prepared_statements` (PgBouncer 1.21), refuses to start with it in its ini ")
		p("(`unknown parameter: pgbouncer/max_prepared_statements`), so its ini leaves it out: it relays Parse, Describe and Close ")
		p("to PostgreSQL without looking at them, as PgBouncer ≥ 1.21 does with `max_prepared_statements = 0`. ")
	}
	p("As read back with `SHOW CONFIG` (— = no such setting):\n\n")
	p("  | Setting | pgturnstile | PgBouncer |\n  |---|---|---|\n")
	for _, k := range configKeys {
		tv, bv := configs[kindTurnstile][k], configs[kindBouncer][k]
		if tv == "" {
			tv = "—"
		}
		if bv == "" {
			bv = "—"
		}
		p("  | `%s` | %s | %s |\n", k, tv, bv)
	}
	for _, kind := range []string{kindTurnstile, kindBouncer} {
		if e := configs[kind]["error"]; e != "" {
			p("\n  SHOW CONFIG on %s failed: %s\n", kind, cell(e))
		}
	}
	p("\n")

	p("## Results\n\n")
	p("*Peak growth* = highest VmRSS sampled every 10 ms from the first byte until 1 s after the client left, minus the baseline ")
	p("(median of 5 readings just before the first byte, with both clients logged in). *After leaving* = VmRSS 1 s after the ")
	p("client closed its socket, and its difference from the baseline. *Written* = bytes of the huge message (header included) ")
	p("the client's kernel accepted before a write failed; a few MiB of that can sit in the two sockets' buffers, unread by the pooler. ")
	p("*Time* = from the first byte to ReadyForQuery or the close. *Normal client* = `SELECT 1` every 5 ms ")
	p("through the same pooler on its own connection, from before the hostile client logged in until the after-leaving reading: ")
	p("failed / succeeded, and the slowest one.\n\n")
	p("| Case | Pooler | Peak RSS growth | RSS after leaving (Δ baseline) | Client got | Written | Time | Normal client: failed / ok, max latency |\n")
	p("|---|---|---|---|---|---|---|---|\n")
	titles := map[string]string{}
	for _, c := range cases() {
		titles[c.key] = c.title
	}
	for _, r := range results {
		if r.err != "" {
			p("| %d. %s | %s | — | — | not run: %s | — | — | — |\n", caseNumber(r.caseKey), titles[r.caseKey], r.pooler, cell(r.err))
			continue
		}
		got := r.got()
		if r.poolerDied != "" {
			got += " → **" + r.poolerDied + "**"
		}
		probe := fmt.Sprintf("%d / %d, %s", r.probe.failed, r.probe.ok, r.probe.maxLatency.Round(time.Millisecond))
		if r.probe.failed > 0 {
			probe = "**" + probe + "** (" + r.probe.firstErr + ")"
		}
		if r.probe.reconnects > 0 {
			probe += fmt.Sprintf(", %d reconnects", r.probe.reconnects)
		}
		p("| %d. %s | %s | %s | %s (%+.1f MiB) | %s | %s | %s | %s |\n",
			caseNumber(r.caseKey), titles[r.caseKey], r.pooler,
			mib(r.peakKB-r.baselineKB), mib(r.afterKB), float64(r.afterKB-r.baselineKB)/1024,
			cell(got), r.writtenCell(), r.elapsed.Round(time.Millisecond), cell(probe))
	}
	p("\n<details><summary>Baselines, samples and each pooler's log lines from the case</summary>\n\n")
	p("| Case | Pooler | Baseline RSS | Peak RSS | RSS samples | Last log lines during the case (logins and ordinary logouts left out) |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.err != "" {
			continue
		}
		lines := make([]string, len(r.logTail))
		for i, l := range r.logTail {
			lines[i] = "`" + strings.ReplaceAll(cell(l), "`", "'") + "`"
		}
		p("| %s | %s | %s | %s | %d | %s |\n", r.caseKey, r.pooler, mib(r.baselineKB), mib(r.peakKB), r.samples, strings.Join(lines, "<br>"))
	}
	p("\n</details>\n\n")
	p("Each case runs against a fresh instance of each pooler (started for it and stopped after it), so every baseline ")
	p("is a pooler that has seen only the tool's logins; which pooler goes first alternates from case to case. ")
	p("The message's length field is truthful (%d bytes of `x` plus the message's own fields); ", o.size)
	p("the body is written in %d KiB writes, each given 10 s to complete.\n", o.chunk>>10)
	return b.String()
}

func caseNumber(key string) int {
	for i, c := range cases() {
		if c.key == key {
			return i + 1
		}
	}
	return 0
}
