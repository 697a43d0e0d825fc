//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
)

// workload is one pgbench invocation, run against every target.
type workload struct {
	Name    string   // e.g. "select-only extended, 100 clients"
	Key     string   // short id for -only and the raw table, e.g. "S-ext-100"
	Clients int      //
	Args    []string // pgbench options besides connection, -c, -j, -T and logging
	// Setup is the key of the login setup (logins.go) whose fresh poolers
	// this workload runs on; "" for the main targets.
	Setup string
	// Shards, when not 0, makes this a sharding router workload
	// (sharding.go): it runs on a fresh pgturnstile without shard_file
	// and one with an N-shard map, beside the main PgBouncer.
	Shards int
	// Script is a custom pgbench script, written to a file and given
	// with -f (prepareScripts); "" for pgbench's built-in ones.
	Script string
}

// target is where pgbench connects: PostgreSQL directly or a pooler.
type target struct {
	Name string
	Port int
	Proc *benchenv.Proc // nil for direct PostgreSQL: no pooler CPU or RSS to read
	DB   string         // the database pgbench connects to; "" is bench
}

// runResult is one pgbench run of one workload against one target.
type runResult struct {
	Workload string
	Target   string
	Round    int
	OK       bool
	Err      string // why not OK: pgbench's first error line, a timeout, …

	Processed int // "number of transactions actually processed"
	Failed    int // "number of failed transactions"

	// Measured over the steady window (see measure): the first second
	// (connection setup, pool warm-up) and the last 0.2 s are left out.
	WindowS   float64
	Txns      int
	TPS       float64
	P50us     float64
	P99us     float64
	CPUus     float64 // pooler utime+stime per transaction, µs; NaN for direct
	PeakRSSKB int64   // VmHWM of the pooler during the run; 0 for direct

	ConnectMs int64   // pgbench's "initial connection time", in ms
	Load      float64 // 1-minute load average when the run started
	Retried   string  // why the run was run a second time, if it was
	tooShort  bool    // failed for lack of a measuring window: worth a retry
}

// sample is the pooler's CPU time at one instant.
type sample struct {
	At    int64 // Unix µs
	Ticks int64 // utime+stime, clock ticks
}

// txn is one line of pgbench's per-transaction log.
type txn struct {
	End int64 // completion time, Unix µs
	Lat int64 // latency, µs
}

var (
	processedRE = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
	failedRE    = regexp.MustCompile(`number of failed transactions: (\d+)`)
	connTimeRE  = regexp.MustCompile(`initial connection time = ([0-9.]+) ms`)
)

// runPgbench runs w against t for d and measures it.
// On a loaded machine pgbench's -T clock can run out while the clients are
// still logging in; a run that left too little to measure is run once more
// with -T longer by the login time it reported.
func runPgbench(ctx context.Context, logDir string, seq int, w workload, t target, d time.Duration, round int) runResult {
	r := runPgbenchOnce(ctx, logDir, seq, w, t, d, 0, round)
	if !r.OK && r.tooShort && ctx.Err() == nil {
		// pgbench prints no login time when no transaction ran.
		extra := max(time.Duration(r.ConnectMs)*time.Millisecond+2*time.Second, 5*time.Second).Round(time.Second)
		r2 := runPgbenchOnce(ctx, logDir, seq, w, t, d, extra, round)
		r2.Retried = fmt.Sprintf("retried with -T +%s after: %s", extra, r.Err)
		return r2
	}
	return r
}

func runPgbenchOnce(ctx context.Context, logDir string, seq int, w workload, t target, d, extra time.Duration, round int) runResult {
	r := runResult{Workload: w.Key, Target: t.Name, Round: round, CPUus: math.NaN(), Load: loadAvg()}
	if t.Proc != nil && !t.Proc.Alive() {
		r.Err = fmt.Sprintf("%s is not running (exited: %v)", t.Name, t.Proc.Err())
		return r
	}
	prefix := filepath.Join(logDir, fmt.Sprintf("run%04d", seq))
	jobs := min(2, w.Clients)
	lg := w.loginOf()
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(t.Port), "-U", lg.User, "-n",
		"-c", strconv.Itoa(w.Clients), "-j", strconv.Itoa(jobs), "-T", strconv.Itoa(int((d + connectAllowance(w, t.Proc == nil) + extra).Seconds())),
		"--log", "--log-prefix", prefix}
	args = append(args, w.Args...)
	db := t.DB
	if db == "" {
		db = benchDB
	}
	args = append(args, db)

	rctx, cancel := context.WithTimeout(ctx, d+connectAllowance(w, t.Proc == nil)+extra+90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, "pgbench", args...)
	cmd.Env = pgbenchEnv(lg)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	var samples []sample
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	if t.Proc != nil {
		resetPeakRSS(t.Proc.Pid())
		go func() {
			defer close(sampled)
			tk := time.NewTicker(25 * time.Millisecond)
			defer tk.Stop()
			for {
				if n, err := cpuTicks(t.Proc.Pid()); err == nil {
					samples = append(samples, sample{At: time.Now().UnixMicro(), Ticks: n})
				}
				select {
				case <-stopSampling:
					return
				case <-tk.C:
				}
			}
		}()
	} else {
		close(sampled)
	}
	err := cmd.Run()
	close(stopSampling)
	<-sampled
	if t.Proc != nil {
		r.PeakRSSKB, _ = benchenv.StatusKB(t.Proc.Pid(), "VmHWM")
	}

	out := stdout.String()
	if m := processedRE.FindStringSubmatch(out); m != nil {
		r.Processed, _ = strconv.Atoi(m[1])
	}
	if m := failedRE.FindStringSubmatch(out); m != nil {
		r.Failed, _ = strconv.Atoi(m[1])
	}
	if m := connTimeRE.FindStringSubmatch(out); m != nil {
		ms, _ := strconv.ParseFloat(m[1], 64)
		r.ConnectMs = int64(ms)
	}
	txns, lerr := readLogs(prefix)
	switch {
	case rctx.Err() != nil && ctx.Err() == nil:
		r.Err = fmt.Sprintf("pgbench still running 90s after -T %s: killed (hang?)", d+connectAllowance(w, t.Proc == nil)+extra)
	case err != nil:
		r.Err = fmt.Sprintf("pgbench: %v: %s", err, firstErrorLine(stderr.String()))
	case r.Failed > 0:
		r.Err = fmt.Sprintf("%d failed transactions: %s", r.Failed, firstErrorLine(stderr.String()))
	case lerr != nil:
		r.Err = "reading pgbench log: " + lerr.Error()
	case len(txns) == 0:
		r.Err = fmt.Sprintf("no transactions in pgbench log (logins took %d ms)", r.ConnectMs)
		r.tooShort = true
	}
	if r.Err != "" {
		saveFailure(logDir, seq, args, stdout.String(), stderr.String())
		return r
	}
	warm := min(time.Second, d/4)
	if err := measure(&r, txns, samples, t.Proc != nil, warm, 200*time.Millisecond); err != nil {
		r.Err = fmt.Sprintf("%v (logins took %d ms)", err, r.ConnectMs)
		r.tooShort = true
		return r
	}
	r.OK = true
	return r
}

// connectAllowance is added to pgbench -T: its clock runs while the clients
// log in (SCRAM each, and for direct PostgreSQL a backend fork and start
// each, which on a busy 2-core machine takes seconds for 100 clients). The
// measuring window starts after the first transaction, so this only keeps
// the window from shrinking.
func connectAllowance(w workload, direct bool) time.Duration {
	if slices.Contains(w.Args, "-C") {
		return 0
	}
	switch {
	case w.Clients >= 500:
		return 3 * time.Second
	case w.Clients >= 100 && direct:
		return 4 * time.Second
	case w.Clients >= 100:
		return time.Second
	case w.Clients >= 50 && direct:
		return 2 * time.Second
	}
	return 0
}

// measure fills the window figures of r. The window starts warm after the
// first completed transaction (pgbench starts its clients together, after
// all have connected) and ends tail before the last (both shortened for a
// run whose transactions spanned less than 4×warm); with a pooler it is
// snapped to the CPU samples inside it, so that transactions and CPU time
// are counted over exactly the same interval.
func measure(r *runResult, txns []txn, samples []sample, pooler bool, warm, tail time.Duration) error {
	first, last := txns[0].End, txns[0].End
	for _, x := range txns {
		first = min(first, x.End)
		last = max(last, x.End)
	}
	// On a loaded machine pgbench's clock may have eaten most of -T while
	// the clients logged in: shrink warm and tail so that at least half of
	// what ran is measured, rather than failing the run.
	span := time.Duration(last-first) * time.Microsecond
	warm = min(warm, span/4)
	tail = min(tail, span/10)
	t1, t2 := first+warm.Microseconds(), last-tail.Microseconds()
	var c1, c2 int64
	if pooler {
		i := slices.IndexFunc(samples, func(s sample) bool { return s.At >= t1 })
		j := -1
		for k := len(samples) - 1; k >= 0; k-- {
			if samples[k].At <= t2 {
				j = k
				break
			}
		}
		if i < 0 || j < 0 || j <= i {
			return fmt.Errorf("run too short for a measuring window (%d CPU samples)", len(samples))
		}
		t1, t2, c1, c2 = samples[i].At, samples[j].At, samples[i].Ticks, samples[j].Ticks
	}
	if t2-t1 < 100_000 {
		return fmt.Errorf("measuring window of %d ms is too short (transactions spanned %d ms)", (t2-t1)/1000, span.Milliseconds())
	}
	lats := make([]int64, 0, len(txns))
	for _, x := range txns {
		if x.End > t1 && x.End <= t2 {
			lats = append(lats, x.Lat)
		}
	}
	if len(lats) == 0 {
		return fmt.Errorf("no transaction completed in the measuring window")
	}
	slices.Sort(lats)
	r.WindowS = float64(t2-t1) / 1e6
	r.Txns = len(lats)
	r.TPS = float64(len(lats)) / r.WindowS
	r.P50us = float64(percentile(lats, 50))
	r.P99us = float64(percentile(lats, 99))
	if pooler {
		r.CPUus = float64(c2-c1) * (1e6 / clkTck) / float64(len(lats))
	}
	return nil
}

// percentile is the nearest-rank percentile of sorted xs.
func percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(xs))))
	return xs[min(max(rank, 1), len(xs))-1]
}

// readLogs reads and removes pgbench's per-transaction logs, one per thread:
// PREFIX.PID and PREFIX.PID.N.
func readLogs(prefix string) ([]txn, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil {
		return nil, err
	}
	var all []txn
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		txns, err := parseLog(fh)
		fh.Close()
		os.Remove(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", filepath.Base(f), err)
		}
		all = append(all, txns...)
	}
	return all, nil
}

// parseLog parses pgbench's --log format:
//
//	client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]
//
// time is the latency in µs, or "failed"/"serialization"/"deadlock" for a
// failed transaction (left out here; pgbench's summary counts those).
func parseLog(f *os.File) ([]txn, error) {
	var out []txn
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 {
			return nil, fmt.Errorf("short log line %q", sc.Text())
		}
		lat, err := strconv.ParseInt(fs[2], 10, 64)
		if err != nil {
			continue
		}
		sec, err1 := strconv.ParseInt(fs[4], 10, 64)
		us, err2 := strconv.ParseInt(fs[5], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad log line %q", sc.Text())
		}
		out = append(out, txn{End: sec*1e6 + us, Lat: lat})
	}
	return out, sc.Err()
}

func firstErrorLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, "error") || strings.Contains(line, "ERROR") || strings.Contains(line, "FATAL") {
			return strings.TrimSpace(line)
		}
	}
	if s = strings.TrimSpace(s); len(s) > 300 {
		s = s[:300]
	}
	return s
}

// saveFailure keeps the output of a failed run next to the logs, for -keep.
func saveFailure(logDir string, seq int, args []string, stdout, stderr string) {
	os.WriteFile(filepath.Join(logDir, fmt.Sprintf("failed-run%04d-%s.txt", seq, time.Now().Format("150405.000"))),
		[]byte("pgbench "+strings.Join(args, " ")+"\n--- stdout\n"+stdout+"\n--- stderr\n"+stderr), 0o644)
}

// loadAvg is the 1-minute load average: how busy the shared machine was.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return x
}
