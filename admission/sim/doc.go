// Package sim is a discrete-event simulation harness for the admission
// gate, and (in its tests) the assertable scenarios of the gate's design:
// S1, S1b, S2, S3, S3b, S3c, S4, S4b, T2, T3,
// S5 and S6; and issue 16's: S7 (a fast high tier needing about one slot
// beside a flood of 20 ms low-priority work on a pool of 4, against the
// same clients with no policy) and S8 (start-up with slow logins).
//
// # Model
//
// Load is open-loop: each Source is a Poisson arrival stream of one
// admission.Class (priority tier and category leaf) with exponential hold
// times. Open loop is the pessimistic case for a gate: clients do not slow
// down when they are shed, so overload persists for as long as the scenario
// says. Every source draws arrivals and hold times from its own PCG stream
// seeded by (run seed, source index), so two runs that differ only in the
// gate's configuration (debt on/off, hysteresis on/off) see exactly the same
// requests, and a difference in outcome is the gate's.
//
// Each arrival is Submitted to the gate. A grant starts the transaction; its
// completion Releases the ticket, which may grant waiters from inside
// Release. A shed is recorded with its Reason. Nothing retries.
//
// Load can also be closed-loop, as the integration tests generate it: a
// Client group is N clients of one class, each sending its next
// transaction a Think draw after the last one ended, or a Backoff draw
// after a shed (durations are Fixed + exponential + uniform parts, Dist).
// Each client draws service, think and backoff times from three streams
// of its own, seeded by (run seed, group, client), so the same client sees
// the same service times whatever the gate does. CapacitySteps change a
// fixed capacity at given times (a pool whose servers log in slowly).
//
// # Time
//
// The gate runs on admission/fakeclock. The harness keeps its own event
// queue (arrivals, completions, connect completions, server losses) and, in
// a single goroutine, repeatedly moves the clock to whichever comes first:
// its next event or the gate's next timer deadline (Clock.NextDeadline).
// Timers fire inside Advance at their exact deadline, so a CoDel timeout
// sheds at the instant it expires, and at equal times a gate timer runs
// before a harness event. Ties between harness events go in scheduling
// order. Runs are therefore exact functions of the seed: no wall clock, no
// goroutine scheduling.
//
// # Servers (S5, S8)
//
// Without a PoolConfig the gate's capacity is fixed (or follows
// CapacitySteps) and a grant starts service at once. With one, the harness
// models the pooler's pool: the gate's capacity is live + connecting
// servers (≤ pool size), given with the connects in flight through
// SetPool when the gate has it (PoolGate); the pool starts full, or empty
// (StartEmpty, a cold start), and aims at its full size at all times
// (min_pool_size = pool_size); a create needs a free connect slot
// (≤ MaxConnecting in flight) and a token of an x/time/rate limiter read
// at the fake clock's time (AllowN, TokensAt), and takes ConnectTime. A
// grant takes an idle server, or the next one to finish connecting. At each LossAt every live server dies: its transaction
// is recorded as Aborted, replacements are started, the gate's capacity is
// lowered, and only then are the aborted tickets released, so the releases
// cannot grant waiters onto servers that no longer exist.
//
// # Measurements
//
// Requests that arrive in the window [Warmup, Warmup+Measure) are counted;
// sources keep sending for Tail after it, then the run drains until every
// request is decided and every ticket returned. The harness reports
// per-class counts and success ratios, admitted-wait percentiles,
// time-averaged tickets per tier and per leaf over the window, utilisation
// (against the configured capacity), the highest per-leaf ticket count
// right after any grant (ceilings), and, for the pool, connect start times,
// the most connects in flight and the live-server timeline. Mode switches
// and modes come from Gate.Snapshot, read by a scenario's OnStep probe.
//
// The harness also checks the gate's contract as it runs and lists
// violations in Sim.Anomalies: a request decided twice or never, an error
// that is not a *ShedError, a grant beyond the capacity last set, a ticket
// left over after the drain.
//
// # Fidelity
//
// harness_test.go checks the harness against queueing theory with a
// reference FIFO semaphore (M/M/20 at 85 %: probability of waiting and mean
// wait against Erlang C) and the pool model against the exact bucket
// schedule, so the scenarios measure the gate rather than the harness.
package sim
