package admission

import "testing"

func TestFIFOOrderAndRemove(t *testing.T) {
	q := NewFIFO()
	ws := make([]*Waiter, 5)
	for i := range ws {
		ws[i] = &Waiter{Data: i}
		q.Push(ws[i])
	}
	if q.Len() != 5 || q.Oldest() != ws[0] {
		t.Fatalf("len=%d oldest=%v", q.Len(), q.Oldest().Data)
	}
	if !q.Remove(ws[2]) || q.Remove(ws[2]) {
		t.Fatal("Remove must succeed once")
	}
	if !q.Remove(ws[4]) { // tail
		t.Fatal("remove tail")
	}
	var got []int
	for w := q.Pop(); w != nil; w = q.Pop() {
		got = append(got, w.Data.(int))
		if w.Queued() {
			t.Fatal("popped waiter still marked queued")
		}
	}
	want := []int{0, 1, 3}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if q.Len() != 0 || q.Oldest() != nil || q.Pop() != nil {
		t.Fatal("queue not empty")
	}
	// Reuse after pop.
	q.Push(ws[0])
	if q.Pop() != ws[0] {
		t.Fatal("reuse")
	}
}

func TestFIFOPushTwicePanics(t *testing.T) {
	q := NewFIFO()
	w := &Waiter{}
	q.Push(w)
	defer func() {
		if recover() == nil {
			t.Fatal("expected panic")
		}
	}()
	q.Push(w)
}

func TestFIFONoAllocs(t *testing.T) {
	q := NewFIFO()
	w := &Waiter{}
	if n := testing.AllocsPerRun(100, func() { q.Push(w); q.Pop() }); n != 0 {
		t.Fatalf("allocs = %v", n)
	}
}
