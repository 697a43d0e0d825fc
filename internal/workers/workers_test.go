package workers

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// runningOn is the id of the goroutine calling it.
func runningOn() string {
	b := make([]byte, 64)
	n := runtime.Stack(b, false)
	return strings.Fields(string(b[:n]))[1]
}

func idleWorkers(w *Pool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idle)
}

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for limit := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(limit) {
			t.Fatalf("never: %s", what)
		}
	}
}

// A client's goroutine is one a finished client left, while the pool is
// open; at most maxIdle wait; Stop ends the idle ones.
func TestReuseBoundAndStop(t *testing.T) {
	var w Pool
	got := make(chan string, 1)
	w.Run(func() { got <- runningOn() }) // closed: a goroutine of its own
	<-got
	if n := idleWorkers(&w); n != 0 {
		t.Fatalf("%d idle workers before start", n)
	}

	w.Start()
	w.Run(func() { got <- runningOn() })
	first := <-got
	eventuallyTrue(t, "the worker waits for the next client", func() bool { return idleWorkers(&w) == 1 })
	w.Run(func() { got <- runningOn() })
	if second := <-got; second != first {
		t.Fatalf("the second client ran on goroutine %s, not on the idle worker %s", second, first)
	}

	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 * maxIdle {
		wg.Add(1)
		w.Run(func() { defer wg.Done(); <-release })
	}
	before := runtime.NumGoroutine()
	close(release)
	wg.Wait()
	eventuallyTrue(t, "the idle workers settle at the bound", func() bool {
		return idleWorkers(&w) == maxIdle && runtime.NumGoroutine() <= before-2*maxIdle
	})

	w.Stop()
	eventuallyTrue(t, "stop ends the idle workers", func() bool { return runtime.NumGoroutine() <= before-3*maxIdle })
	w.Run(func() { got <- runningOn() }) // closed again: runs all the same
	<-got
	if n := idleWorkers(&w); n != 0 {
		t.Fatalf("%d idle workers after stop", n)
	}
}

// Shrink ends the workers idle since the last Shrink but shrinkKeep, and
// their goroutines end; a worker taken in between is kept, and
// the pool goes on reusing those it kept.
func TestShrink(t *testing.T) {
	var w Pool
	w.Start()
	defer w.Stop()
	base := runtime.NumGoroutine()
	burst := func(n, idle int) {
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			w.Run(func() { defer wg.Done(); <-release })
		}
		close(release)
		wg.Wait()
		eventuallyTrue(t, "the burst's workers idle", func() bool { return idleWorkers(&w) == idle })
	}
	burst(20, 20)
	// The first Shrink after the burst: the burst took every worker there
	// was, so none was idle all along.
	if n := w.Shrink(); n != 0 {
		t.Fatalf("the first Shrink ended %d workers, want 0", n)
	}
	// Six are taken and come back: the other fourteen were idle all along.
	burst(6, 20)
	w.mu.Lock()
	kept := slices.Clone(w.idle[14-shrinkKeep:])
	w.mu.Unlock()
	if n := w.Shrink(); n != 14-shrinkKeep {
		t.Fatalf("Shrink ended %d workers, want %d", n, 14-shrinkKeep)
	}
	w.mu.Lock()
	same := slices.Equal(w.idle, kept)
	w.mu.Unlock()
	if !same {
		t.Fatal("Shrink did not keep the most recently idle workers")
	}
	eventuallyTrue(t, "the ended workers' goroutines end", func() bool { return runtime.NumGoroutine() <= base+10 })
	// Nothing taken since: all but shrinkKeep end now.
	if n := w.Shrink(); n != 10-shrinkKeep {
		t.Fatalf("the third Shrink ended %d workers, want %d", n, 10-shrinkKeep)
	}
	if n := idleWorkers(&w); n != shrinkKeep {
		t.Fatalf("%d idle workers, want %d", n, shrinkKeep)
	}
	got := make(chan string, 1)
	w.Run(func() { got <- runningOn() })
	<-got
	eventuallyTrue(t, "the worker is idle again", func() bool { return idleWorkers(&w) == shrinkKeep })
	if n := w.Shrink(); n != 0 || idleWorkers(&w) != shrinkKeep {
		t.Fatalf("Shrink with %d idle ended %d", shrinkKeep, n)
	}
}
