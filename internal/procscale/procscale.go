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
// The policy (Step) looks at the CPU the process used over each interval:
// at one P, more than UpAt CPUs in one interval goes up at once (a load
// that keeps half a core busy gains from a second one, and the cost of
// waiting one interval is bounded); at more, less than DownBelow CPUs for
// QuietIntervals intervals in a row goes down. The gap between the two
// keeps a steady load from switching back and forth.
//
// It stays off where GOMAXPROCS is set in the environment (the operator
// chose) or the runtime's default is already 1.
package procscale

import (
	"context"
	"os"
	"runtime"
	"time"
)

const (
	// Interval is how often the CPU used is sampled.
	Interval = 250 * time.Millisecond
	// UpAt is the CPUs used in one interval at one P above which the
	// default GOMAXPROCS is restored.
	UpAt = 0.5
	// DownBelow is the CPUs used per interval below which, QuietIntervals
	// times in a row, GOMAXPROCS goes down to 1.
	DownBelow      = 0.25
	QuietIntervals = 8
)

// Step is the policy: p is GOMAXPROCS now, used the CPUs the process used
// over the last interval, quiet how many intervals in a row were below
// DownBelow before it. It returns whether to go down to 1 or up to the
// default, and the new quiet count.
func Step(p int, used float64, quiet int) (down, up bool, quietNext int) {
	if p == 1 {
		return false, used > UpAt, 0
	}
	if used >= DownBelow {
		return false, false, 0
	}
	quiet++
	if quiet >= QuietIntervals {
		return true, false, 0
	}
	return false, false, quiet
}

// Enabled reports whether Run would change anything: GOMAXPROCS is not
// set in the environment, the platform can measure the process's CPU,
// and the runtime's default is more than one P.
func Enabled() bool {
	return os.Getenv("GOMAXPROCS") == "" && canMeasure && runtime.GOMAXPROCS(0) > 1
}

// Run samples the process's CPU every interval and applies Step until ctx
// ends, then restores the default. changed, if not nil, hears each change
// (from, to, and the CPUs used over the interval that decided it).
func Run(ctx context.Context, interval time.Duration, changed func(from, to int, used float64)) {
	if !Enabled() {
		return
	}
	defer runtime.SetDefaultGOMAXPROCS()
	t := time.NewTicker(interval)
	defer t.Stop()
	lastCPU, lastAt := processCPU(), time.Now()
	quiet := 0
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
			used := float64(cpu-lastCPU) / float64(wall)
			lastCPU, lastAt = cpu, now
			p := runtime.GOMAXPROCS(0)
			var down, up bool
			down, up, quiet = Step(p, used, quiet)
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
				changed(p, to, used)
			}
		}
	}
}
