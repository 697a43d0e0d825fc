// Package fakeclock is a manual admission.Clock for tests and simulations:
// time moves only when Advance or Set is called, and due timers run
// synchronously in the caller's goroutine, in deadline order, each seeing
// Now() equal to its deadline. Safe for concurrent use.
package fakeclock

import (
	"container/heap"
	"sync"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
)

// Clock is a fake admission.Clock.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    uint64
	calls  uint64
}

var _ admission.Clock = (*Clock)(nil)

// New returns a clock reading start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d. f never runs inside AfterFunc, even for
// d ≤ 0: it runs on the next Advance or Set (Advance(0) runs it).
func (c *Clock) AfterFunc(d time.Duration, f func()) admission.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.seq++
	t := &timer{c: c, when: c.now.Add(d), seq: c.seq, f: f, idx: -1}
	heap.Push(&c.timers, t)
	return t
}

// Advance moves time forward by d, running every timer due on the way.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.advanceTo(target)
}

// Set moves time to t. Moving forward runs the due timers as Advance does;
// moving backward only changes Now (the gate clamps negative elapsed time).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.Before(c.now) {
		c.now = t
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.advanceTo(t)
}

// AdvanceToNext moves time to the earliest pending deadline (if it is in
// the future) and runs the timers due then. False if none is pending.
func (c *Clock) AdvanceToNext() bool {
	at, ok := c.NextDeadline()
	if !ok {
		return false
	}
	c.mu.Lock()
	if at.Before(c.now) {
		at = c.now
	}
	c.mu.Unlock()
	c.advanceTo(at)
	return true
}

func (c *Clock) advanceTo(target time.Time) {
	for {
		c.mu.Lock()
		if len(c.timers) == 0 || c.timers[0].when.After(target) {
			if target.After(c.now) {
				c.now = target
			}
			c.mu.Unlock()
			return
		}
		t := heap.Pop(&c.timers).(*timer)
		if t.when.After(c.now) {
			c.now = t.when
		}
		f := t.f
		c.mu.Unlock()
		f()
	}
}

// Pending is the number of timers neither fired nor stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextDeadline is the earliest pending deadline.
func (c *Clock) NextDeadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].when, true
}

// AfterFuncCalls counts the AfterFunc calls so far (to check that a gate
// arms one timer, not one per waiter).
func (c *Clock) AfterFuncCalls() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

type timer struct {
	c    *Clock
	when time.Time
	seq  uint64
	f    func()
	idx  int // in the heap; -1 when fired or stopped
}

// Stop cancels the timer; false if it already ran or was stopped.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.idx < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.idx)
	return true
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}
