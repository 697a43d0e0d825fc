//go:build linux

// Command hostilemem measures how much memory a pooler process takes when one
// logged-in client streams a huge message into it, for pgturnstile and
// PgBouncer side by side in one run, and writes bench/HOSTILE-MEMORY.md.
//
// It is a benchmark, not a test: it asserts nothing. It starts a throwaway
// PostgreSQL 15 and, for each case and each pooler, a fresh pooler with the
// same ini (transaction pooling, max_prepared_statements = 200, SCRAM
// secrets in the userlist, an admin_users and a stats_users user). A client
// logs in with pgconn, Hijack()s the connection and writes one huge message
// (a 5-byte header that tells the truth about its length, then the body in
// 1 MiB chunks), stopping if the pooler closes the connection. Meanwhile the
// pooler's VmRSS is sampled every 10 ms and a second, ordinary client runs
// SELECT 1 every 5 ms. See bench/README.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

type options struct {
	turnstile    string
	bouncer      string
	pgBin        string
	out          string
	only         string
	size         int // bytes of 'x' in each huge message
	chunk        int // bytes per write
	replyTimeout time.Duration
	settle       time.Duration
	keep         bool
}

func main() {
	var o options
	var sizeMiB int
	flag.StringVar(&o.turnstile, "pgturnstile", "bin/pgturnstile", "pgturnstile binary (make build)")
	flag.StringVar(&o.bouncer, "pgbouncer", "", "PgBouncer binary (default: pgbouncer from PATH or /usr/sbin)")
	flag.StringVar(&o.pgBin, "pg-bin", "/usr/lib/postgresql/15/bin", "PostgreSQL server binaries")
	flag.StringVar(&o.out, "out", "bench/HOSTILE-MEMORY.md", "report to write (also printed)")
	flag.StringVar(&o.only, "only", "", "run only cases whose key matches this regexp (parse-named, parse-unnamed, describe, close, console-admin, console-stats)")
	flag.IntVar(&sizeMiB, "size-mib", 200, "MiB of 'x' in each huge message")
	flag.IntVar(&o.chunk, "chunk", 1<<20, "bytes per write of the body")
	flag.DurationVar(&o.replyTimeout, "reply-timeout", 30*time.Second, "how long to wait for ReadyForQuery or the close after the message is written")
	flag.DurationVar(&o.settle, "settle", time.Second, "wait after the client leaves before reading RSS again")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir (configs, pooler logs, PostgreSQL log)")
	flag.Parse()
	o.size = sizeMiB << 20
	if o.bouncer == "" {
		if p, err := exec.LookPath("pgbouncer"); err == nil {
			o.bouncer = p
		} else {
			o.bouncer = "/usr/sbin/pgbouncer"
		}
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "hostilemem:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	var re *regexp.Regexp
	if o.only != "" {
		var err error
		if re, err = regexp.Compile(o.only); err != nil {
			return fmt.Errorf("-only: %v", err)
		}
	}
	for _, b := range []*string{&o.turnstile, &o.bouncer} {
		if _, err := os.Stat(*b); err != nil {
			return fmt.Errorf("%s: %v (make build; apt-get install -y pgbouncer)", *b, err)
		}
		abs, err := filepath.Abs(*b) // the poolers run in the temp dir
		if err != nil {
			return err
		}
		*b = abs
	}
	in := gatherInfo(o)
	began := time.Now()

	e, err := newEnv(o.pgBin)
	if err != nil {
		return err
	}
	defer e.close(o.keep)
	e.noPrepared = bouncerPredatesPrepared(in.Bouncer)
	in.NoPrepared = e.noPrepared
	logf("starting PostgreSQL")
	if err := e.startPostgres(); err != nil {
		return err
	}

	var results []result
	configs := map[string]map[string]string{}
	for i, c := range cases() {
		if re != nil && !re.MatchString(c.key) {
			continue
		}
		// Alternate which pooler goes first, so neither always runs on
		// the machine the other one just loaded.
		order := []string{kindTurnstile, kindBouncer}
		if i%2 == 1 {
			order = []string{kindBouncer, kindTurnstile}
		}
		for _, kind := range order {
			bin := o.turnstile
			if kind == kindBouncer {
				bin = o.bouncer
			}
			name := fmt.Sprintf("%s-%s", strings.ToLower(kind), c.key)
			p, err := e.startPooler(name, kind, bin)
			if err != nil {
				return err
			}
			if configs[kind] == nil {
				cfg, err := showConfig(p.Port, configKeys)
				if err != nil {
					cfg = map[string]string{"error": err.Error()}
				}
				configs[kind] = cfg
			}
			logf("%s: %s", c.key, kind)
			r := runCase(p, c, o)
			logf("  peak +%s, after %+.1f MiB, %s, %s; probe %d ok %d failed, max %s",
				mib(r.peakKB-r.baselineKB), float64(r.afterKB-r.baselineKB)/1024, strings.Join(r.replies, "; "),
				r.ending, r.probe.ok, r.probe.failed, r.probe.maxLatency.Round(time.Millisecond))
			if r.err != "" {
				logf("  error: %s", r.err)
			}
			e.StopPooler(p.Proc)
			results = append(results, r)
		}
	}
	in.Elapsed = time.Since(began)
	report := render(o, in, configs, results)
	fmt.Print(report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	return nil
}

// configKeys are the settings the report shows for each pooler, read back
// with SHOW CONFIG ("not a setting" when the pooler has no such key).
var configKeys = []string{
	"pool_mode", "max_prepared_statements", "max_packet_size", "pkt_buf",
	"max_held_message_size", "held_message_budget", "prepared_statement_budget",
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
