package clock

import (
	"testing"
	"testing/synctest"
	"time"
)

// System is the time package's clock: inside a synctest bubble, the
// bubble's time, timers and tickers.
func TestSystem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Clock = System{}
		start := c.Now()
		fired := make(chan struct{})
		c.AfterFunc(time.Second, func() { close(fired) })
		stopped := c.AfterFunc(time.Second, func() { t.Error("a stopped AfterFunc ran") })
		if !stopped.Stop() {
			t.Fatal("Stop of a pending AfterFunc returned false")
		}
		tk := c.NewTicker(300 * time.Millisecond)
		defer tk.Stop()
		<-tk.C()
		<-c.NewTimer(700 * time.Millisecond).C()
		<-fired
		if d := c.Since(start); d != time.Second {
			t.Errorf("Since = %v, want 1s", d)
		}
	})
}
