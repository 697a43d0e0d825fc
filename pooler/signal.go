package pooler

import (
	"context"
	"sync"
)

// changeSignal wakes goroutines that wait for a condition over state other
// goroutines change: PAUSE waiting for a database's servers to go, WAIT_CLOSE
// for the servers marked close_needed, SHUTDOWN WAIT_FOR_CLIENTS for the
// last client. Changers call notify after each change (with no lock held
// that a waiter's condition takes); waiters call wait, which re-checks
// their condition after every notify instead of polling it on a timer.
//
// It is a channel closed and replaced on every notify rather than a
// sync.Cond, so that a wait can also end on a context.
type changeSignal struct {
	mu sync.Mutex
	// ch is closed at the next notify; nil until someone waits.
	ch chan struct{}
}

// changed returns a channel closed at the next notify.
func (cs *changeSignal) changed() <-chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.ch == nil {
		cs.ch = make(chan struct{})
	}
	return cs.ch
}

// notify wakes every waiter to re-check its condition. Cheap when no one
// waits: no channel is made until a waiter asks for one.
func (cs *changeSignal) notify() {
	cs.mu.Lock()
	if cs.ch != nil {
		close(cs.ch)
		cs.ch = nil
	}
	cs.mu.Unlock()
}

// wait returns nil once cond is true, or ctx's error if ctx ends first.
// cond runs on the waiter's goroutine, at once and after every notify; the
// channel is taken before cond runs, so a change made while cond runs is
// not missed.
func (cs *changeSignal) wait(ctx context.Context, cond func() bool) error {
	for {
		ch := cs.changed()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
