package ring

import "testing"

// TestQueue: entries come out in the order they went in across growth
// and wrap-around, At and Tail see them in place, a popped slot keeps no
// reference, and a queue in steady use does not allocate.
func TestQueue(t *testing.T) {
	var q Queue[*int]
	next, want := 0, 0
	vals := make([]int, 1000)
	for i := range vals {
		vals[i] = i
	}
	for round := 0; round < 50; round++ {
		for k := 0; k < round%13+1; k++ {
			q.Push(&vals[next%len(vals)])
			next++
		}
		if q.Len() > 0 && **q.Tail() != (next-1)%len(vals) {
			t.Fatalf("tail %d, want %d", **q.Tail(), next-1)
		}
		for k := 0; k < round%7+1 && q.Len() > 0; k++ {
			if **q.At(0) != want%len(vals) {
				t.Fatalf("At(0) %d, want %d", **q.At(0), want)
			}
			if v := q.Pop(); *v != want%len(vals) {
				t.Fatalf("popped %d, want %d", *v, want)
			}
			want++
		}
		for i := 0; i < q.Len(); i++ {
			if **q.At(i) != (want+i)%len(vals) {
				t.Fatalf("At(%d) %d", i, **q.At(i))
			}
		}
	}
	q.Reset()
	if q.Len() != 0 {
		t.Fatal("reset left entries")
	}
	for _, p := range q.buf {
		if p != nil {
			t.Fatal("a slot keeps a reference")
		}
	}
	if n := testing.AllocsPerRun(100, func() { q.Push(&vals[0]); q.Push(&vals[1]); q.Pop(); q.Pop() }); n != 0 {
		t.Errorf("steady use allocates %v", n)
	}
}
