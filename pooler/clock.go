package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	iclock "github.com/pgturnstile/pgturnstile/internal/clock"
)

// clock is the pooler's time source (internal/clock): the janitor's
// ticker, the grow and drain timers, waits, and every timestamp the pool
// logic compares (lastUsed, created, Enqueued, queryStart). Service.clock
// holds it; pools and clients reach it through their svc. Production uses
// systemClock; tests may install another after New and before Serve.
// Socket deadlines stay on the runtime's time, which is what the pooler's
// timing tests run under testing/synctest (timing_synctest_test.go).
type (
	clock       = iclock.Clock
	timer       = iclock.Timer
	ticker      = iclock.Ticker
	systemClock = iclock.System
)

// gateClock hands the pooler's clock to a pool's admission gate, so the
// gate's waits (max_wait, pacing) run on the same time as the pool's.
type gateClock struct{ c clock }

func (g gateClock) Now() time.Time { return g.c.Now() }
func (g gateClock) AfterFunc(d time.Duration, f func()) admission.Timer {
	return g.c.AfterFunc(d, f)
}
