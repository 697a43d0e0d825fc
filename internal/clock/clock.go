// Package clock is the pooler's injected time: an interface over the
// time package's clock, timers and tickers, so that a test can replace
// what the pool logic compares and waits on.
//
// Socket deadlines (SetDeadline, SetReadDeadline, SetWriteDeadline) are
// not on the clock: a net.Conn measures an absolute deadline against the
// runtime's own time. Under testing/synctest the runtime's time is the
// bubble's fake time, for System and the sockets alike.
package clock

import "time"

// Clock is a time source that tests can replace: the time package's
// (System) in production.
//
// Socket deadlines (SetDeadline, SetReadDeadline, SetWriteDeadline) are
// not on the clock: a net.Conn measures an absolute deadline against the
// runtime's own time, so those lines keep time.Now(). Under
// testing/synctest the runtime's time is the bubble's fake time, for the
// clock's system implementation and the sockets alike, which is what the
// pooler's timing tests (timing_synctest_test.go) use.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	// AfterFunc calls f in its own goroutine after d, unless stopped.
	AfterFunc(d time.Duration, f func()) Timer
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
}

// Timer is a pending NewTimer or AfterFunc. C is nil for an AfterFunc.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker sends on C every period until stopped. A caller that reads the
// time of a tick from the clock's Now lets a fake ticker's values not
// matter.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// System is the production clock: the time package.
type System struct{}

func (System) Now() time.Time                  { return time.Now() }
func (System) Since(t time.Time) time.Duration { return time.Since(t) }
func (System) AfterFunc(d time.Duration, f func()) Timer {
	return sysTimer{time.AfterFunc(d, f)}
}
func (System) NewTimer(d time.Duration) Timer   { return sysTimer{time.NewTimer(d)} }
func (System) NewTicker(d time.Duration) Ticker { return sysTicker{time.NewTicker(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time        { return t.t.C }
func (t sysTimer) Stop() bool                 { return t.t.Stop() }
func (t sysTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type sysTicker struct{ t *time.Ticker }

func (t sysTicker) C() <-chan time.Time { return t.t.C }
func (t sysTicker) Stop()               { t.t.Stop() }
