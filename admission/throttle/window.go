package throttle

import "time"

// windowedCounter counts events over a sliding window kept as n equal
// buckets. The sum therefore covers between (n−1)/n of the window and the
// whole window, depending on where now falls inside the newest bucket; that
// granularity is what keeps an add O(1) and the memory fixed.
//
// Buckets are aligned to the instant the counter was created, so rotation is
// a pure function of elapsed time: a jump of any length (a suspended laptop,
// a fake clock moved by hours) clears exactly the buckets it passes over, and
// never more than all of them. A clock that goes backwards is treated as "still
// in the newest bucket" rather than rewinding history.
//
// Not safe for concurrent use; the Throttle's mutex guards it.
type windowedCounter struct {
	width     time.Duration // one bucket
	buckets   []int64
	head      int       // index of the newest bucket
	headStart time.Time // start of the newest bucket
	sum       int64     // running sum of buckets, so reads are O(1)
}

func newWindowedCounter(now time.Time, window time.Duration, n int) windowedCounter {
	return windowedCounter{
		width:     window / time.Duration(n),
		buckets:   make([]int64, n),
		headStart: now,
	}
}

// advance rotates the buckets so that the newest one contains now.
func (c *windowedCounter) advance(now time.Time) {
	for {
		elapsed := now.Sub(c.headStart) // saturates at ±292 years
		if elapsed < c.width {
			return // same bucket, or the clock went backwards
		}
		steps := int64(elapsed / c.width)
		// steps·width ≤ elapsed, so this cannot overflow either.
		c.headStart = c.headStart.Add(time.Duration(steps) * c.width)
		if steps < int64(len(c.buckets)) {
			for range steps {
				c.head++
				if c.head == len(c.buckets) {
					c.head = 0
				}
				c.sum -= c.buckets[c.head]
				c.buckets[c.head] = 0
			}
			return
		}
		// Everything is older than the window. Clearing all buckets is the
		// same as rotating through them, without a loop as long as the
		// jump. Loop again only if Sub saturated.
		clear(c.buckets)
		c.sum = 0
	}
}

func (c *windowedCounter) add(now time.Time, n int64) {
	c.advance(now)
	c.buckets[c.head] += n
	c.sum += n
}

func (c *windowedCounter) get(now time.Time) int64 {
	c.advance(now)
	return c.sum
}
