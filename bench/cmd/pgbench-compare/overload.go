//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
	"github.com/pgturnstile/pgturnstile/bench/internal/pgbrun"
)

// The overload scenario (issue 16; admission/doc.go): a flood of low-priority clients at about three times what
// a pool of 4 server connections serves, and a few high-priority clients
// whose short transactions need about one of the four, through PgBouncer
// (first come, first served) and through pgturnstile with a PGKeeper-style
// admission policy that ranks the flood low. What it shows: whether the
// high-priority work is served at its own speed (PgBouncer queues it
// behind the flood) and whether the low-priority work still gets the slots
// high priority does not need (its goodput next to PgBouncer's, which
// serves it with no policy at all). pgbench cannot drive it: it gives up
// on a client at its first error, and a client whose transaction is shed
// (SQLSTATE 53000) must back off and go on, as an application would.

const (
	overloadKey      = "overload"
	overloadPoolSize = 4
	overloadLow      = 64
	overloadHigh     = 4
	overloadLowSQL   = "SELECT pg_sleep(0.02)"
	// The tag only restates what the policy's default gives
	// application_name=web; it puts pgturnstile's tag reader on the path.
	// PgBouncer and PostgreSQL see a comment.
	overloadHighSQL = "/* pgturnstile: priority=high */ SELECT 1"
	sqlstateShed    = "53000"
)

// overloadPolicy is pgturnstile's admission_file in the scenario, issue
// 16's: batch-* sessions low, everything else high, and the CoDel floors
// PGKeeper uses (the format's defaults, written out because the issue's
// figures are for them).
const overloadPolicy = `# Written by bench/cmd/pgbench-compare for the overload scenario.
[priorities]
names = ["high", "low"]
default = "high"
short_timeout = "5ms"
long_timeout = "100ms"

[[rule]]
application_name = "batch-*"
priority = "low"
`

type outcome uint8

const (
	outOK    outcome = iota
	outShed          // SQLSTATE 53000: shed by admission control
	outOther         // any other error, or a failed reconnect
)

// otxn is one attempt of the overload load, timed from the start of the run.
type otxn struct {
	Start, End time.Duration
	High       bool
	Out        outcome
}

// overloadResult is one round of the overload load against one pooler.
type overloadResult struct {
	Target string
	Round  int
	OK     bool
	Err    string // why not OK: logins failed, a hang, the pooler died

	// Counted over the attempts that started in the measuring window
	// (every one of them finished: the run waits for the last ones).
	WindowS              float64
	HighTxns, HighOK     int
	HighShed             int
	LowTxns, LowShed     int
	OtherErrs            int     // errors other than 53000, either class
	HighP50us, HighP99us float64 // latency of the successful high-priority attempts, µs
	// Successful transactions that completed in the window, per second.
	HighTPS, LowTPS float64

	// Busy is pgturnstile's own figure of how busy the pool was over
	// the window: the growth of its admission gate's in-use slot-seconds
	// over that of its capacity slot-seconds, read from /metrics at both
	// ends (NaN for PgBouncer, which has no such accounting).
	Busy float64

	Reconnects int    // connections found closed: attempts to open them again
	FirstOther string // the first error other than 53000
	LoginMs    int64  // logging the 68 clients in
	Load       float64
}

func (r overloadResult) highSuccessPct() float64 {
	if r.HighTxns == 0 {
		return math.NaN()
	}
	return 100 * float64(r.HighOK) / float64(r.HighTxns)
}

func (r overloadResult) totalTPS() float64 { return r.HighTPS + r.LowTPS }

// summarizeOverload fills r's figures from the attempts of one run over the
// window [warm, end): the first second leaves out the logins' aftermath and
// the pool filling up; end is when clients stopped starting attempts.
// Success and latency count the attempts that started in the window, so
// that the slow ones still running at its end are not left out; TPS counts
// the transactions that completed in it.
func summarizeOverload(r *overloadResult, txns []otxn, warm, end time.Duration) error {
	if end-warm < 100*time.Millisecond {
		return fmt.Errorf("measuring window of %v is too short", end-warm)
	}
	var lats []int64
	var highDone, lowDone int
	for _, x := range txns {
		if x.Start >= warm && x.Start < end {
			switch {
			case x.High && x.Out == outOK:
				r.HighTxns++
				r.HighOK++
				lats = append(lats, (x.End - x.Start).Microseconds())
			case x.High && x.Out == outShed:
				r.HighTxns++
				r.HighShed++
			case x.High:
				r.HighTxns++
				r.OtherErrs++
			case x.Out == outShed:
				r.LowTxns++
				r.LowShed++
			case x.Out == outOther:
				r.LowTxns++
				r.OtherErrs++
			default:
				r.LowTxns++
			}
		}
		if x.Out == outOK && x.End >= warm && x.End < end {
			if x.High {
				highDone++
			} else {
				lowDone++
			}
		}
	}
	if r.HighTxns == 0 {
		return errors.New("no high-priority transaction started in the measuring window")
	}
	r.WindowS = (end - warm).Seconds()
	r.HighTPS = float64(highDone) / r.WindowS
	r.LowTPS = float64(lowDone) / r.WindowS
	r.HighP50us, r.HighP99us = math.NaN(), math.NaN()
	if len(lats) > 0 {
		slices.Sort(lats)
		r.HighP50us = float64(pgbrun.Percentile(lats, 50))
		r.HighP99us = float64(pgbrun.Percentile(lats, 99))
	}
	return nil
}

// overloadClient is one connection of the load and what it did.
type overloadClient struct {
	app        string
	high       bool
	conn       *pgconn.PgConn
	txns       []otxn
	reconnects int
	firstErr   string
}

func connectApp(ctx context.Context, port int, app string) (*pgconn.PgConn, error) {
	return pgconn.Connect(ctx, connString(port)+" application_name="+app)
}

// shedBackoff is the client's wait after an error: random, so that shed
// clients do not come back in step.
func shedBackoff() time.Duration {
	return 10*time.Millisecond + rand.N(40*time.Millisecond)
}

func isShed(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == sqlstateShed
}

// loop runs the client's statement back to back (closed loop: the next
// right after the previous one ends) until d after t0, and backs off after
// an error. A connection the pooler closed is opened again.
func (c *overloadClient) loop(ctx context.Context, port int, t0 time.Time, d time.Duration) {
	sql := overloadLowSQL
	if c.high {
		sql = overloadHighSQL
	}
	note := func(err error) {
		if c.firstErr == "" {
			c.firstErr = err.Error()
		}
	}
	for time.Since(t0) < d && ctx.Err() == nil {
		x := otxn{Start: time.Since(t0), High: c.high}
		var err error
		if c.conn == nil || c.conn.IsClosed() {
			// Not a transaction, but an error the client would see;
			// counted as one so that a pooler closing connections
			// instead of shedding shows.
			c.reconnects++
			var conn *pgconn.PgConn
			if conn, err = connectApp(ctx, port, c.app); err == nil {
				c.conn = conn
				continue
			}
		} else {
			_, err = c.conn.Exec(ctx, sql).ReadAll()
		}
		x.End = time.Since(t0)
		switch {
		case err == nil:
		case isShed(err):
			x.Out = outShed
		default:
			x.Out = outOther
			note(err)
		}
		c.txns = append(c.txns, x)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(shedBackoff()):
			}
		}
	}
}

// runOverload logs the 64 low- and 4 high-priority clients in to t, runs
// them for d and measures the window from warm to d.
// metrics is pgturnstile's metrics_addr, "" for PgBouncer.
func runOverload(ctx context.Context, t target, metrics string, d, warm time.Duration, round int) overloadResult {
	r := overloadResult{Target: t.Name, Round: round, Load: pgbrun.LoadAvg(), HighP50us: math.NaN(), HighP99us: math.NaN(), Busy: math.NaN()}
	if t.Proc != nil && !t.Proc.Alive() {
		r.Err = fmt.Sprintf("%s is not running (exited: %v)", t.Name, t.Proc.Err())
		return r
	}
	// A run still going a minute after its end is hung, not slow.
	rctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	var clients []*overloadClient
	for i := range overloadLow {
		clients = append(clients, &overloadClient{app: fmt.Sprintf("batch-%d", i)})
	}
	for range overloadHigh {
		clients = append(clients, &overloadClient{app: "web", high: true})
	}
	defer func() {
		for _, c := range clients {
			if c.conn != nil {
				c.conn.Close(context.Background())
			}
		}
	}()

	// Everyone logs in first, so that the load starts at once rather than
	// as the SCRAM logins trickle through.
	loginStart := time.Now()
	if err := loginAll(rctx, t.Port, clients); err != nil {
		r.Err = "logins: " + err.Error()
		return r
	}
	r.LoginMs = time.Since(loginStart).Milliseconds()

	t0 := time.Now()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.loop(rctx, t.Port, t0, d) })
	}
	if metrics != "" {
		time.Sleep(time.Until(t0.Add(warm)))
		a, errA := scrapeBusy(metrics)
		time.Sleep(time.Until(t0.Add(d)))
		b, errB := scrapeBusy(metrics)
		if errA == nil && errB == nil && b.capacityS > a.capacityS {
			r.Busy = (b.inUseS - a.inUseS) / (b.capacityS - a.capacityS)
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		r.Err = ctx.Err().Error()
		return r
	}
	if rctx.Err() != nil {
		r.Err = fmt.Sprintf("clients still waiting %v after the end: killed (hang?)", time.Minute)
		return r
	}
	var all []otxn
	for _, c := range clients {
		all = append(all, c.txns...)
		r.Reconnects += c.reconnects
		if r.FirstOther == "" {
			r.FirstOther = c.firstErr
		}
	}
	if err := summarizeOverload(&r, all, warm, d); err != nil {
		r.Err = err.Error()
		return r
	}
	r.OK = true
	return r
}

// loginAll connects every client, 8 logins at a time.
func loginAll(ctx context.Context, port int, clients []*overloadClient) error {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	work := make(chan *overloadClient)
	errs := make(chan error, len(clients))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for c := range work {
				conn, err := connectApp(lctx, port, c.app)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", c.app, err)
					continue
				}
				c.conn = conn
			}
		})
	}
	for _, c := range clients {
		work <- c
	}
	close(work)
	wg.Wait()
	close(errs)
	n := len(errs)
	if n > 0 {
		return fmt.Errorf("%d of %d failed; first: %w", n, len(clients), <-errs)
	}
	return nil
}

// runOverloadScenario starts a PgBouncer and a pgturnstile with a pool of 4,
// pgturnstile with the admission policy, and runs the overload load through
// them interleaved, o.rounds rounds of o.overloadDur. It returns the runs
// and notes for the report (a pooler that died during them).
func runOverloadScenario(ctx context.Context, e *env, o options, bouncer, pooler string, logf func(string, ...any)) ([]overloadResult, []string) {
	var res []overloadResult
	var notes []string
	policy := filepath.Join(e.Dir, "admission.toml")
	policyErr := os.WriteFile(policy, []byte(overloadPolicy), 0o644)
	// pgturnstile serves /metrics, for its gate's busy accounting.
	metricsPort, err := benchenv.FreePort()
	if policyErr == nil {
		policyErr = err
	}
	metricsAddr := map[string]string{tTurnstile: fmt.Sprintf("127.0.0.1:%d", metricsPort)}
	kinds := []struct {
		name, kind, bin string
		io              iniOpts
	}{
		{tBouncer, "pgbouncer", bouncer, iniOpts{PoolSize: overloadPoolSize}},
		{tTurnstile, "pgturnstile", pooler, iniOpts{PoolSize: overloadPoolSize,
			Extra: "admission_file = " + policy + "\nmetrics_addr = " + metricsAddr[tTurnstile] + "\n"}},
	}
	var targets []target
	for _, k := range kinds {
		var p *benchenv.Proc
		err := policyErr
		if err == nil {
			p, err = e.startPooler("overload-"+k.kind, k.kind, k.bin, nil, k.io)
		}
		if err != nil {
			logf("overload: %s did not start: %s", k.name, shorten(err.Error(), 300))
			for round := 1; round <= o.rounds; round++ {
				res = append(res, overloadResult{Target: k.name, Round: round, Err: "did not start: " + err.Error(),
					HighP50us: math.NaN(), HighP99us: math.NaN(), Busy: math.NaN()})
			}
			continue
		}
		defer e.StopPooler(p)
		targets = append(targets, target{Name: k.name, Port: p.Port, Proc: p})
	}
	warm := min(time.Second, o.overloadDur/4)
	for round := 1; round <= o.rounds; round++ {
		order := targets
		if round%2 == 0 {
			order = reversed(targets)
		}
		for _, t := range order {
			if ctx.Err() != nil {
				return res, notes
			}
			r := runOverload(ctx, t, metricsAddr[t.Name], o.overloadDur, warm, round)
			res = append(res, r)
			if r.OK {
				logf("overload r%d %-12s high %5.1f%% ok  p50 %7.1f ms  p99 %7.1f ms  %4.0f tps | low %4.0f tps  shed %5d | busy %s | other errors %d  logins %d ms",
					round, t.Name, r.highSuccessPct(), r.HighP50us/1000, r.HighP99us/1000, r.HighTPS, r.LowTPS, r.LowShed, fmtF(r.Busy, 3), r.OtherErrs, r.LoginMs)
				if r.FirstOther != "" {
					logf("overload r%d %-12s first other error: %s", round, t.Name, shorten(r.FirstOther, 200))
				}
			} else {
				logf("overload r%d %-12s FAILED: %s", round, t.Name, r.Err)
			}
			time.Sleep(100 * time.Millisecond) // let logouts settle
		}
	}
	for _, t := range targets {
		if !t.Proc.Alive() {
			notes = append(notes, fmt.Sprintf("%s (overload scenario) exited during the run: %v", t.Name, t.Proc.Err()))
			logf("%s exited during the overload scenario: %v (see %s)", t.Proc.Name, t.Proc.Err(), filepath.Join(e.Dir, t.Proc.Name+".stderr"))
		}
	}
	return res, notes
}

// gateIntegrals are pgturnstile's busy accounting at one moment: the
// admission gates' in-use and capacity slot-seconds, summed over pools
// (the scenario has one).
type gateIntegrals struct{ inUseS, capacityS float64 }

// scrapeBusy reads pgturnstile's /metrics at addr.
func scrapeBusy(addr string) (gateIntegrals, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return gateIntegrals{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return gateIntegrals{}, err
	}
	return parseBusy(string(body))
}

// parseBusy sums pgturnstile_admission_in_use_seconds_total and
// pgturnstile_admission_capacity_seconds_total over their series.
func parseBusy(text string) (gateIntegrals, error) {
	var g gateIntegrals
	var seen int
	for _, line := range strings.Split(text, "\n") {
		var dst *float64
		switch {
		case strings.HasPrefix(line, "pgturnstile_admission_in_use_seconds_total{"):
			dst = &g.inUseS
		case strings.HasPrefix(line, "pgturnstile_admission_capacity_seconds_total{"):
			dst = &g.capacityS
		default:
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			return g, fmt.Errorf("metrics line %q", line)
		}
		*dst += v
		seen++
	}
	if seen == 0 {
		return g, errors.New("no pgturnstile_admission_*_seconds_total in /metrics")
	}
	return g, nil
}
