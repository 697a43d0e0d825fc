//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/pgbrun"
)

// result is one pgbench run of one workload against one target at one core
// count.
type result struct {
	Cores    int
	Workload string
	Target   string
	Round    int
	OK       bool
	Err      string
	TPS      float64
	CPUus    float64 // the target's processes' utime+stime per transaction
	P50us    float64
	P99us    float64
	ConnMs   int64
	Retried  string
	tooShort bool // no measuring window: worth a retry with a longer -T
}

// runCores starts the targets of core count n (pinned to the first n of
// cpus, PostgreSQL and pgbench to the others, or to all of them when n is
// all there is), warms their pools up, runs every workload against each,
// interleaved over the rounds, and stops them.
func (e *env) runCores(ctx context.Context, o options, cpus []int, n int, ws []workload) ([]result, error) {
	pool, rest := cpus[:n], cpus[n:]
	if len(rest) == 0 {
		rest = cpus
	}
	pin := !o.noPin
	if pin {
		if err := e.pinPostgres(rest); err != nil {
			e.log("pinning PostgreSQL to CPUs %v: %v (left unpinned)", rest, err)
		}
	}
	ts, err := e.startTargets(n, pool, pin)
	defer func() {
		for _, t := range ts {
			for _, p := range t.Procs {
				e.StopPooler(p)
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	e.log("%d cores: poolers on CPUs %v, PostgreSQL and pgbench on %v", n, pool, rest)
	for _, t := range ts {
		w := workload{Key: "warm-up", Clients: serverConns, Args: []string{"-S"}}
		if r := e.runOne(ctx, w, t, n, rest, 2*time.Second, 0); !r.OK {
			e.log("warm-up through %s: %s", t.Name, r.Err)
		}
	}
	var out []result
	seq := 0
	for _, w := range ws {
		for round := 1; round <= o.rounds; round++ {
			order := slices.Clone(ts)
			if round%2 == 0 {
				slices.Reverse(order)
			}
			for _, t := range order {
				if ctx.Err() != nil {
					return out, nil
				}
				seq++
				r := e.runOne(ctx, w, t, n, rest, o.duration, seq)
				r.Round = round
				if r.OK {
					e.log("%2dc %-14s r%d %-12s %8.0f TPS %7.1f µs/txn", n, w.Key, round, t.Name, r.TPS, r.CPUus)
				} else {
					e.log("%2dc %-14s r%d %-12s FAILED: %s", n, w.Key, round, t.Name, r.Err)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// jobsFor is pgbench's -j: a thread per two CPUs it has, at least 2.
func jobsFor(clients int, rest []int) int {
	return min(clients, max(2, len(rest)/2))
}

// loginAllowance is added to -T: pgbench's clock runs while its clients log
// in, a SCRAM exchange each with PBKDF2 on pgbench's side, about 9 ms of a
// pgbench thread per client on the 2-core development machine (10,000
// clients: 47 s on two threads); nothing for -C, whose clients log in
// inside the run.
func loginAllowance(w workload, jobs int, rest []int) time.Duration {
	if slices.Contains(w.Args, "-C") {
		return 0
	}
	par := max(1, min(jobs, len(rest)))
	return (time.Duration(w.Clients) * 10 * time.Millisecond / time.Duration(par)).Round(time.Second) + time.Second
}

// runOne runs w against t once and measures it; a run whose logins ate the
// whole -T is run once more with -T longer by its login time.
func (e *env) runOne(ctx context.Context, w workload, t target, n int, rest []int, d time.Duration, seq int) result {
	r := e.runOnce(ctx, w, t, n, rest, d, 0, seq)
	if !r.OK && r.tooShort && ctx.Err() == nil {
		extra := max(time.Duration(r.ConnMs)*time.Millisecond+2*time.Second, d+loginAllowance(w, jobsFor(w.Clients, rest), rest)).Round(time.Second)
		r2 := e.runOnce(ctx, w, t, n, rest, d, extra, seq)
		r2.Retried = fmt.Sprintf("retried with -T +%s: the logins (%d ms) left no measuring window", extra, r.ConnMs)
		return r2
	}
	return r
}

func (e *env) runOnce(ctx context.Context, w workload, t target, n int, rest []int, d, extra time.Duration, seq int) result {
	r := result{Cores: n, Workload: w.Key, Target: t.Name, CPUus: math.NaN()}
	if err := t.alive(); err != nil {
		r.Err = err.Error()
		return r
	}
	jobs := jobsFor(w.Clients, rest)
	limit := d + loginAllowance(w, jobs, rest) + extra
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(t.Port), "-U", benchUser, "-n",
		"-c", strconv.Itoa(w.Clients), "-j", strconv.Itoa(jobs), "-T", strconv.Itoa(int(limit.Seconds()))}
	args = append(append(args, w.Args...), benchDB)
	spec := pgbrun.Spec{Bin: e.o.pgbench, Args: args, Env: pgbenchEnv(w.TLS), PIDs: t.pids(),
		Prefix: filepath.Join(e.Dir, fmt.Sprintf("run%04d", seq)), Timeout: limit + 90*time.Second}
	if !e.o.noPin {
		spec.CPUs = cpuSet(rest)
	}
	o := pgbrun.Run(ctx, spec)
	r.ConnMs = o.ConnectMs
	r.Err, r.tooShort = o.Failure(limit)
	if r.tooShort {
		r.Err += fmt.Sprintf(" (-T %s)", limit)
	}
	if r.Err != "" {
		return r
	}
	win, err := pgbrun.Measure(o.Txns, o.Samples, true, min(time.Second, d/4), 200*time.Millisecond)
	if err != nil {
		r.Err, r.tooShort = fmt.Sprintf("%v (-T %s; logins took %d ms)", err, limit, o.ConnectMs), true
		return r
	}
	r.OK, r.TPS, r.CPUus, r.P50us, r.P99us = true, win.TPS, win.CPUus, win.P50us, win.P99us
	return r
}
