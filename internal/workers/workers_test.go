package workers

import (
	"runtime"
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
