package pooler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// A waiter wakes on notify and returns once its condition holds; a change
// made without notify is not seen (there is no poll), and it stays blocked
// while the condition is false.
func TestChangeSignalWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cs changeSignal
		var n atomic.Int32
		checks := atomic.Int32{}
		done := make(chan error, 1)
		go func() {
			done <- cs.wait(context.Background(), func() bool {
				checks.Add(1)
				return n.Load() >= 2
			})
		}()
		blocked := func(step string) {
			t.Helper()
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("%s: wait returned %v before its condition held", step, err)
			default:
			}
		}
		blocked("start")
		n.Store(1)
		cs.notify()
		blocked("notify with the condition false")
		n.Store(2)
		blocked("change without notify")
		if got := checks.Load(); got != 2 {
			t.Errorf("condition checked %d times before the last notify, want 2 (once at start, once per notify)", got)
		}
		cs.notify()
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("wait = %v, want nil", err)
			}
		default:
			t.Fatal("wait still blocked after its condition held and notify")
		}
	})
}

// A wait whose condition never holds ends with its context.
func TestChangeSignalWaitContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cs changeSignal
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cs.wait(ctx, func() bool { return false }) }()
		synctest.Wait()
		cs.notify() // wakes it to check again; still false
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("wait returned %v before its context ended", err)
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("wait = %v, want context.Canceled", err)
		}
	})
}

// A condition already true returns at once, and notify with no waiter is
// harmless.
func TestChangeSignalNoWaiter(t *testing.T) {
	var cs changeSignal
	cs.notify()
	if err := cs.wait(context.Background(), func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	cs.notify()
	cs.notify()
}
