package tokenbucket

import (
	"testing"
	"time"
)

// Every time below is explicit: the buckets are driven through
// rate.Limiter's *At methods, never the wall clock.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestBucketPacing(t *testing.T) {
	var b Bucket
	b.Set(20, 4, t0)
	for i := 0; i < 4; i++ {
		if w := b.Wait(t0); w != 0 {
			t.Fatalf("token %d of the burst: wait %v, want 0", i, w)
		}
		if !b.Take(t0) {
			t.Fatalf("token %d of the burst refused", i)
		}
	}
	if b.Take(t0) {
		t.Fatal("a fifth token at t0 was granted with burst 4")
	}
	// The next token is due 1/20 s later; wait rounds up to the next
	// millisecond so a timer set for it finds the token.
	if w := b.Wait(t0); w < ms(50) || w > ms(51) {
		t.Fatalf("wait at t0 = %v, want 50ms (+1ms rounding)", w)
	}
	if b.Take(t0.Add(ms(49))) {
		t.Fatal("token granted at t0+49ms")
	}
	if !b.Take(t0.Add(ms(50))) {
		t.Fatal("token refused at t0+50ms")
	}

	// Take greedily every millisecond for 2 s: 4 at t0, then one every
	// 50 ms, and no window Δ holds more than 20·Δ + 4.
	var c Bucket
	c.Set(20, 4, t0)
	var got []time.Duration
	for at := time.Duration(0); at <= 2*time.Second; at += time.Millisecond {
		for c.Take(t0.Add(at)) {
			got = append(got, at)
		}
	}
	if len(got) != 4+40 {
		t.Fatalf("%d tokens in 2 s, want 44", len(got))
	}
	for i, at := range got {
		want := time.Duration(0)
		if i >= 4 {
			want = time.Duration(i-3) * ms(50)
		}
		if at != want {
			t.Fatalf("token %d at %v, want %v", i, at, want)
		}
	}
	for i := range got {
		for j := i; j < len(got); j++ {
			span := (got[j] - got[i]).Seconds()
			if n := float64(j - i + 1); n > 20*span+4 {
				t.Fatalf("%v tokens in [%v, %v]: more than rate·Δ + burst", n, got[i], got[j])
			}
		}
	}
}

func TestBucketReconfigure(t *testing.T) {
	var b Bucket
	b.Set(0, 1, t0)
	for i := 0; i < 1000; i++ {
		if !b.Take(t0) {
			t.Fatal("rate 0 (unlimited) refused a token")
		}
	}
	b.Set(10, 2, t0)
	granted := 0
	for i := 0; i < 3; i++ {
		if b.Take(t0) {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("a new bucket of burst 2 granted %d tokens at once, want 2 (it starts full)", granted)
	}
	// A RELOAD to a faster rate keeps the bucket's state and paces at the
	// new rate from then on.
	b.Set(100, 2, t0)
	if b.Take(t0.Add(ms(9))) || !b.Take(t0.Add(ms(10))) {
		t.Fatal("after the rate went to 100/s the next token must come 10 ms later")
	}
}
