package procscale

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestPolicy walks the policy through quiet spells, a busy interval, a
// queue at one P, loads between the thresholds and a load on the edge.
func TestPolicy(t *testing.T) {
	quiet := Sample{Used: 0.1, Waits: 100, SlowWaits: 2}
	p := NewPolicy()
	step := func(procs int, s Sample, wantDown, wantUp bool) {
		t.Helper()
		down, up := p.Step(procs, s)
		if down != wantDown || up != wantUp {
			t.Fatalf("Step(%d, %+v) = down %v, up %v; want %v, %v", procs, s, down, up, wantDown, wantUp)
		}
	}
	// Quiet at two Ps: down after QuietIntervals, not before.
	for range QuietIntervals - 1 {
		step(2, quiet, false, false)
	}
	step(2, Sample{Used: DownBelow}, false, false) // a busy interval starts the count again
	for range QuietIntervals - 1 {
		step(2, quiet, false, false)
	}
	step(2, quiet, true, false)
	// Between the thresholds at one P, or few waits sampled: stays.
	step(1, Sample{Used: 0.4, Waits: 100, SlowWaits: 19}, false, false)
	step(1, Sample{Used: 0.1, Waits: MinWaits - 1, SlowWaits: MinWaits - 1}, false, false)
	step(1, Sample{Used: UpAt}, false, false)
	// Busy at one P: up at once. Back within QuickReturn intervals of the
	// down, so the next down needs twice the quiet.
	step(1, Sample{Used: 0.9}, false, true)
	for range 2*QuietIntervals - 1 {
		step(2, quiet, false, false)
	}
	step(2, quiet, true, false)
	// A queue at one P (a fifth of the waits slow) is busy too; again
	// quickly back: four times.
	step(1, Sample{Used: 0.3, Waits: 100, SlowWaits: 20}, false, true)
	for range 4*QuietIntervals - 1 {
		step(2, quiet, false, false)
	}
	step(2, quiet, true, false)
	// A long spell at one P before coming back: need starts over.
	for range QuickReturn {
		step(1, quiet, false, false)
	}
	step(1, Sample{Used: 1.7}, false, true)
	for range QuietIntervals - 1 {
		step(8, quiet, false, false)
	}
	step(8, quiet, true, false)
	// The doubling stops at MaxQuiet.
	for range 10 {
		step(1, Sample{Used: 0.9}, false, true)
		for range p.need - 1 {
			step(2, quiet, false, false)
		}
		step(2, quiet, true, false)
	}
	if p.need != MaxQuiet {
		t.Fatalf("need after ten quick returns = %d, want MaxQuiet %d", p.need, MaxQuiet)
	}
}

// TestRunFollowsLoad runs the scaler on this test process: idle, it goes
// down to one P; kept busy by two spinning goroutines, back up to the
// default; and at the end the default is restored.
func TestRunFollowsLoad(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs the runtime's default GOMAXPROCS above 1, not set in the environment")
	}
	max := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithCancel(context.Background())
	var changes []string
	var changesLen atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, 20*time.Millisecond, func(from, to int, _ Sample) {
			changes = append(changes, fmtChange(from, to))
			changesLen.Add(1)
		})
	}()
	waitFor(t, "GOMAXPROCS 1 while idle", func() bool { return runtime.GOMAXPROCS(0) == 1 })

	var stop atomic.Bool
	for range 2 {
		go func() {
			for !stop.Load() {
			}
		}()
	}
	waitFor(t, "the default GOMAXPROCS while busy", func() bool { return runtime.GOMAXPROCS(0) == max })
	stop.Store(true)

	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != max {
		t.Fatalf("GOMAXPROCS after Run = %d, want the default %d", got, max)
	}
	if changesLen.Load() < 2 || changes[0] != fmtChange(max, 1) || changes[1] != fmtChange(1, max) {
		t.Fatalf("changes heard: %v, want %s then %s first", changes, fmtChange(max, 1), fmtChange(1, max))
	}
}

func fmtChange(from, to int) string { return fmt.Sprintf("%d->%d", from, to) }

// waitFor polls cond, for up to 20 seconds (the scaler acts on its own
// schedule; no test asserts how fast).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 20s (GOMAXPROCS %d)", what, runtime.GOMAXPROCS(0))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
