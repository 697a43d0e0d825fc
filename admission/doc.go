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
// tier and every higher tier have no waiters, C − inUse ≥ 1 + debt[tier],
// and every node on its leaf's path is under its ceiling; otherwise it is
// queued in its (tier, leaf) list and in its tier's age list, and dispatch
// runs. Dispatch grants in strict tier order while the predicate holds,
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
// # Choices the research left open, and deviations from admission.md
//
//   - Debt: per tier, clamped to [0, PoolSize], decaying linearly by
//     PoolSize per DebtDecay, computed lazily (all tiers brought to "now"
//     together). Tier 0 never owes. PoolSize is the configured pool size, not
//     the live capacity (§5 item 2). Float residue below 1e-9 is zero, so ten
//     forgivenesses of 0.1 clear one unit.
//   - A request charges debt (+1 on lower tiers) only when it is still
//     waiting after the dispatch that follows its enqueue and is not held
//     back by its own category's ceiling: reserving capacity for it could
//     not have helped. The library charges before enqueueing; the outcome is
//     the same except for the ceiling case.
//   - A tier whose remaining waiters are all held back by ceilings does not
//     stop dispatch to lower tiers (their waiters could not use the slot
//     anyway; strict order would idle capacity). A higher-tier waiter still
//     sends same- and lower-tier arrivals through the queue (no fast path),
//     where dispatch admits them at once if they fit.
//   - Waiters held back only by debt are woken when the debt has decayed
//     enough (a deadline of the single timer); after a fast-path admission
//     that forgave debt, dispatch runs if lower tiers have waiters. Neither
//     is in admission.md, which re-evaluates only on events; without them a
//     debt-blocked waiter on an idle pool waits for its own timeout.
//   - §4.1's predicate example ("in use 6, debt 3: tier 3 waits, needs 1 + 3
//     > 4 free") contradicts the predicate: 4 free admits. Tests check the
//     boundary both ways.
//   - Hold-time median (for Short' = max(Short, 2×p50), Long' = max(Long,
//     10×p50), both capped by MaxWait): a streaming "frugal" median, each
//     Release moving the estimate by a factor 1±1/64 towards the sample and
//     never past it. O(1), no memory, insensitive to rare long transactions;
//     it tracks a 10× change in about 150 releases (1/16 swung the short
//     timeout 0.7–1.4× around its ideal in simulation S6). Config.HoldP50 fixes it
//     (> 0) or removes the floors (< 0; what the [sim] model used).
//   - The LIFO exit is evaluated lazily (when the queue empties, before a
//     push, on Snapshot), since the mode is observable only then. LIFO entry
//     is exact: the timer fires at nonEmptySince + Long' + 1ns ("more than
//     long"). ModeSwitches counts transitions in both directions.
//   - Timer: one per gate. It is re-armed only when the next deadline moves
//     earlier; a timer armed earlier than needed fires, finds little to do
//     and re-arms (fewer AfterFunc calls than re-arming on every pop).
//   - Capacity 0 is a grace period of Short': waiters keep waiting (a pool
//     between two server connections must not shed). If capacity is still 0
//     after Short', every waiter is shed with ReasonZeroCapacity and new
//     requests are shed at once until capacity returns. Use capacity 0 for
//     "cannot serve" (database down, pool closed), not for PAUSE.
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
//   - Small pools and debt: with C = 1, any debt > 0 shuts the lower tiers
//     out until it decays (C − inUse ≥ 1 + debt cannot hold). That is the
//     library's rule, kept; pools that small should use NoDebt or one tier.
package admission
