package admission

import "time"

// Waiter is one client waiting for a server. The pooler owns it and keeps its
// own state in Data; the queue only links it.
type Waiter struct {
	Enqueued time.Time
	Data     any

	prev, next *Waiter
	queued     bool
}

// Queued reports whether w is in a queue.
func (w *Waiter) Queued() bool { return w.queued }

// Queue orders the waiters of one pool. Implementations are not safe for
// concurrent use: the pool's lock guards them. Every method is O(1).
type Queue interface {
	// Push adds w, which must not be queued.
	Push(w *Waiter)
	// Pop removes and returns the waiter to serve next, or nil.
	Pop() *Waiter
	// Remove takes w out of the queue; false if it was not queued.
	Remove(w *Waiter) bool
	// Len is the number of waiters.
	Len() int
	// Oldest returns the longest-waiting waiter without removing it, or nil.
	Oldest() *Waiter
	// Younger returns the waiter queued next after w (which must be
	// queued), or nil: Oldest, then Younger, walks the waiters by age.
	Younger(w *Waiter) *Waiter
}

// FIFO serves waiters in arrival order, as PgBouncer does.
type FIFO struct {
	head, tail *Waiter
	n          int
}

// NewFIFO returns an empty FIFO queue.
func NewFIFO() *FIFO { return &FIFO{} }

func (q *FIFO) Push(w *Waiter) {
	if w.queued {
		panic("BUG: admission: waiter pushed twice")
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

func (q *FIFO) Pop() *Waiter {
	w := q.head
	if w != nil {
		q.Remove(w)
	}
	return w
}

func (q *FIFO) Remove(w *Waiter) bool {
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

func (q *FIFO) Len() int { return q.n }

func (q *FIFO) Oldest() *Waiter { return q.head }

func (q *FIFO) Younger(w *Waiter) *Waiter { return w.next }
