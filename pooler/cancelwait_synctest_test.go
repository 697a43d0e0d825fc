package pooler

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// cancel_wait_timeout: a cancel request whose connection to Postgres gets
// nowhere is given up after that long, with PgBouncer's log line, and the
// server it was for is lent again once its query ends.
func TestTimingCancelWaitTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var blackhole atomic.Bool
		r := startTimingRig(t, "pool_mode = transaction\ncancel_wait_timeout = 3\n", blackholeDials(&blackhole))
		c := r.connect("u", nil)
		got := c.queryAsync("SLEEP")
		r.sleepUntil(time.Second)
		blackhole.Store(true)
		r.sendCancel(c)
		r.sleepUntil(4*time.Second - time.Nanosecond)
		if strings.Contains(r.log.String(), "cancel_wait_timeout") {
			t.Fatalf("gave up before cancel_wait_timeout:\n%s", r.log.String())
		}
		r.sleepUntil(4 * time.Second)
		if !strings.Contains(r.log.String(), "closing because: cancel_wait_timeout") {
			t.Errorf("no cancel_wait_timeout line at 4s:\n%s", r.log.String())
		}
		if rep := <-got; !rep.ready || rep.err != nil {
			t.Errorf("the query, not cancelled: %v", rep)
		}
	})
}

func TestCancelWait(t *testing.T) {
	for _, tc := range []struct{ cancel, connect, want time.Duration }{
		{5 * time.Second, 15 * time.Second, 5 * time.Second},
		{0, 15 * time.Second, 15 * time.Second},
		{0, 0, 2 * time.Second},
	} {
		st := &config.Settings{CancelWaitTimeout: tc.cancel, ServerConnectTimeout: tc.connect}
		if got := cancelWait(st); got != tc.want {
			t.Errorf("cancelWait(%v, %v) = %v; want %v", tc.cancel, tc.connect, got, tc.want)
		}
	}
}

// blackholeDials makes the service's dials hang until their context ends
// while on is set: a host that drops the traffic, for cancel requests
// that get nowhere.
func blackholeDials(on *atomic.Bool) func(*Service) {
	return func(svc *Service) {
		dial := svc.dial
		svc.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			if on.Load() {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return dial(ctx, network, address)
		}
	}
}

// sendCancel sends c's CancelRequest on a connection of its own, closed
// with the rig.
func (r *timingRig) sendCancel(c *pipeClient) {
	r.t.Helper()
	mine, theirs := net.Pipe()
	r.svc.serveConn(theirs)
	if _, err := mine.Write(wire.AppendCancelRequest(nil, c.key)); err != nil {
		r.t.Fatalf("sending CancelRequest: %v", err)
	}
	r.t.Cleanup(func() { mine.Close() })
}
