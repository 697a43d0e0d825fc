package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
)

// clock is the pooler's time source: the janitor's ticker, the grow and
// drain timers, waits, and every timestamp the pool logic compares
// (lastUsed, created, Enqueued, queryStart). Service.clock holds it; pools
// and clients reach it through their svc. Production uses systemClock;
// tests may install another after New and before Serve.
//
// Socket deadlines (SetDeadline, SetReadDeadline, SetWriteDeadline) are
// not on the clock: a net.Conn measures an absolute deadline against the
// runtime's own time, so those lines keep time.Now(). Under
// testing/synctest the runtime's time is the bubble's fake time, for the
// clock's system implementation and the sockets alike, which is what the
// pooler's timing tests (timing_synctest_test.go) use.
type clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	// AfterFunc calls f in its own goroutine after d, unless stopped.
	AfterFunc(d time.Duration, f func()) timer
	NewTimer(d time.Duration) timer
	NewTicker(d time.Duration) ticker
}

// timer is a pending NewTimer or AfterFunc. C is nil for an AfterFunc.
type timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// ticker sends on C every period until stopped. The pooler reads the time
// of a tick from the clock's Now, so a fake ticker's values do not matter.
type ticker interface {
	C() <-chan time.Time
	Stop()
}

// systemClock is the production clock: the time package.
type systemClock struct{}

func (systemClock) Now() time.Time                  { return time.Now() }
func (systemClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (systemClock) AfterFunc(d time.Duration, f func()) timer {
	return sysTimer{time.AfterFunc(d, f)}
}
func (systemClock) NewTimer(d time.Duration) timer   { return sysTimer{time.NewTimer(d)} }
func (systemClock) NewTicker(d time.Duration) ticker { return sysTicker{time.NewTicker(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time        { return t.t.C }
func (t sysTimer) Stop() bool                 { return t.t.Stop() }
func (t sysTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type sysTicker struct{ t *time.Ticker }

func (t sysTicker) C() <-chan time.Time { return t.t.C }
func (t sysTicker) Stop()               { t.t.Stop() }

// gateClock hands the pooler's clock to a pool's admission gate, so the
// gate's waits (max_wait, pacing) run on the same time as the pool's.
type gateClock struct{ c clock }

func (g gateClock) Now() time.Time { return g.c.Now() }
func (g gateClock) AfterFunc(d time.Duration, f func()) admission.Timer {
	return g.c.AfterFunc(d, f)
}
