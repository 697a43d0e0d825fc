package pooler

// waitQueue holds a pool's clients waiting for a server, in arrival order,
// as PgBouncer serves them. The waiters are linked through their own
// fields (poolWaiter.prev, next), so queueing allocates nothing. Not safe
// for concurrent use: the pool's mu guards it. Every method is O(1).
type waitQueue struct {
	head, tail *poolWaiter
	n          int
}

// push adds w, which must not be queued.
func (q *waitQueue) push(w *poolWaiter) {
	if w.queued {
		panic("BUG: pool waiter queued twice")
	}
	w.queued = true
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n++
}

// pop removes and returns the waiter to serve next, or nil.
func (q *waitQueue) pop() *poolWaiter {
	w := q.head
	if w != nil {
		q.remove(w)
	}
	return w
}

// remove takes w out of the queue; false if it was not queued.
func (q *waitQueue) remove(w *poolWaiter) bool {
	if !w.queued {
		return false
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	q.n--
	return true
}

// len is the number of waiters.
func (q *waitQueue) len() int { return q.n }

// oldest returns the longest-waiting waiter without removing it, or nil;
// oldest, then younger, walks the waiters by age.
func (q *waitQueue) oldest() *poolWaiter { return q.head }

// younger returns the waiter queued next after w (which must be queued),
// or nil.
func (q *waitQueue) younger(w *poolWaiter) *poolWaiter { return w.next }
