//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
	"github.com/pgturnstile/pgturnstile/bench/internal/pgbrun"
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
	// Pprof is where the target serves net/http/pprof when its runs are
	// profiled (-router-profile); "" when they are not.
	Pprof string
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
	r := runResult{Workload: w.Key, Target: t.Name, Round: round, CPUus: math.NaN(), Load: pgbrun.LoadAvg()}
	if t.Proc != nil && !t.Proc.Alive() {
		r.Err = fmt.Sprintf("%s is not running (exited: %v)", t.Name, t.Proc.Err())
		return r
	}
	prefix := filepath.Join(logDir, fmt.Sprintf("run%04d", seq))
	jobs := min(2, w.Clients)
	lg := w.loginOf()
	limit := d + connectAllowance(w, t.Proc == nil) + extra
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(t.Port), "-U", lg.User, "-n",
		"-c", strconv.Itoa(w.Clients), "-j", strconv.Itoa(jobs), "-T", strconv.Itoa(int(limit.Seconds()))}
	args = append(args, w.Args...)
	db := t.DB
	if db == "" {
		db = benchDB
	}
	args = append(args, db)

	var pids []int
	if t.Proc != nil {
		pids = []int{t.Proc.Pid()}
		pgbrun.ResetPeakRSS(t.Proc.Pid())
	}
	o := pgbrun.Run(ctx, pgbrun.Spec{Args: args, Env: pgbenchEnv(lg), Prefix: prefix, PIDs: pids, Timeout: limit + 90*time.Second})
	if t.Proc != nil {
		r.PeakRSSKB, _ = benchenv.StatusKB(t.Proc.Pid(), "VmHWM")
	}
	r.Processed, r.Failed, r.ConnectMs = o.Processed, o.Failed, o.ConnectMs
	txns, samples := o.Txns, o.Samples
	r.Err, r.tooShort = o.Failure(limit)
	if r.Err != "" {
		saveFailure(logDir, seq, args, o.Stdout, o.Stderr)
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

// measure fills the window figures of r (pgbrun.Measure); r.CPUus is left
// as it is without a pooler.
func measure(r *runResult, txns []pgbrun.Txn, samples []pgbrun.Sample, pooler bool, warm, tail time.Duration) error {
	w, err := pgbrun.Measure(txns, samples, pooler, warm, tail)
	if err != nil {
		return err
	}
	r.WindowS, r.Txns, r.TPS, r.P50us, r.P99us = w.WindowS, w.Txns, w.TPS, w.P50us, w.P99us
	if pooler {
		r.CPUus = w.CPUus
	}
	return nil
}

// saveFailure keeps the output of a failed run next to the logs, for -keep.
func saveFailure(logDir string, seq int, args []string, stdout, stderr string) {
	os.WriteFile(filepath.Join(logDir, fmt.Sprintf("failed-run%04d-%s.txt", seq, time.Now().Format("150405.000"))),
		[]byte("pgbench "+strings.Join(args, " ")+"\n--- stdout\n"+stdout+"\n--- stderr\n"+stderr), 0o644)
}
