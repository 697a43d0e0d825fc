// Package admission decides which waiting client gets the next server of a
// pool.
//
// Without an admission policy the pooler serves a pool's waiters in
// arrival order, as PgBouncer does, from a queue of its own (the pooler's
// waitQueue); nothing here runs.
//
// The Gate (gate.go) runs when an admission_file is configured: one Gate
// per pool, a Tree (tree.go) shared by the gates of a policy, and an
// injected Clock (clock.go; admission/fakeclock for tests and the
// simulations in admission/sim). The pooler takes a Ticket before it links
// a server for a transaction and holds it until the server goes back to
// the pool, so a transaction once admitted is never shed; a shed client
// gets ERROR 53000 (or the policy's shed_sqlstate) and stays connected.
// The gate's capacity is the pool's servers that exist or are logging in,
// within pool_size.
//
// # Where the design comes from
//
// The Gate follows PGKeeper, the Go connection pooler Figma built to
// replace PgBouncer (Figma engineering blog, "When a connection pooler
// becomes the bottleneck"). PGKeeper admits every request through two
// controllers, both of which must admit it:
//
//   - a priority semaphore with debt (from the Go library
//     bradenaw/backpressure): requests carry a priority tier, and whenever a
//     higher-priority request cannot get a slot at once, debt is assigned to
//     every lower tier; a lower-priority request is admitted only if the
//     free capacity covers it plus the debt against its tier. Debt decays
//     with time and is paid down faster while higher tiers succeed. Its
//     queues use CoDel with adaptive LIFO: FIFO while the queue empties
//     regularly; once it has stayed non-empty for a while the tier is
//     overloaded, serves the newest request first and sheds old ones after
//     a much shorter wait;
//   - weighted max-min fair sharing over a tree of traffic categories (one
//     tree level per dimension, e.g. authenticated or not, then endpoint):
//     each category's baseline is its weighted share of its parent's;
//     what a category does not use goes to a common pool, from which the
//     others draw up to a ceiling. PGKeeper notes that a small pool makes
//     the shares coarse, and falls back on priorities alone there.
//
// The queue timeouts come from CoDel (Nichols and Jacobson, RFC 8289) as
// Facebook recast it for request queues ("Fail at Scale", Maurer, ACM
// Queue 2015): a request may wait Long (100 ms) while the queue has been
// empty recently, and Short (5 ms) once it has not been empty for Long;
// while overloaded the queue is served LIFO, since the newest requests
// are the likeliest to still be wanted.
//
// The Gate decides both controllers in one critical section, so no
// request holds a priority slot while it waits for its category's share,
// and there is one queue, not two. Its debt is the library's idea with a
// different measure (the higher tiers' demand instead of a count of their
// waits, below), and its CoDel leaves LIFO with hysteresis.
//
// # The gate in one paragraph
//
// One mutex, one decision per critical section. A request of
// Class{Priority, Leaf} is admitted on the fast path when its tier and
// every higher tier have no waiters, C − inUse ≥ 1 + debt[tier] (C: the
// capacity; debt: the free slots the higher tiers' demand claims, below),
// and every node on its leaf's path is under its ceiling; otherwise it is
// queued in its (tier, leaf) list and in its tier's age list, and dispatch
// runs. Dispatch grants in tier order while the predicate holds (a fast
// tier beyond its reservation gives way to lower tiers until its oldest
// waiter has waited W = Short'/2, below), choosing the leaf by walking the
// tree from the root to the child with waiters, room under its ceiling
// and the smallest (inUse+1)/weight (ties rotate), and popping the oldest
// (FIFO) or newest (LIFO) waiter there. Each tier runs CoDel with adaptive
// LIFO: it turns LIFO once its queue has been non-empty for more than
// Long', sheds from the old end of its age list after Long' (FIFO) or
// Short' (LIFO), and turns FIFO again when the queue is empty and nothing
// was shed for Long'. Decisions are collected under the lock and delivered
// after unlocking: a Submit callback or one send on the waiter's buffered
// channel, never a broadcast. One timer per gate is armed at the next
// moment dispatch has work.
//
// # Debt: room for what the higher tiers need
//
// Debt keeps a lower tier from filling the slots a higher tier is about to
// need: a transaction cannot be pre-empted, so a slot given to 20 ms batch
// work is gone for 20 ms. The gate sizes it by the higher tiers' demand,
// not by how often they wait: clients looping a short query wait often,
// each for a fraction of a millisecond, and a count of their waits would
// reserve nearly the whole pool for them.
//
//   - Demand. Each tier keeps D, the time average of its tickets in use
//     plus its waiters, exponentially weighted with time constant τ = 64
//     of the tier's median hold times (its own streaming median, the
//     gate's before it has one), within [Short, DebtDecay]. It is exact
//     for that piecewise-constant count (brought up to date before every
//     change of it), O(1) per change, and needs no timer.
//   - Reservation by waits, for fast tiers. A tier is fast when its
//     median hold is at most W/4 = Short'/8: several of its transactions
//     fit in W, so a waiter beyond its reservation gets one of its own
//     slots back well within W. A fast tier keeps a reservation r, which
//     starts at the capacity and decays with the time constant τ of its
//     demand; each of its admissions that waited W or longer, and each
//     CoDel shed of it, raises r to max(r+1, 2, its tickets plus waiters),
//     at most the capacity. Its feedback slots are r rounded, at least
//     one; a slower tier's are the capacity (its reservation is its demand
//     claim). Both are 0 once the tier's D ≤ 0.05.
//   - Claim. The tiers above p claim c(p) slots: the smaller of the sum
//     of their D rounded to the nearest slot (at least one while the sum
//     is above 0.05, at most the capacity) and the sum of their feedback
//     slots. A tier's own reservation (TierSnapshot.Reserved) is the same
//     with its D and feedback slots alone.
//   - Debt. debt[p] = max(0, c(p) − the tickets the tiers above p hold):
//     the free slots p must leave them. The predicate is
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
// queues for its own releases, which strict order gives it; reserving for
// the peak keeps idle the slots of rare coincidences. Waiters count in D,
// so a tier that queues for long claims more. Why 64 hold times: shorter
// averages follow every fluctuation of the higher tiers' concurrency and
// the lower tiers fill each dip with long transactions, which the
// simulations S3b and S3c (admission/sim) catch. Why round to the nearest
// slot: rounding up would reserve a second idle slot for a demand of 1.1.
// Why the floor of one slot: a light top tier (a quarter of a slot) would
// otherwise wait for a batch transaction to end on every request; with it,
// it never waits, for a quarter of the pool idle.
//
// Why waits and not demand, for a fast tier: a closed-loop client uses
// whatever it is given. Four clients looping SELECT 1 back to back hold
// over two slots of four when nothing stops them, and their demand claims
// as much; what they need is short waits, not slots. On one reserved slot
// they wait a few of their hold times each and the lower tier gets the
// other three (simulation S7). The feedback finds the reservation: if one
// slot is not enough, late admissions raise r and the tier gives way less.
// Only fast tiers, and only below their demand claim: a tier of 10 ms
// transactions that gave way would wait a good part of W for its own
// releases each time, and r would settle where its waits stay under W,
// not where its p99 does.
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
//     after τ·ln(D/0.05); τ is at most DebtDecay (10 s). Not at once: a
//     tier that pauses between two requests would find its slots taken by
//     long transactions.
//
// Config.DebtDecay (the policy's debt_decay_interval) caps τ, i.e. how
// long a reservation may outlive the demand behind it; the decay of D does
// the forgiving (an admission_file's debt_forgive_per_success, the
// library's forgiveness per uncontended higher-tier admission, is read and
// checked so that such files load, and goes no further). PoolSize only decides
// whether fair sharing is on. NoDebt turns the reservations off (strict
// tier order alone).
//
// # CoDel with adaptive LIFO
//
// Each tier has its own CoDel state, so a lower tier held back by debt
// sees its own standing queue and sheds, without touching the tiers above.
// The timeouts are Short' = max(Short, 2×p50) and Long' = max(Long,
// 10×p50), both capped by MaxWait (query_wait_timeout), where p50 is a
// streaming median of the pool's hold times: 5 ms is too short a wait
// where transactions take 10 ms. Config.HoldP50 fixes p50 (> 0) or removes
// the floors (< 0).
//
//   - FIFO (healthy): waiters are served oldest first and shed with
//     ReasonFIFOTimeout after Long'.
//   - Entry: a tier whose queue has been non-empty for more than Long'
//     turns LIFO (exactly: the timer fires at Long' + 1 ns).
//   - LIFO (overloaded): the newest waiter is served first (in the leaf
//     the fair dispatch chose) and the oldest are shed with
//     ReasonLIFOTimeout after Short'. Shedding always starts at the old
//     end of the tier's age list.
//   - Exit, with hysteresis: the tier turns FIFO again only when its
//     queue is empty and nothing was shed for a whole Long'. Leaving as
//     soon as the queue empties (the library's rule, NoHysteresis, kept
//     for the simulations) makes the mode flap under sustained overload,
//     and admitted waits grow to many times Short'. The exit is evaluated
//     when the queue empties, before a push and on Snapshot, the only
//     moments the mode is observable. ModeSwitches counts transitions in
//     both directions.
//
// ShedError.RetryAfter is Long' at shed time: by then the queue has been
// re-evaluated for a full interval, so an immediate retry is not invited;
// the client adds jitter (admission/throttle).
//
// # Weighted fair sharing
//
// A TreeSpec declares the levels (dimensions) and the nodes, each with a
// weight among its siblings and a ceiling: the fraction of its parent's
// capacity it may hold even when capacity is idle (a hard cap, for
// example to keep unauthenticated traffic under 30 %). Values not declared
// at a level fall into that level's implicit "other" node, so clients
// cannot create nodes. A node's limit is ceil(ceiling × its parent's
// limit), at least 1 and at most the parent's limit, on the live capacity
// (limits follow server churn; debt does not).
//
// The target is the weighted max-min allocation: water-filling from the
// root, each node's capacity is split among its children by weight; a
// child that needs less than its share keeps only what it needs and the
// rest is split again among the others, never past a ceiling. WaterFill
// computes it off the hot path (it allocates): it is the test oracle of
// the dispatcher and feeds SHOW ADMISSION.
//
// The gate reaches it by deficit dispatch: when a slot frees, the tier
// being served walks the tree from the root to the child that has
// waiters of that tier, room under its ceiling and the smallest
// (inUse+1)/weight, down to a leaf, and pops that leaf's queue. Ties
// rotate, so that two equal children alternate the odd slot instead of one
// always getting it. A category that returns after being idle has the
// smallest ratio and takes every following release until it has its
// share: it converges within one hold time of the incumbents. A new
// request takes the fast path only when its path is under its ceilings,
// and never past a waiter of its own or a higher tier, so arrivals cannot
// bypass a category below its share. Dispatch scans a node's children
// (O(fanout) per level) rather than keeping a heap per (tier, node):
// fanouts are small and declared, and a scan makes the rotation trivial.
// A subtree whose waiters are all held back by ceilings is skipped by
// trying the next candidate.
//
// Fairness is off (one FIFO or LIFO queue per tier, no weights or
// ceilings) with NoFairness or when PoolSize < 4 × declared leaves, where
// the shares would be mostly rounding; Gate.Fair reports it, so that the
// pooler warns that the policy's ceilings are not enforced on that pool.
//
// # Start-up and zero capacity
//
// The pool is starting while servers are logging in (Gate.SetPool's
// loggingIn > 0: warm-up, after RECONNECT, after churn) or before it has
// ever had capacity. A queue behind logins is not overload, and shedding
// critical work because logins take longer than Short' would fail it for
// no reason. So while the pool starts:
//
//   - the top tier neither turns LIFO nor is shed by CoDel: its waiters
//     wait for the servers up to MaxWait, which the pooler sets to
//     query_wait_timeout (the policy has no per-tier timeout; no limit
//     when query_wait_timeout is 0), as every client waits in PgBouncer;
//   - the lower tiers keep their CoDel timeouts (Long' FIFO, Short' LIFO);
//   - no tier gives way (strict order);
//   - nothing is shed for zero capacity.
//
// When the start ends, the top tier's waiters get their timeouts afresh
// and its LIFO clock restarts, so a backlog queued behind slow logins is
// not shed the moment the servers arrive. Capacity 0 sheds only once the
// pool has had capacity and no login is in flight (nothing is coming:
// pool closed, database unreachable): after a grace of Short', waiters
// below the top tier are shed with ReasonZeroCapacity, and new requests
// below the top tier at once; the top tier keeps its own timeouts. Use
// capacity 0 for "cannot serve", not for PAUSE.
//
// # Details
//
//   - A tier whose remaining waiters are all held back by ceilings does not
//     stop dispatch to lower tiers (their waiters could not use the slot
//     anyway; strict order would idle capacity). A higher-tier waiter still
//     sends same- and lower-tier arrivals through the queue (no fast path),
//     where dispatch admits them at once if they fit.
//   - Dispatch runs on events (a request, a release, a cancel, a change of
//     capacity), on the timer, and after a fast-path admission when lower
//     tiers have waiters: the higher tiers' demand may have decayed since
//     the last dispatch. Without these a waiter held back by debt on an
//     idle pool would wait for its own timeout.
//   - Hold-time medians are streaming "frugal" medians: each Release moves
//     the estimate by a factor 1±1/64 towards the sample and never past it.
//     O(1), no memory, insensitive to rare long transactions; it tracks a
//     10× change in about 150 releases. The gate's median sets the
//     timeouts; each tier also keeps its own, always estimated, for the
//     time constant of its demand.
//   - Timer: one per gate, armed at the earliest of the head waiters'
//     timeouts, a FIFO tier's switch to LIFO, the end of the zero-capacity
//     grace and the debt wake. It is re-armed only when that moment moves
//     earlier; a timer armed earlier than needed fires, finds little to do
//     and re-arms (fewer AfterFunc calls than re-arming on every pop).
//   - Lowering capacity below inUse revokes nothing: grants stop until
//     releases bring inUse below it. Raising it grants exactly what fits.
//   - A priority outside [0, Tiers) is clamped; an unknown LeafID becomes the
//     tree's all-"other" leaf. Ticket.Class reports what was used.
//   - Acquire: an already-cancelled ctx fails without queueing; a grant that
//     races the cancellation is released by Acquire (without feeding the
//     hold-time estimate) and ctx.Err() returned; a shed that races it also
//     returns ctx.Err(). A cancelled waiter is unlinked at once, not left
//     for lazy skipping (it would keep the queue "non-empty" for CoDel and
//     for the tiers below), and dispatch runs again, since it may have held
//     others back. Waiters are recycled through a sync.Pool; the
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
