// Package procscale sizes the Go scheduler to the pooler's load: one P
// (GOMAXPROCS=1) while the process uses little CPU, the default (every
// CPU the runtime would use) as soon as it needs more.
//
// Why: with more than one P, every goroutine made ready (a socket turned
// readable, a server handed over) wakes another OS thread to look for work
// (the runtime's wakep), which mostly finds none and sleeps again: two
// context switches for nothing, many times per client login. On a
// connect-per-transaction load measured in a VM (pgbench -C, 20 clients,
// TLS with an ECDSA certificate) one P cut the pooler's CPU per connection
// by a tenth and context switches per connection from 17 to 12; at a
// higher load the second P is what lets the pooler use a second core.
// PgBouncer runs on one thread throughout; pgturnstile runs on one while
// one is plenty and on all of them when it is not.
//
// The policy (Policy.Step) looks at each interval's CPU use and at how
// long goroutines waited for a P (the runtime's /sched/latencies): at one
// P, an interval in which at least SlowShare of the sampled waits took
// SlowWait or more, or more than UpAt CPUs were used, goes up at once: the
// one P is a queue (select-only through 10 or 100 clients, measured: 29 to
// 64 % of waits over 50 µs at a third of a CPU, and 11 % fewer
// transactions than with two); at more, less than DownBelow CPUs for
// `need` intervals in a row goes down (connect per transaction through 50
// clients: 0.15 CPUs at two Ps, and at one 2 to 7 % of waits over 50 µs).
// `need` starts at QuietIntervals and doubles, up to MaxQuiet, each time
// the pooler had to come back up within QuickReturn intervals of going
// down, so a load on the edge does not switch back and forth.
//
// It stays off where GOMAXPROCS is set in the environment (the operator
// chose) or the runtime's default is already 1.
package procscale

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"time"
)

const (
	// Interval is how often the process is sampled.
	Interval = 250 * time.Millisecond
	// UpAt is the CPUs used in one interval at one P above which the
	// default GOMAXPROCS is restored.
	UpAt = 0.5
	// SlowWait and SlowShare: at one P, an interval in which SlowShare of
	// the goroutines made runnable waited SlowWait or more for the P
	// restores the default (judged from MinWaits sampled waits on).
	SlowWait  = 50 * time.Microsecond
	SlowShare = 0.2
	MinWaits  = 50
	// DownBelow is the CPUs used per interval below which, need intervals
	// in a row (QuietIntervals, up to MaxQuiet), GOMAXPROCS goes down to 1.
	DownBelow      = 0.25
	QuietIntervals = 8   // 2 s
	MaxQuiet       = 240 // 1 min
	// QuickReturn: coming back up within this many intervals of going
	// down doubles need.
	QuickReturn = 120 // 30 s
)

// Sample is what one interval measured.
type Sample struct {
	Used      float64 // CPUs the process used
	Waits     uint64  // goroutine waits for a P the runtime sampled
	SlowWaits uint64  // of them, those of SlowWait or more
}

// Policy decides, interval by interval, when to go down to one P and back.
type Policy struct {
	quiet     int // intervals in a row below DownBelow, at more than one P
	need      int // quiet intervals needed to go down
	sinceDown int // intervals since the last time down
}

// NewPolicy is a policy at its start: QuietIntervals needed to go down.
func NewPolicy() *Policy { return &Policy{need: QuietIntervals, sinceDown: QuickReturn} }

// Step takes one interval's sample at procs Ps and says whether to go down
// to one or up to the default.
func (p *Policy) Step(procs int, s Sample) (down, up bool) {
	if procs == 1 {
		p.sinceDown++
		slow := s.Waits >= MinWaits && float64(s.SlowWaits) >= SlowShare*float64(s.Waits)
		if s.Used <= UpAt && !slow {
			return false, false
		}
		if p.sinceDown < QuickReturn {
			p.need = min(2*p.need, MaxQuiet)
		} else {
			p.need = QuietIntervals
		}
		p.quiet = 0
		return false, true
	}
	if s.Used >= DownBelow {
		p.quiet = 0
		return false, false
	}
	p.quiet++
	if p.quiet < p.need {
		return false, false
	}
	p.quiet, p.sinceDown = 0, 0
	return true, false
}

// Enabled reports whether Run would change anything: GOMAXPROCS is not
// set in the environment, the platform can measure the process's CPU,
// and the runtime's default is more than one P.
func Enabled() bool {
	return os.Getenv("GOMAXPROCS") == "" && canMeasure && runtime.GOMAXPROCS(0) > 1
}

// Run samples the process every interval and applies the policy until ctx
// ends, then restores the default. changed, if not nil, hears each change
// (from, to, and the interval's sample that decided it).
func Run(ctx context.Context, interval time.Duration, changed func(from, to int, s Sample)) {
	if !Enabled() {
		return
	}
	defer runtime.SetDefaultGOMAXPROCS()
	t := time.NewTicker(interval)
	defer t.Stop()
	pol := NewPolicy()
	w := newWaitReader()
	lastCPU, lastAt := processCPU(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			cpu := processCPU()
			wall := now.Sub(lastAt)
			if wall <= 0 {
				continue
			}
			s := Sample{Used: float64(cpu-lastCPU) / float64(wall)}
			s.Waits, s.SlowWaits = w.read()
			lastCPU, lastAt = cpu, now
			p := runtime.GOMAXPROCS(0)
			down, up := pol.Step(p, s)
			switch {
			case down:
				runtime.GOMAXPROCS(1)
			case up:
				// The default again, which also lets the runtime
				// follow a changed CPU limit (cgroup) by itself.
				runtime.SetDefaultGOMAXPROCS()
			default:
				continue
			}
			if to := runtime.GOMAXPROCS(0); changed != nil && to != p {
				changed(p, to, s)
			}
		}
	}
}

// waitReader reads how many goroutine waits for a P the runtime sampled
// since the last read, and how many of them took SlowWait or more.
type waitReader struct {
	sample []metrics.Sample
	last   []uint64
}

func newWaitReader() *waitReader {
	w := &waitReader{sample: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
	w.read()
	return w
}

func (w *waitReader) read() (waits, slow uint64) {
	metrics.Read(w.sample)
	if w.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0
	}
	h := w.sample[0].Value.Float64Histogram()
	if len(w.last) != len(h.Counts) {
		w.last = make([]uint64, len(h.Counts))
	}
	for i, c := range h.Counts {
		d := c - w.last[i]
		waits += d
		if h.Buckets[i] >= SlowWait.Seconds() { // the bucket's lower bound
			slow += d
		}
	}
	copy(w.last, h.Counts)
	return waits, slow
}
