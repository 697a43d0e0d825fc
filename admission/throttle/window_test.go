package throttle

import (
	"testing"
	"time"
)

func TestWindowedCounterRotation(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// 10 s in 10 buckets of 1 s, aligned to t0.
	c := newWindowedCounter(t0, 10*time.Second, 10)

	c.add(at(500*time.Millisecond), 5) // bucket [0 s, 1 s)
	c.add(at(3200*time.Millisecond), 3)
	steps := []struct {
		at   time.Duration
		want int64
	}{
		{9900 * time.Millisecond, 8},
		{10 * time.Second, 3}, // [0 s, 1 s) left the window
		{12999 * time.Millisecond, 3},
		{13 * time.Second, 0}, // [3 s, 4 s) left too
	}
	for _, s := range steps {
		if got := c.get(at(s.at)); got != s.want {
			t.Fatalf("at %v: got %d, want %d", s.at, got, s.want)
		}
	}

	// A jump far longer than the window clears everything, and the buckets
	// stay aligned to t0: 1000.5 s falls in [1000 s, 1001 s).
	c.add(at(13500*time.Millisecond), 7)
	c.add(at(1000500*time.Millisecond), 2)
	if got := c.get(at(1000500 * time.Millisecond)); got != 2 {
		t.Fatalf("after a long jump: got %d, want 2", got)
	}
	c.add(at(1004*time.Second), 4)
	for _, s := range []struct {
		at   time.Duration
		want int64
	}{
		{1009999 * time.Millisecond, 6},
		{1010 * time.Second, 4},
		{1013999 * time.Millisecond, 4},
		{1014 * time.Second, 0},
	} {
		if got := c.get(at(s.at)); got != s.want {
			t.Fatalf("at %v: got %d, want %d", s.at, got, s.want)
		}
	}

	// A jump of exactly the window from a bucket start clears everything; a
	// jump of 7 buckets keeps the last 3.
	c.add(at(1020*time.Second), 1)
	c.add(at(1027*time.Second), 10)
	if got := c.get(at(1030 * time.Second)); got != 10 {
		t.Fatalf("after exactly one window: got %d, want 10", got)
	}
	c.add(at(1031*time.Second), 100)
	if got := c.get(at(1038 * time.Second)); got != 100 {
		t.Fatalf("after 7 buckets: got %d, want 100 (the 10 added at 1027 s expired at 1037 s)", got)
	}

	// The clock going backwards neither clears nor rewinds.
	c.add(at(1000*time.Second), 1)
	if got := c.get(at(1038 * time.Second)); got != 101 {
		t.Fatalf("after a backwards step: got %d, want 101", got)
	}

	// A jump of centuries neither overflows nor loops for long.
	far := t0.AddDate(300, 0, 0)
	c.add(far, 9)
	if got := c.get(far); got != 9 {
		t.Fatalf("after 300 years: got %d, want 9", got)
	}
}

// Every bucket passed over is zeroed and the running sum matches the buckets,
// for jumps of every length from 0 to past the window.
func TestWindowedCounterSumMatchesBuckets(t *testing.T) {
	t0 := time.Unix(0, 0)
	c := newWindowedCounter(t0, time.Second, 10)
	now := t0
	for i := range 2000 {
		now = now.Add(time.Duration(i%23) * 17 * time.Millisecond)
		c.add(now, int64(i%5))
		var sum int64
		for _, b := range c.buckets {
			sum += b
		}
		if sum != c.sum {
			t.Fatalf("step %d: running sum %d, buckets hold %d", i, c.sum, sum)
		}
	}
}
