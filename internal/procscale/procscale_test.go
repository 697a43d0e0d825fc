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

// TestStep walks the policy through a quiet spell, a busy interval and a
// load between the two thresholds.
func TestStep(t *testing.T) {
	type want struct {
		down, up bool
		quiet    int
	}
	steps := []struct {
		p     int
		used  float64
		quiet int
		want  want
	}{
		{2, 0.1, 0, want{false, false, 1}},
		{2, 0.1, QuietIntervals - 2, want{false, false, QuietIntervals - 1}},
		{2, 0.1, QuietIntervals - 1, want{true, false, 0}},        // the last quiet interval
		{2, DownBelow, QuietIntervals - 1, want{false, false, 0}}, // one busy interval starts again
		{8, 0.3, 5, want{false, false, 0}},                        // between the thresholds: stays
		{1, 0.3, 0, want{false, false, 0}},                        // between the thresholds at one P: stays
		{1, UpAt, 0, want{false, false, 0}},                       // at the threshold: stays
		{1, 0.9, 0, want{false, true, 0}},                         // busy at one P: up at once
		{1, 1.7, 0, want{false, true, 0}},
	}
	for _, s := range steps {
		down, up, quiet := Step(s.p, s.used, s.quiet)
		if got := (want{down, up, quiet}); got != s.want {
			t.Errorf("Step(p=%d, used=%.2f, quiet=%d) = %+v, want %+v", s.p, s.used, s.quiet, got, s.want)
		}
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
		Run(ctx, 20*time.Millisecond, func(from, to int, used float64) {
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
