package fakeclock

import (
	"testing"
	"time"
)

func TestAdvanceOrderAndNow(t *testing.T) {
	start := time.Unix(1000, 0)
	c := New(start)
	var got []time.Duration
	rec := func() { got = append(got, c.Now().Sub(start)) }
	c.AfterFunc(30*time.Millisecond, rec)
	c.AfterFunc(10*time.Millisecond, rec)
	stopped := c.AfterFunc(20*time.Millisecond, rec)
	c.AfterFunc(10*time.Millisecond, func() {
		rec()
		// A timer armed by a callback and due within the advance fires too.
		c.AfterFunc(5*time.Millisecond, rec)
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must succeed exactly once")
	}
	if c.Pending() != 3 {
		t.Fatalf("pending %d", c.Pending())
	}
	if d, ok := c.NextDeadline(); !ok || d.Sub(start) != 10*time.Millisecond {
		t.Fatalf("next deadline %v %v", d, ok)
	}
	c.Advance(25 * time.Millisecond)
	want := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if c.Now().Sub(start) != 25*time.Millisecond {
		t.Fatalf("now %v", c.Now().Sub(start))
	}
	if !c.AdvanceToNext() || c.Now().Sub(start) != 30*time.Millisecond || len(got) != 4 {
		t.Fatalf("AdvanceToNext: now %v got %v", c.Now().Sub(start), got)
	}
	if c.AdvanceToNext() {
		t.Fatal("nothing pending")
	}
	if c.AfterFuncCalls() != 5 {
		t.Fatalf("calls %d", c.AfterFuncCalls())
	}
	c.Set(start)
	if !c.Now().Equal(start) {
		t.Fatal("Set backwards")
	}
	fired := false
	c.AfterFunc(0, func() { fired = true })
	if fired {
		t.Fatal("AfterFunc(0) fired synchronously")
	}
	c.Advance(0)
	if !fired {
		t.Fatal("Advance(0) did not fire a due timer")
	}
}
