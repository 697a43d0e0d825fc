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
		r := startTimingRig(t, "pool_mode = transaction\ncancel_wait_timeout = 3\n", func(svc *Service) {
			dial := svc.dial
			svc.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
				if blackhole.Load() {
					<-ctx.Done() // a host that drops the traffic
					return nil, ctx.Err()
				}
				return dial(ctx, network, address)
			}
		})
		c := r.connect("u", nil)
		got := c.queryAsync("SLEEP")
		r.sleepUntil(time.Second)
		blackhole.Store(true)
		mine, theirs := net.Pipe()
		r.svc.serveConn(theirs)
		if _, err := mine.Write(wire.AppendCancelRequest(nil, c.key)); err != nil {
			t.Fatalf("sending CancelRequest: %v", err)
		}
		defer mine.Close()
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
