package connlimit

import (
	"slices"
	"sync"
	"testing"
)

func TestTakeGiveOver(t *testing.T) {
	l := New[string](2)
	for i := range 2 {
		if !l.TryTake() {
			t.Fatalf("take %d of two under a cap of two refused", i+1)
		}
	}
	if l.TryTake() {
		t.Fatal("a third taken under a cap of two")
	}
	if l.Count() != 2 || l.Over() != 0 {
		t.Fatalf("count %d over %d", l.Count(), l.Over())
	}
	l.SetMax(1) // lowered: the connections stay, one too many
	if l.Over() != 1 || l.TryTake() {
		t.Fatalf("after lowering to 1: over %d", l.Over())
	}
	l.Give()
	if l.Over() != 0 || l.Count() != 1 {
		t.Fatalf("after a give: over %d count %d", l.Over(), l.Count())
	}
	l.SetMax(0) // unlimited
	for range 100 {
		if !l.TryTake() {
			t.Fatal("refused while unlimited")
		}
	}
	if l.Over() != 0 {
		t.Fatalf("over %d while unlimited", l.Over())
	}
}

// A Limiter is unused once it has neither members nor connections.
func TestMembersDrop(t *testing.T) {
	l := New[int](0)
	l.Add(1)
	l.Add(2)
	l.Add(2)
	got := l.Members()
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("members %v", got)
	}
	if l.Drop(1) {
		t.Fatal("unused with a member left")
	}
	l.TryTake()
	if l.Drop(2) {
		t.Fatal("unused with a connection counted")
	}
	l.Give()
	if !l.Drop(2) {
		t.Fatal("not unused with no member and no connection")
	}
}

// Concurrent takers never pass the cap together.
func TestTryTakeConcurrent(t *testing.T) {
	l := New[int](10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 50 {
		wg.Go(func() {
			if l.TryTake() {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if taken != 10 || l.Count() != 10 {
		t.Fatalf("taken %d, counted %d; want 10", taken, l.Count())
	}
}
