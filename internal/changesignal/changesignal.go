// Package changesignal wakes goroutines that wait for a condition over
// state other goroutines change, without polling it on a timer.
package changesignal

import (
	"context"
	"sync"
)

// Signal wakes goroutines that wait for a condition over state other
// goroutines change (the pooler's PAUSE waiting for a database's servers
// to go, WAIT_CLOSE for the servers marked close_needed, SHUTDOWN
// WAIT_FOR_CLIENTS for the last client). Changers call Notify after each
// change (with no lock held that a waiter's condition takes); waiters call
// Wait, which re-checks their condition after every Notify instead of
// polling it on a timer. The zero Signal is ready to use.
//
// It is a channel closed and replaced on every Notify rather than a
// sync.Cond, so that a wait can also end on a context.
type Signal struct {
	mu sync.Mutex
	// ch is closed at the next Notify; nil until someone waits.
	ch chan struct{}
}

// Changed returns a channel closed at the next Notify, for a waiter that
// selects on more than a context.
func (cs *Signal) Changed() <-chan struct{} {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.ch == nil {
		cs.ch = make(chan struct{})
	}
	return cs.ch
}

// Notify wakes every waiter to re-check its condition. Cheap when no one
// waits: no channel is made until a waiter asks for one.
func (cs *Signal) Notify() {
	cs.mu.Lock()
	if cs.ch != nil {
		close(cs.ch)
		cs.ch = nil
	}
	cs.mu.Unlock()
}

// Wait returns nil once cond is true, or ctx's error if ctx ends first.
// cond runs on the waiter's goroutine, at once and after every Notify; the
// channel is taken before cond runs, so a change made while cond runs is
// not missed.
func (cs *Signal) Wait(ctx context.Context, cond func() bool) error {
	for {
		ch := cs.Changed()
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
