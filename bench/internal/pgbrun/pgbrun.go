//go:build linux

// Package pgbrun runs pgbench against a pooler and measures it: the bench
// tools' (pgbench-compare, benchscale) common way of turning one pgbench run
// into TPS, latency percentiles and the pooler's CPU per transaction.
//
// pgbench writes a per-transaction log (--log); while it runs, the poolers'
// utime+stime are sampled from /proc/PID/stat. Measure then picks a steady
// window (warm-up and tail left out, snapped to the CPU samples) and counts
// transactions and CPU time over exactly that interval.
package pgbrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
	"golang.org/x/sys/unix"
)

// ClkTck is USER_HZ, the unit of utime/stime in /proc/PID/stat; 100 on every
// Linux architecture Go runs on.
const ClkTck = 100

// Sample is the poolers' CPU time at one instant.
type Sample struct {
	At    int64 // Unix µs
	Ticks int64 // utime+stime, clock ticks (summed over the sampled processes)
}

// Txn is one line of pgbench's per-transaction log.
type Txn struct {
	End int64 // completion time, Unix µs
	Lat int64 // latency, µs
}

// Spec is one pgbench invocation.
type Spec struct {
	Bin    string   // pgbench; "" is "pgbench" from PATH
	Args   []string // every argument but --log and --log-prefix, which Run adds
	Env    []string // the whole environment
	Prefix string   // the per-transaction logs' prefix (--log-prefix)
	// PIDs are the processes whose CPU time is sampled every 25 ms and
	// summed (the poolers); none for direct PostgreSQL.
	PIDs []int
	// CPUs, when not nil, is the CPU set pgbench runs on.
	CPUs *unix.CPUSet
	// Timeout kills pgbench (a hang).
	Timeout time.Duration
}

// Output is what one pgbench run left: its summary figures and output, its
// transactions and the CPU samples taken while it ran.
type Output struct {
	Processed int   // "number of transactions actually processed"
	Failed    int   // "number of failed transactions"
	ConnectMs int64 // "initial connection time", ms
	Stdout    string
	Stderr    string
	RunErr    error // how pgbench exited
	TimedOut  bool  // killed after Spec.Timeout
	Txns      []Txn
	LogErr    error // reading the logs
	Samples   []Sample
}

var (
	processedRE = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
	failedRE    = regexp.MustCompile(`number of failed transactions: (\d+)`)
	connTimeRE  = regexp.MustCompile(`initial connection time = ([0-9.]+) ms`)
)

// Run runs pgbench as s says, sampling the CPU of s.PIDs while it runs,
// and reads (and removes) its per-transaction logs.
func Run(ctx context.Context, s Spec) Output {
	var o Output
	rctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	bin := s.Bin
	if bin == "" {
		bin = "pgbench"
	}
	cmd := exec.CommandContext(rctx, bin, append([]string{"--log", "--log-prefix", s.Prefix}, s.Args...)...)
	cmd.Env = s.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	if len(s.PIDs) > 0 {
		go func() {
			defer close(sampled)
			tk := time.NewTicker(25 * time.Millisecond)
			defer tk.Stop()
			for {
				if n, err := SumTicks(s.PIDs); err == nil {
					o.Samples = append(o.Samples, Sample{At: time.Now().UnixMicro(), Ticks: n})
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
	err := benchenv.StartPinned(cmd, s.CPUs)
	if err == nil {
		err = cmd.Wait()
	}
	close(stopSampling)
	<-sampled

	o.Stdout, o.Stderr, o.RunErr = stdout.String(), stderr.String(), err
	o.TimedOut = rctx.Err() != nil && ctx.Err() == nil
	if m := processedRE.FindStringSubmatch(o.Stdout); m != nil {
		o.Processed, _ = strconv.Atoi(m[1])
	}
	if m := failedRE.FindStringSubmatch(o.Stdout); m != nil {
		o.Failed, _ = strconv.Atoi(m[1])
	}
	if m := connTimeRE.FindStringSubmatch(o.Stdout); m != nil {
		ms, _ := strconv.ParseFloat(m[1], 64)
		o.ConnectMs = int64(ms)
	}
	o.Txns, o.LogErr = ReadLogs(s.Prefix)
	return o
}

// Failure says why the run gave no figures ("" when it did: pgbench
// exited cleanly with transactions in its log, none failed); tooShort is
// true when pgbench ran but no transaction completed, which a longer -T
// may cure. limit is the -T it ran with.
func (o Output) Failure(limit time.Duration) (why string, tooShort bool) {
	switch {
	case o.TimedOut:
		return fmt.Sprintf("pgbench still running 90s after -T %s: killed (hang?)", limit), false
	case o.RunErr != nil:
		return fmt.Sprintf("pgbench: %v: %s", o.RunErr, FirstErrorLine(o.Stderr)), false
	case o.Failed > 0:
		return fmt.Sprintf("%d failed transactions: %s", o.Failed, FirstErrorLine(o.Stderr)), false
	case o.LogErr != nil:
		return "reading pgbench log: " + o.LogErr.Error(), false
	case len(o.Txns) == 0:
		return fmt.Sprintf("no transactions in pgbench log (logins took %d ms)", o.ConnectMs), true
	}
	return "", false
}

// Window is what Measure found over a run's steady window.
type Window struct {
	WindowS float64
	Txns    int
	TPS     float64
	P50us   float64
	P99us   float64
	CPUus   float64 // the poolers' utime+stime per transaction, µs; 0 without samples
}

// Measure finds the steady window of a run. It starts warm after the first
// completed transaction (pgbench starts its clients together, after all have
// connected) and ends tail before the last (both shortened for a run whose
// transactions spanned less than 4×warm); with a pooler it is snapped to
// the CPU samples inside it, so that transactions and CPU time are counted
// over exactly the same interval.
func Measure(txns []Txn, samples []Sample, pooler bool, warm, tail time.Duration) (Window, error) {
	var w Window
	if len(txns) == 0 {
		return w, errors.New("no transactions")
	}
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
		i := slices.IndexFunc(samples, func(s Sample) bool { return s.At >= t1 })
		j := -1
		for k := len(samples) - 1; k >= 0; k-- {
			if samples[k].At <= t2 {
				j = k
				break
			}
		}
		if i < 0 || j < 0 || j <= i {
			return w, fmt.Errorf("run too short for a measuring window (%d CPU samples)", len(samples))
		}
		t1, t2, c1, c2 = samples[i].At, samples[j].At, samples[i].Ticks, samples[j].Ticks
	}
	if t2-t1 < 100_000 {
		return w, fmt.Errorf("measuring window of %d ms is too short (transactions spanned %d ms)", (t2-t1)/1000, span.Milliseconds())
	}
	lats := make([]int64, 0, len(txns))
	for _, x := range txns {
		if x.End > t1 && x.End <= t2 {
			lats = append(lats, x.Lat)
		}
	}
	if len(lats) == 0 {
		return w, fmt.Errorf("no transaction completed in the measuring window")
	}
	slices.Sort(lats)
	w.WindowS = float64(t2-t1) / 1e6
	w.Txns = len(lats)
	w.TPS = float64(len(lats)) / w.WindowS
	w.P50us = float64(Percentile(lats, 50))
	w.P99us = float64(Percentile(lats, 99))
	if pooler {
		w.CPUus = float64(c2-c1) * (1e6 / ClkTck) / float64(len(lats))
	}
	return w, nil
}

// Percentile is the nearest-rank percentile of sorted xs.
func Percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(xs))))
	return xs[min(max(rank, 1), len(xs))-1]
}

// ReadLogs reads and removes pgbench's per-transaction logs, one per thread:
// PREFIX.PID and PREFIX.PID.N.
func ReadLogs(prefix string) ([]Txn, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil {
		return nil, err
	}
	var all []Txn
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		txns, err := ParseLog(fh)
		fh.Close()
		os.Remove(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", filepath.Base(f), err)
		}
		all = append(all, txns...)
	}
	return all, nil
}

// ParseLog parses pgbench's --log format:
//
//	client_id transaction_no time script_no time_epoch time_us [schedule_lag] [retries]
//
// time is the latency in µs, or "failed"/"serialization"/"deadlock" for a
// failed transaction (left out here; pgbench's summary counts those).
func ParseLog(f *os.File) ([]Txn, error) {
	var out []Txn
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
		out = append(out, Txn{End: sec*1e6 + us, Lat: lat})
	}
	return out, sc.Err()
}

// FirstErrorLine is the first line of s that names an error (or the start
// of s): what a failed run's report shows.
func FirstErrorLine(s string) string {
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

// LoadAvg is the 1-minute load average: how busy the shared machine was.
func LoadAvg() float64 {
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

// ---------------------------------------------------------------------------
// /proc readings

// CPUTicks is utime+stime of pid (all its threads), in clock ticks.
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return ParseStatTicks(string(b))
}

// SumTicks is CPUTicks summed over pids (N PgBouncers on one port).
func SumTicks(pids []int) (int64, error) {
	var sum int64
	for _, p := range pids {
		n, err := CPUTicks(p)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// ParseStatTicks reads fields 14 (utime) and 15 (stime) of a /proc/PID/stat
// line. The comm field (2) may hold spaces and parentheses, so fields are
// counted from its closing parenthesis.
func ParseStatTicks(s string) (int64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14 → f[11], stime f[12].
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad utime/stime in /proc stat")
	}
	return u + st, nil
}

// ResetPeakRSS makes VmHWM start again from the current RSS (Linux ≥ 4.0),
// so that each run reports its own peak.
func ResetPeakRSS(pid int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

// RaiseNoFile lifts RLIMIT_NOFILE to its hard limit; the poolers, pgbench
// and PostgreSQL inherit it (hundreds or thousands of clients).
func RaiseNoFile() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	r.Cur = r.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	return r.Cur, nil
}
