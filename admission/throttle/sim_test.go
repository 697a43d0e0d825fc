package throttle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// AT1: demand is 1000 requests/s, one every millisecond;
// the backend accepts at most 100 per second of simulated time and sheds the
// rest at once with the pooler's 53000. Everything runs on a fake clock with a
// seeded coin, so each run is exactly reproducible.

const (
	at1Demand   = 1000 // requests/s
	at1Capacity = 100  // accepted/s while overloaded
)

type at1Result struct {
	sentRate, acceptRate float64 // per second, over the measured overload phase
	pAtHeal              float64
	pAtW, pAt15W         float64       // P at heal + 1.0 and + 1.5 windows
	firstBelow05         time.Duration // after the heal; -1 if never
	firstZero            time.Duration // after the heal, from when P stayed 0; -1 if never
}

// simulateAT1 overloads for 4 windows, measures the sending rate over the last
// two, heals at 4 windows + healOffset, and follows P for 2 more windows.
func simulateAT1(k float64, window time.Duration, maxP float64, seed uint64, healOffset time.Duration) at1Result {
	start := time.Unix(1_700_000_000, 0)
	now := start
	th := New(K(k), Window(window, 10), MaxRejectProbability(maxP),
		Now(func() time.Time { return now }), Rand(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	shed := &pgconn.PgError{Severity: "ERROR", Code: "53000", Message: MessagePrefix + " (overloaded)"}

	const tick = time.Second / at1Demand
	measureFrom, measureTo := 2*window, 4*window
	heal := measureTo + healOffset
	end := heal + 2*window

	r := at1Result{firstBelow05: -1, firstZero: -1}
	var sent, accepted int64
	var acceptedThisSecond int64
	for el := time.Duration(0); el < end; el += tick {
		now = start.Add(el)
		if el%time.Second == 0 {
			acceptedThisSecond = 0
		}
		if el == heal {
			r.pAtHeal = th.RejectProbability(0)
		}
		if th.Allow(0) {
			ok := el >= heal || acceptedThisSecond < at1Capacity
			if ok {
				acceptedThisSecond++
				th.Observe(0, nil)
			} else {
				th.Observe(0, shed)
			}
			if el >= measureFrom && el < measureTo {
				sent++
				if ok {
					accepted++
				}
			}
		}
		// P is sampled every 10 ms after the heal: fine enough for the
		// assertions, and it keeps the run short under -race.
		if el < heal || (el-heal)%(10*time.Millisecond) != 0 {
			continue
		}
		p := th.RejectProbability(0)
		since := el - heal
		if p <= 0.05 && r.firstBelow05 < 0 {
			r.firstBelow05 = since
		}
		switch {
		case p != 0:
			r.firstZero = -1
		case r.firstZero < 0:
			r.firstZero = since
		}
		switch since {
		case window:
			r.pAtW = p
		case window + window/2:
			r.pAt15W = p
		}
	}
	secs := (measureTo - measureFrom).Seconds()
	r.sentRate = float64(sent) / secs
	r.acceptRate = float64(accepted) / secs
	return r
}

func TestAT1(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates ~30 minutes of traffic per case")
	}
	const minRate = 1.0 // the default
	for _, c := range []struct {
		name   string
		k      float64
		window time.Duration
		maxP   float64
		// Backend rejections among sent requests: 1 − A/sent.
		rejectLo, rejectHi float64
		fastRecovery       bool
	}{
		{"K=2", 2, time.Minute, 0.8, 0.45, 0.55, true},
		{"K=2/window=10s", 2, 10 * time.Second, 0.8, 0.45, 0.55, true},
		// The default cap binds: see wantSent below.
		{"K=1.5", 1.5, time.Minute, 0.8, 0.45, 0.55, false},
		{"K=1.5/uncapped", 1.5, time.Minute, 1, 0.30, 0.37, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bucket := c.window / 10
			// Three seeds; each heals at a different point of a bucket (its
			// start, its middle, just before its end), because recovery
			// depends on how much of the bucket that saw the heal is still
			// overload.
			for i, off := range []time.Duration{0, bucket / 2, bucket - time.Millisecond} {
				seed := uint64(i + 1)
				{
					r := simulateAT1(c.k, c.window, c.maxP, seed, off)
					t.Logf("seed %d heal+%v: sent %.1f/s accepted %.1f/s P(heal)=%.3f P(+1W)=%.3f P(+1.5W)=%.3f P≤0.05 at +%s, P=0 from +%s",
						seed, off, r.sentRate, r.acceptRate, r.pAtHeal, r.pAtW, r.pAt15W,
						inWindows(r.firstBelow05, c.window), inWindows(r.firstZero, c.window))

					if r.acceptRate != at1Capacity {
						t.Fatalf("accepted %.2f/s, want the backend's %d/s: the throttle must not starve it", r.acceptRate, at1Capacity)
					}
					// Sent ≈ K·A + minRate (the SRE equilibrium; exactly
					// D·(K·A + m)/(D + m) for a continuous window). That needs
					// P = (D − K·A)/(D + m), which for K = 1.5 is 0.849: above
					// the default cap of 0.8, so the client then sends
					// (1 − maxP)·D = 200/s, not the 151/s of the formula.
					wantSent := math.Max(c.k*r.acceptRate+minRate, (1-c.maxP)*at1Demand)
					if r.sentRate < 0.9*wantSent || r.sentRate > 1.1*wantSent {
						t.Errorf("seed %d: sent %.1f/s, want %.1f/s ± 10%%", seed, r.sentRate, wantSent)
					}
					if reject := 1 - r.acceptRate/r.sentRate; reject < c.rejectLo || reject > c.rejectHi {
						t.Errorf("seed %d: backend rejected %.3f of what was sent, want [%.2f, %.2f]", seed, reject, c.rejectLo, c.rejectHi)
					}

					if c.fastRecovery {
						checkFastRecovery(t, r, c.k, c.window)
					} else {
						// K near 1 recovers much more slowly: the locally
						// rejected requests keep inflating `requests` while
						// `accepts` grows only by what is sent. The
						// continuous-window model gives P(+1W) = 0.628 (capped)
						// and 0.676 (uncapped), and P(+1.5W) = 0.44 / 0.51.
						if r.pAtW < 0.5 || r.pAt15W < 0.3 {
							t.Errorf("seed %d heal+%v: P(+1W)=%.3f P(+1.5W)=%.3f, want ≥ 0.5 and ≥ 0.3 (slow recovery)",
								seed, off, r.pAtW, r.pAt15W)
						}
					}
				}
			}
		})
	}
}

func inWindows(d, window time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.3fW", d.Seconds()/window.Seconds())
}

// checkFastRecovery asserts the recovery of K = 2 after the heal.
//
// §4.3 asks for P ≤ 0.05 by heal + 1.0 window. The formula cannot promise
// that. Take a continuous window W, demand D, and a = A/D the accepted share
// the window held before the heal (0.1 here). For u = t/W < 1 after the heal
// the window holds a·(1 − u) of old accepts plus everything sent since, so
// with f = 1 − P the sent share:
//
//	P(u) = 1 − K·(a·(1 − u) + ∫₀ᵘ f),   f = 1 − P
//	⇒ P(u) = 1 − a − a·(K − 1)·e^(K·u)
//
// which at u = 1 is 0.9 − 0.1·e² = 0.161 for K = 2: one window after the heal
// the window is all post-heal traffic, but a fifth of it was still sent at
// P ≈ 0.8. Integrating on (the window then holds only post-heal traffic) gives
// P ≤ 0.05 at u = 1.081 and P = 0 at u = 1.114. Buckets drop old data up to
// one bucket early, which only helps. So: P(+1W) ≤ 0.161, P ≤ 0.05 by heal +
// 1.1 W, and P = 0 for good by heal + 1.2 W (inside §4.3's 1.5 W).
func checkFastRecovery(t *testing.T, r at1Result, k float64, window time.Duration) {
	t.Helper()
	a := r.acceptRate / at1Demand
	bound := 1 - a - a*(k-1)*math.Exp(k)
	if r.pAtW > bound {
		t.Errorf("P(heal + 1W) = %.4f, want ≤ %.4f", r.pAtW, bound)
	}
	if r.firstBelow05 < 0 || r.firstBelow05 > window+window/10 {
		t.Errorf("P ≤ 0.05 first at heal + %v, want by heal + 1.1 W (%v)", r.firstBelow05, window+window/10)
	}
	if r.firstZero < 0 || r.firstZero > window+window/5 {
		t.Errorf("P = 0 for good from heal + %v, want by heal + 1.2 W (%v)", r.firstZero, window+window/5)
	}
	if r.pAt15W != 0 {
		t.Errorf("P(heal + 1.5W) = %.4f, want 0", r.pAt15W)
	}
}
