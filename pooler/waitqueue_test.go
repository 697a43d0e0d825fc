package pooler

import (
	"slices"
	"testing"
)

// TestWaitQueueOrderAndRemove: waiters leave in arrival order, one removed
// from the middle or the tail is skipped, removing twice fails, and a
// popped waiter can queue again.
func TestWaitQueueOrderAndRemove(t *testing.T) {
	var q waitQueue
	ws := make([]*poolWaiter, 5)
	for i := range ws {
		ws[i] = &poolWaiter{}
		q.push(ws[i])
	}
	if q.len() != 5 || q.oldest() != ws[0] || q.younger(ws[0]) != ws[1] {
		t.Fatalf("len=%d, oldest and its next are not the first two", q.len())
	}
	if !q.remove(ws[2]) || q.remove(ws[2]) {
		t.Fatal("remove must succeed once")
	}
	if !q.remove(ws[4]) { // the tail
		t.Fatal("remove of the tail")
	}
	var got []int
	for w := q.pop(); w != nil; w = q.pop() {
		got = append(got, slices.Index(ws, w))
		if w.queued {
			t.Fatal("a popped waiter is still marked queued")
		}
	}
	if want := []int{0, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("popped %v, want %v", got, want)
	}
	if q.len() != 0 || q.oldest() != nil || q.pop() != nil {
		t.Fatal("queue not empty")
	}
	q.push(ws[0])
	if q.pop() != ws[0] {
		t.Fatal("a waiter queued again")
	}
}

func TestWaitQueuePushTwicePanics(t *testing.T) {
	var q waitQueue
	w := &poolWaiter{}
	q.push(w)
	defer func() {
		if recover() == nil {
			t.Fatal("a second push of a queued waiter did not panic")
		}
	}()
	q.push(w)
}

func TestWaitQueueNoAllocs(t *testing.T) {
	var q waitQueue
	w := &poolWaiter{}
	if n := testing.AllocsPerRun(100, func() { q.push(w); q.pop() }); n != 0 {
		t.Fatalf("allocs = %v", n)
	}
}
