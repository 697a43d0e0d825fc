// Package tokenbucket paces events (a pool's server logins and closes:
// server_connect_rate, server_connect_burst, server_close_rate) with a
// token bucket whose every decision takes the time as an argument.
package tokenbucket

import (
	"time"

	"golang.org/x/time/rate"
)

// Bucket is a token bucket driven by explicit times (rate.Limiter's *At
// and *N methods), so pacing decisions are reproducible in tests. A rate
// of 0 means unlimited. The zero Bucket is unlimited until Set; it is not
// safe for concurrent use (the caller's lock guards it).
type Bucket struct {
	lim         *rate.Limiter // nil: unlimited
	rate, burst int
	configured  bool
}

// Set applies the current settings; the first call creates a full bucket,
// later changes (RELOAD, SET) keep the tokens already earned.
func (b *Bucket) Set(r, burst int, now time.Time) {
	if b.configured && r == b.rate && burst == b.burst {
		return
	}
	b.configured, b.rate, b.burst = true, r, burst
	switch {
	case r <= 0:
		b.lim = nil
	case b.lim == nil:
		b.lim = rate.NewLimiter(rate.Limit(r), burst)
	default:
		b.lim.SetLimitAt(now, rate.Limit(r))
		b.lim.SetBurstAt(now, burst)
	}
}

// Wait returns 0 when a token is available at now, else how long until one
// is (rounded up to the millisecond, so a timer set for it finds the token).
func (b *Bucket) Wait(now time.Time) time.Duration {
	if b.lim == nil {
		return 0
	}
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	d := time.Duration((1 - tokens) / float64(b.lim.Limit()) * float64(time.Second))
	return d.Truncate(time.Millisecond) + time.Millisecond
}

// Take takes a token at now; false when none is available.
func (b *Bucket) Take(now time.Time) bool {
	return b.lim == nil || b.lim.AllowN(now, 1)
}
