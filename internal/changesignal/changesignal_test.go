package changesignal

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// A waiter wakes on Notify and returns once its condition holds; a change
// made without Notify is not seen (there is no poll), and it stays blocked
// while the condition is false.
func TestSignalWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cs Signal
		var n atomic.Int32
		checks := atomic.Int32{}
		done := make(chan error, 1)
		go func() {
			done <- cs.Wait(context.Background(), func() bool {
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
		cs.Notify()
		blocked("Notify with the condition false")
		n.Store(2)
		blocked("change without Notify")
		if got := checks.Load(); got != 2 {
			t.Errorf("condition checked %d times before the last Notify, want 2 (once at start, once per Notify)", got)
		}
		cs.Notify()
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("wait = %v, want nil", err)
			}
		default:
			t.Fatal("wait still blocked after its condition held and Notify")
		}
	})
}

// A wait whose condition never holds ends with its context.
func TestSignalWaitContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cs Signal
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- cs.Wait(ctx, func() bool { return false }) }()
		synctest.Wait()
		cs.Notify() // wakes it to check again; still false
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

// A condition already true returns at once, and Notify with no waiter is
// harmless.
func TestSignalNoWaiter(t *testing.T) {
	var cs Signal
	cs.Notify()
	if err := cs.Wait(context.Background(), func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	cs.Notify()
	cs.Notify()
}

// Changed hands every waiter the same channel until a Notify closes it;
// the next waiter gets a new one.
func TestSignalChanged(t *testing.T) {
	var cs Signal
	a, b := cs.Changed(), cs.Changed()
	if a != b {
		t.Fatal("two waiters before a Notify got different channels")
	}
	cs.Notify()
	select {
	case <-a:
	default:
		t.Fatal("Notify did not close the channel")
	}
	c := cs.Changed()
	select {
	case <-c:
		t.Fatal("the channel after a Notify is already closed")
	default:
	}
}
