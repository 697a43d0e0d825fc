//go:build linux

// Command benchscale is `make bench-scale`: pgturnstile with GOMAXPROCS=N,
// one PgBouncer, and N PgBouncers sharing one port with so_reuseport, at
// N = 1, 2, 4, … up to the machine's cores, each pooler pinned to N cores,
// on the pooler-bound shape the multi-threaded poolers publish (40 server
// connections, pgbench -S at 1/40/120/500/10,000 clients, a new SCRAM login
// per transaction, TLS). It reports TPS and the poolers' CPU per transaction
// per core count and writes the table for this machine into BENCHMARKS.md
// (bench/README.md, "Scale with cores").
//
// Every binary it runs can be given by flag, so it runs the same from a
// self-contained bundle (make bench-scale-bundle) on a machine with nothing
// installed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	quick      bool
	out        string
	pgBin      string
	pgbench    string
	pgbouncer  string
	turnstile  string
	cores      []int
	clients    []int
	rounds     int
	duration   time.Duration
	scale      int
	only       *regexp.Regexp
	keep       bool
	noPin      bool
	machine    string
	stdoutOnly bool
	// defaultClients: -clients was not given (10,000 clients are then
	// left out on a machine of fewer than bigClientsCPUs CPUs).
	defaultClients bool
}

// bigClientsCPUs is the fewest CPUs on which the default run includes
// 10,000 clients: their SCRAM logins alone take pgbench about 47 s on the
// 2-core development machine (90 s with pgbench pinned to one core), per
// target and round.
const bigClientsCPUs = 8

func main() {
	var o options
	flag.BoolVar(&o.quick, "quick", false, "smoke test: 1 round of 3 s, scale 1, clients 1 and 120, one --connect and one TLS workload")
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "Markdown file whose bench-scale section gets this machine's table (other machines' tables and the rest of the file are kept)")
	flag.StringVar(&o.pgBin, "pg-bin", "/usr/lib/postgresql/15/bin", "PostgreSQL 15's bin directory (initdb, pg_ctl, postgres)")
	flag.StringVar(&o.pgbench, "pgbench", "", "pgbench (default: PG-BIN/pgbench, else from PATH)")
	flag.StringVar(&o.pgbouncer, "pgbouncer", "", "PgBouncer (default: from PATH, else /usr/sbin/pgbouncer)")
	flag.StringVar(&o.turnstile, "pgturnstile", "bin/pgturnstile", "pgturnstile binary")
	coresFlag := flag.String("cores", "", "core counts to run, comma-separated (default 1, 2, 4, … up to the CPUs this process may use, and that count itself)")
	clientsFlag := flag.String("clients", "", "client counts of the select-only workloads (default 1,40,120,500,10000; with -quick 1,120)")
	flag.IntVar(&o.rounds, "rounds", 0, "rounds per workload, targets interleaved (default 2; with -quick 1)")
	flag.DurationVar(&o.duration, "duration", 0, "pgbench -T per run before the login allowance (default 6s; with -quick 3s)")
	flag.IntVar(&o.scale, "scale", 0, "pgbench -i scale (default 10; with -quick 1)")
	only := flag.String("only", "", "run only the workloads whose key matches this regexp (keys: S-1, S-40, …, connect-40, tls-120, connect-tls-40)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir (configs, logs, failed runs' pgbench output)")
	flag.BoolVar(&o.noPin, "no-pin", false, "do not pin the poolers, pgbench and PostgreSQL to CPUs")
	flag.StringVar(&o.machine, "machine", "", "the machine's name in the report (default: CPU model and core count)")
	flag.BoolVar(&o.stdoutOnly, "print", false, "print the machine's table instead of writing -out")
	merge := flag.String("merge", "", "run nothing: copy every machine's table from FILE's bench-scale section (a run elsewhere, e.g. from the bundle) into -out, replacing those machines' tables there")
	flag.Parse()

	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	if *merge != "" {
		if err := mergeFrom(*merge, o.out, logf); err != nil {
			fatal("-merge: %v", err)
		}
		return
	}
	var err error
	if o.cores, err = parseInts(*coresFlag); err != nil {
		fatal("-cores: %v", err)
	}
	if o.clients, err = parseInts(*clientsFlag); err != nil {
		fatal("-clients: %v", err)
	}
	if *only != "" {
		if o.only, err = regexp.Compile(*only); err != nil {
			fatal("-only: %v", err)
		}
	}
	defaults(&o)
	if err := run(o, logf); err != nil {
		fatal("%v", err)
	}
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchscale: "+format+"\n", args...)
	os.Exit(1)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func defaults(o *options) {
	pick := func(quick, full int) int {
		if o.quick {
			return quick
		}
		return full
	}
	if o.rounds == 0 {
		o.rounds = pick(1, 2)
	}
	if o.duration == 0 {
		o.duration = time.Duration(pick(3, 6)) * time.Second
	}
	if o.scale == 0 {
		o.scale = pick(1, 10)
	}
	if len(o.clients) == 0 {
		o.defaultClients = true
		o.clients = []int{1, 40, 120, 500, 10000}
		if o.quick {
			o.clients = []int{1, 120}
		}
	}
	if o.pgbench == "" {
		o.pgbench = filepath.Join(o.pgBin, "pgbench")
		if _, err := os.Stat(o.pgbench); err != nil {
			o.pgbench = "pgbench"
		}
	}
	if o.pgbouncer == "" {
		o.pgbouncer = "/usr/sbin/pgbouncer"
		if p, err := exec.LookPath("pgbouncer"); err == nil {
			o.pgbouncer = p
		}
	}
	// The processes start in the temp dir: paths relative to here must
	// not be taken relative to it.
	for _, p := range []*string{&o.pgBin, &o.pgbench, &o.pgbouncer, &o.turnstile} {
		if strings.Contains(*p, "/") {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
}

// coreCounts is 1, 2, 4, … up to n, and n itself.
func coreCounts(n int) []int {
	var out []int
	for c := 1; c <= n; c *= 2 {
		out = append(out, c)
	}
	if out[len(out)-1] != n {
		out = append(out, n)
	}
	return out
}

// workload is one pgbench invocation, run against every target at every
// core count.
type workload struct {
	Key     string
	Name    string
	Clients int
	Args    []string // besides connection, -c, -j, -T
	TLS     bool     // PGSSLMODE=require (else disable)
}

func workloads(o options) []workload {
	var ws []workload
	for _, c := range o.clients {
		ws = append(ws, workload{Key: fmt.Sprintf("S-%d", c), Name: fmt.Sprintf("`-S`, %d %s", c, plural(c, "client")), Clients: c, Args: []string{"-S"}})
	}
	ws = append(ws,
		workload{Key: "connect-40", Name: "`-S -C` (SCRAM login per transaction), 40 clients", Clients: 40, Args: []string{"-S", "-C"}},
		workload{Key: "tls-120", Name: "`-S` over TLS, 120 clients", Clients: 120, Args: []string{"-S"}, TLS: true},
		workload{Key: "connect-tls-40", Name: "`-S -C` over TLS (TLS handshake and SCRAM login per transaction), 40 clients", Clients: 40, Args: []string{"-S", "-C"}, TLS: true},
	)
	if o.quick {
		ws = slices.DeleteFunc(ws, func(w workload) bool { return w.Key == "connect-tls-40" })
	}
	if o.only != nil {
		ws = slices.DeleteFunc(ws, func(w workload) bool { return !o.only.MatchString(w.Key) })
	}
	return ws
}

func run(o options, logf func(string, ...any)) error {
	cpus, err := allowedCPUs()
	if err != nil {
		return err
	}
	if len(o.cores) == 0 {
		o.cores = coreCounts(len(cpus))
	}
	for _, n := range o.cores {
		if n > len(cpus) {
			return fmt.Errorf("-cores %d: this process may use %d CPUs", n, len(cpus))
		}
	}
	var notes []string
	if o.defaultClients && len(cpus) < bigClientsCPUs && slices.Contains(o.clients, 10000) {
		o.clients = slices.DeleteFunc(o.clients, func(c int) bool { return c == 10000 })
		notes = append(notes, fmt.Sprintf("S-10000 not run by default on fewer than %d CPUs: 10,000 SCRAM logins (PBKDF2 on pgbench's side) take pgbench about 47 s on 2 cores, 90 s pinned to one, before the first transaction, for each target and round; `-clients 1,40,120,500,10000` runs it (it works here: 9,600 TPS through one PgBouncer after a 47 s login, unpinned)", bigClientsCPUs))
		logf("%s", notes[0])
	}
	ws := workloads(o)
	if len(ws) == 0 {
		return fmt.Errorf("no workload matches -only")
	}
	for _, bin := range []string{o.turnstile, o.pgbouncer, filepath.Join(o.pgBin, "initdb"), filepath.Join(o.pgBin, "pg_ctl")} {
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("%v (see -h for the flags that name each binary)", err)
		}
	}
	if _, err := exec.LookPath(o.pgbench); err != nil {
		return fmt.Errorf("pgbench: %v", err)
	}

	nofile := raiseNoFile(maxClients(ws) + 2000)
	ws = slices.DeleteFunc(ws, func(w workload) bool {
		if need := uint64(w.Clients) + 200; need > nofile {
			notes = append(notes, fmt.Sprintf("%s left out: %d clients need about %d open files per process (pgbench holds every client, the pooler every client and server), and the open-files limit is %d (raise `ulimit -Hn`, or run as root, which raises it)", w.Key, w.Clients, need, nofile))
			logf("%s", notes[len(notes)-1])
			return true
		}
		return false
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e, err := newEnv(o, logf)
	if err != nil {
		return err
	}
	defer e.close(o.keep)
	start := time.Now()
	in := collectInfo(o, cpus, nofile)
	in.Notes = append(in.Notes, notes...)
	logf("%s; cores %v; %d workloads × %d rounds of %s", in.Machine, o.cores, len(ws), o.rounds, o.duration)
	if err := e.startPostgres(o); err != nil {
		return err
	}
	logf("PostgreSQL on :%d; pgbench -i -s %d", e.PGPort, o.scale)
	if err := e.pgbenchInit(o.scale); err != nil {
		return err
	}

	var results []result
	for _, n := range o.cores {
		if ctx.Err() != nil {
			break
		}
		res, err := e.runCores(ctx, o, cpus, n, ws)
		if err != nil {
			return fmt.Errorf("%d cores: %v", n, err)
		}
		results = append(results, res...)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	in.Elapsed = time.Since(start)
	body := report(o, in, ws, results)
	fmt.Print(body)
	if o.stdoutOnly {
		return nil
	}
	return writeSection(o.out, in.Machine, body, logf)
}

func maxClients(ws []workload) int {
	m := 0
	for _, w := range ws {
		m = max(m, w.Clients)
	}
	return m
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
