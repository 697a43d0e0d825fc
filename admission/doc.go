// Package admission decides which waiting client gets the next server of a
// pool.
//
// Two mechanisms live here. The FIFO Queue (queue.go) reproduces PgBouncer:
// the pooler calls it under its pool lock (Push when a client finds no idle
// server, Pop when a server becomes free, Remove when a waiter gives up) and
// it is what runs when no admission policy is configured.
//
// The Gate (gate.go) is PGKeeper's admission control, designed in
// shared/research/admission.md: one Gate per pool, shared Tree (tree.go)
// per policy, an injected Clock (clock.go; admission/fakeclock for tests).
//
// # The gate in one paragraph
//
// One mutex, one decision per critical section (admission.md §0.1). A
// request of Class{Priority, Leaf} is admitted on the fast path when its
// tier and every higher tier have no waiters, C − inUse ≥ 1 + debt[tier]
// (debt: the free slots the higher tiers' demand claims, below), and
// every node on its leaf's path is under its ceiling; otherwise it is
// queued in its (tier, leaf) list and in its tier's age list, and dispatch
// runs. Dispatch grants in tier order while the predicate holds (a fast
// tier beyond its reservation gives way to lower tiers until its oldest
// waiter has waited Short'/2, below),
// choosing the leaf by walking the tree from the root to the child with
// waiters, room under its ceiling and the smallest (inUse+1)/weight (ties
// rotate), and popping the oldest (FIFO) or newest (LIFO) waiter there.
// Each tier runs CoDel with adaptive LIFO: it turns LIFO once its queue has
// been non-empty for more than Long', sheds from the old end of its age
// list after Long' (FIFO) or Short' (LIFO), and turns FIFO again when the
// queue is empty and nothing was shed for Long' (hysteresis). Decisions are
// collected under the lock and delivered after unlocking: a Submit callback
// or one send on the waiter's buffered channel, never a broadcast. One
// timer per gate is armed at the next moment dispatch has work.
//
// # Debt: room for what the higher tiers need (issue 16)
//
// Debt keeps a lower tier from filling the slots a higher tier is about to
// need: a transaction cannot be pre-empted, so a slot given to 20 ms batch
// work is gone for 20 ms. admission.md took the library's rule: +1 on
// every lower tier each time a higher request waits, capped at PoolSize,
// decaying by PoolSize per 10 s, forgiven 0.1 per uncontended higher
// admission. That counts how often a higher tier waits, not how much it
// needs. Four clients looping a 0.1 ms query wait often, for each other's
// releases and for a fraction of a millisecond, so with pool_size 4 the
// debt sat at 3.4–4.0 and a low-priority transaction was admitted only
// into an idle pool: issue 16 measured low at 40–65 tx/s instead of ~190
// with in_use 0–2 of 4 (simulation S7: 54 % of the no-policy goodput, the
// pool 77 % busy). The rule now:
//
//   - Demand. Each tier keeps D, the time average of its tickets in use
//     plus its waiters, exponentially weighted with time constant τ = 64
//     of the tier's median hold times (its own streaming median, the
//     gate's before it has one), within [Short, DebtDecay]. It is exact
//     for that piecewise-constant count (brought up to date before every
//     change of it), O(1) per change, and needs no timer.
//   - Reservation by waits, for fast tiers. A tier is fast when its
//     median hold is at most Short'/8, a quarter of the wait target
//     W = Short'/2 (2.5 ms by default): several of its transactions fit
//     in W, so a waiter beyond its reservation gets one of its own slots
//     back well within W. A fast tier keeps a reservation r: +1 (and at
//     least its tickets plus waiters) for each of its admissions that
//     waited W or longer and each CoDel shed, decaying with the time
//     constant τ of its demand, starting at the capacity. Its feedback
//     slots are r rounded, at least one; a slower tier's are the capacity
//     (its reservation is its demand claim, as before). Both are 0 once
//     the tier's D ≤ 0.05.
//   - Claim. The tiers above p claim c(p) slots: the smaller of the sum
//     of their D rounded to the nearest slot (at least one while the sum
//     is above 0.05, at most the capacity) and the sum of their feedback
//     slots. A tier's own reservation (TierSnapshot.Reserved) is the same
//     with its D and feedback slots alone.
//   - Debt. debt[p] = max(0, c(p) − the tickets the tiers above p hold):
//     the free slots p must leave them. The predicate is unchanged,
//     C − inUse ≥ 1 + debt[p]; equivalently tier p and the tiers below it
//     hold at most Allowed(p) = C − max(c(p), tickets held above p), which
//     SHOW ADMISSION prints with D and the debt. The top tier owes nothing.
//   - Dispatch is in tier order, with one exception: a fast tier whose
//     feedback slots are fewer than its demand claims, that holds at
//     least them and whose oldest waiter has waited less than W gives
//     way: a waiting lower tier that fits takes the slot first. Whatever
//     the lower tiers leave free still goes to it (a second pass), and
//     once its oldest waiter has waited W it takes the next release
//     before any lower tier, its oldest waiter first even in LIFO mode
//     (its queue stands while it gives way, which turns it LIFO after
//     Long'; serving the newest would leave the oldest to be shed). A
//     slower tier never gives way: while it waits, every release goes to
//     it before any lower tier, whatever the debts. NoDebt and a starting
//     pool keep strict order.
//   - A waiter held back only by debt is woken when the decaying demand
//     or a decaying r crosses a rounding boundary: a deadline of the
//     single timer, exact for the demand with one tier above, otherwise a
//     lower bound (then dispatch re-evaluates and arms the next,
//     converging on the crossing in a few steps).
//
// Why an average and not the peak: a higher tier's concurrency above its
// average costs it little when its transactions are short, because it
// queues for its own releases, which strict order gives it. Reserving for
// the peak (a decaying maximum over 16 hold times was tried) keeps the
// slots of four 0.1 ms clients' rare coincidences idle: S7 low at 49–59 %
// of its no-policy goodput, the pool 74–83 % busy. Waiters count in D, so
// a tier that queues for long claims more: in S7's first model (0.1 ms
// high transactions, 0.3 ms apart) the high tier's D settled near 1.45 (0.85 in use, the rest its own short waits), where
// the claim flips between 1 and 2. Why 64 hold times: shorter averages
// follow every fluctuation of the higher tiers' concurrency and the lower
// tiers fill each dip with long transactions (τ of 4 holds: S3c's high
// tier at 98.7–99.0 % against ≥ 99.5 %, S3b's low tier, starved by
// design, at 1.0–1.3 slots against ≤ 0.4; 16 holds: 0.5–0.7 slots); 64
// keeps S3, S3b and S3c within their tables, and S7's first model
// (whose τ is about Short either way) at 74 % and 96 % busy. Why round to the nearest slot: rounding up
// would reserve a second idle slot for S7's D of 1.1–1.4. Why the floor
// of one slot: a light top tier (one S7 client, a quarter of a slot)
// would otherwise wait for a batch transaction to end on every request
// (p99 16 ms); with it, it never waits, for a quarter of the pool idle.
//
// Why waits and not demand, for a fast tier (issue 16 again): a closed-
// loop client uses whatever it is given. Four clients looping SELECT 1
// back to back (0.23 ms hold, 0.17 ms between) hold 2.3 slots of 4 when
// nothing stops them; their demand rounds to 2 or 3 and, with strict
// order taking every release while one of them waits (nearly always),
// they held ~2.3 slots and low got ≤ 2: 32 % of its no-policy goodput on
// the integration test, 44 % in S7 (pool 94 % busy). What such a tier
// needs is short waits, not slots: on one reserved slot its four clients
// wait about three holds (S7: p50 0.5 ms, p99 1.1 ms, max 3 ms), and low
// gets three slots (S7: 75 % of its no-policy goodput, busy 1.00). High
// runs fewer transactions a second (4,300 instead of 8,600 in S7): the
// criterion is its success and latency, and its throughput beyond what
// its clients' latency needs is what the low tier's goodput is paid from.
// The feedback finds the reservation: if one slot is not enough, late
// admissions raise r and the tier gives way less. Only fast tiers, and
// only below their demand claim: a tier of 10 ms transactions that gave
// way would wait for its own releases a good part of W each time, and
// r would settle where its waits stay under W, not where its p99 does
// (S3: high p99 5.4–5.6 ms against ≤ 5; S3b: low 0.9–1.1 slots against ≤
// 0.4). S3, S3b and S3c have no fast tier and are unchanged.
//
// Invariants (CheckInvariants checks the first two after every step of
// the property test):
//
//   - Work-conserving up to the claim: after every dispatch, if the most
//     important waiting tier p has a waiter its ceilings admit, then
//     C − inUse < 1 + debt[p]. So while a lower tier waits and no higher
//     tier does, idle slots are at most the higher tiers' claim less what
//     they hold, and none once their demand has faded (D ≤ 0.05).
//   - debt[p] ∈ [0, C], 0 for the top tier, and bounded by the higher
//     tiers' demand (rounded), not by PoolSize.
//   - No starvation of a higher tier: a lower tier is admitted only while
//     the tiers above keep max(claim, held) slots free or in use; a
//     waiting higher tier takes every release before any lower tier,
//     except a fast tier holding its reservation, whose oldest waiter has
//     waited less than W. So a higher tier's waiter waits at most W plus
//     one release interval, unless its own demand exceeds what the pool
//     frees.
//   - No idle slot while a lower tier waits and no higher tier does
//     beyond the claim (the first invariant); and none while a higher
//     tier waits: a tier that gives way gets what the lower tiers leave.
//   - Forgiven as the demand fades: once the higher tiers hold and wait
//     for nothing, a claim of c falls to c−1 after τ·ln(D/(c−½)) and to 0
//     after τ·ln(D/0.05): about 20 ms for S7's high tier (τ ≈ 6 ms), about
//     2.3 s for S3's 8 slots of 10 ms transactions (median 7 ms, τ ≈ 450
//     ms); τ is at most DebtDecay (10 s).
//     Not at once: a tier that pauses between two requests would find its
//     slots taken by long transactions.
//
// Config.Forgive (debt_forgive_per_success) no longer has an effect;
// Config.DebtDecay (debt_decay_interval) caps τ, i.e. how long a
// reservation may outlive the demand behind it. PoolSize only decides
// whether fair sharing is on. NoDebt turns the reservations off (strict
// tier order alone; S3c's regression guard).
//
// # Start-up and zero capacity (issue 16)
//
// The pool is starting while servers are logging in (Gate.SetPool's
// loggingIn > 0: warm-up, after RECONNECT, after churn) or before it has
// ever had capacity. A queue behind logins is not overload, and shedding
// critical work because logins take longer than Short' is what issue 16
// measured at warm-up. So while the pool starts:
//
//   - the top tier neither turns LIFO nor is shed by CoDel: its waiters
//     wait for the servers up to MaxWait, which the pooler sets to
//     query_wait_timeout (the policy has no per-tier timeout; no limit
//     when query_wait_timeout is 0), as every client waits in PgBouncer;
//   - the lower tiers keep their CoDel timeouts (Long' FIFO, Short' LIFO);
//   - nothing is shed for zero capacity.
//
// When the start ends, the top tier's waiters get their timeouts afresh
// and its LIFO clock restarts, so a backlog queued behind slow logins is
// not shed the moment the servers arrive. Capacity 0 sheds only once the
// pool has had capacity and no login is in flight (nothing is coming:
// pool closed, database unreachable): after a grace of Short', waiters
// below the top tier are shed with ReasonZeroCapacity, and new requests
// below the top tier at once; the top tier keeps its own timeouts.
//
// # Choices the research left open, and deviations from admission.md
//
//   - A tier whose remaining waiters are all held back by ceilings does not
//     stop dispatch to lower tiers (their waiters could not use the slot
//     anyway; strict order would idle capacity). A higher-tier waiter still
//     sends same- and lower-tier arrivals through the queue (no fast path),
//     where dispatch admits them at once if they fit.
//   - Waiters held back only by debt are woken when the demand behind it
//     has faded enough (above); after a fast-path admission, dispatch runs
//     if lower tiers have waiters. Neither is in admission.md, which
//     re-evaluates only on events; without them a debt-blocked waiter on an
//     idle pool waits for its own timeout.
//   - §4.1's predicate example ("in use 6, debt 3: tier 3 waits, needs 1 + 3
//     > 4 free") contradicts the predicate: 4 free admits. Tests check the
//     boundary both ways.
//   - Hold-time median (for Short' = max(Short, 2×p50), Long' = max(Long,
//     10×p50), both capped by MaxWait): a streaming "frugal" median, each
//     Release moving the estimate by a factor 1±1/64 towards the sample and
//     never past it. O(1), no memory, insensitive to rare long transactions;
//     it tracks a 10× change in about 150 releases (1/16 swung the short
//     timeout 0.7–1.4× around its ideal in simulation S6). Config.HoldP50 fixes it
//     (> 0) or removes the floors (< 0; what the [sim] model used). Each
//     tier also keeps its own median the same way, always estimated, for
//     the time constant of its demand.
//   - The LIFO exit is evaluated lazily (when the queue empties, before a
//     push, on Snapshot), since the mode is observable only then. LIFO entry
//     is exact: the timer fires at nonEmptySince + Long' + 1ns ("more than
//     long"). ModeSwitches counts transitions in both directions.
//   - Timer: one per gate. It is re-armed only when the next deadline moves
//     earlier; a timer armed earlier than needed fires, finds little to do
//     and re-arms (fewer AfterFunc calls than re-arming on every pop).
//   - Capacity 0 (see "Start-up and zero capacity"): use it for "cannot
//     serve" (database down, pool closed), not for PAUSE.
//   - Lowering capacity below inUse revokes nothing: grants stop until
//     releases bring inUse below it. Raising it grants exactly what fits.
//   - ShedError.RetryAfter is the tier-independent Long' at shed time: by
//     then the queue has been re-evaluated for a full interval, so an
//     immediate retry is not invited; the client adds jitter.
//   - Ceilings: a node's limit is ceil(ceiling × its parent's limit), at
//     least 1, at most the parent's limit, on the live capacity (they follow
//     server churn; debt does not). WaterFill uses the same limits.
//   - Fairness is off (no per-leaf queues, weights or ceilings; one FIFO per
//     tier) with NoFairness or when PoolSize < 4 × leaves (admission.md §1.3:
//     rounding dominates). Gate.Fair reports it so the pooler can warn that
//     the policy's ceilings are not enforced on that pool.
//   - Dispatch scans a node's children (O(fanout) per level) rather than
//     keeping a heap per (tier, node): fanouts are small and declared, and a
//     scan makes the rotating tie-break trivial. A subtree whose waiters are
//     all ceiling-blocked is skipped by trying the next candidate.
//   - A priority outside [0, Tiers) is clamped; an unknown LeafID becomes the
//     tree's all-"other" leaf. Ticket.Class reports what was used.
//   - Acquire: an already-cancelled ctx fails without queueing; a grant that
//     races the cancellation is released by Acquire (without feeding the
//     hold-time estimate) and ctx.Err() returned; a shed that races it also
//     returns ctx.Err(). Its waiters are recycled through a sync.Pool; the
//     uncontended path allocates nothing.
//   - Snapshot first does the timer's due work (reaping, mode changes), so it
//     may deliver Submit callbacks in the caller's goroutine.
//   - Small pools and debt: with C = 1, any demand of a higher tier (D >
//     0.05) claims the only slot and shuts the lower tiers out until it
//     fades. Pools that small should use NoDebt or one tier.
//   - Busy accounting: InUseSeconds and CapacitySeconds integrate the
//     tickets in use and the capacity since the gate was created (brought
//     up to date at each change of either), so the busy fraction over any
//     window is the ratio of their increases between two Snapshots.
package admission
