package pooler

import (
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

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

// poolWaiter is a client waiting in the queue for a server. The waiter,
// its channel and its wait count are reused from one wait to the next: a
// client waits for a server on most transactions when clients outnumber
// servers, and that path must not allocate.
type poolWaiter struct {
	// enqueued is when the wait began; prev, next and queued link the
	// waiter into its pool's waitQueue.
	enqueued   time.Time
	prev, next *poolWaiter
	queued     bool
	grant      chan grant // buffered(1): the pool never blocks handing over
	// seq numbers the client's waits, so a cancel request aimed at one
	// wait cannot end a later one that reuses the waiter (cancelWaiter).
	seq atomic.Uint64
	// query_wait_notify (queuenotice.go): the janitor signals notify,
	// once per wait (notified, under the pool's mu), and the waiting
	// goroutine calls onQueued. nil for a waiter that is never told.
	notify   chan struct{}
	notified bool
	onQueued func()
	// loop is the client's socket when the wait was begun on the event
	// loop (loop.go), whose poller is told of each grant and notify
	// (Post) since nothing there blocks on the channels; nil for a
	// goroutine's wait.
	loop atomic.Pointer[netpoll.Conn]
}

// give hands the waiter its grant, into the channel's one slot, and tells
// an event loop waiting on it. Any goroutine, with the pool's mu or not.
func (w *poolWaiter) give(g grant) {
	w.grant <- g
	w.tellLoop()
}

// tellLoop wakes the event loop whose wait w is, if it is one.
func (w *poolWaiter) tellLoop() {
	if c := w.loop.Load(); c != nil {
		c.Post()
	}
}

type grant struct {
	s   *server
	err error
}

// cancelWaiter ends w's wait number seq with errWaitCanceled, if that wait
// is still queued; a wait that has been granted, or a later one, is left
// alone.
func (p *serverPool) cancelWaiter(w *poolWaiter, seq uint64) {
	p.mu.Lock()
	if w.seq.Load() != seq || !p.queue.remove(w) {
		p.mu.Unlock()
		return
	}
	p.queued.Store(int32(p.queue.len()))
	p.mu.Unlock()
	w.give(grant{err: errWaitCanceled})
}

// expireWaitersLocked takes the waiters that have waited query_wait_timeout
// out of the queue and returns them, to be told after mu is released. The
// janitor calls it every 100 ms, which is the timeout's resolution (PgBouncer
// checks it once a second).
func (p *serverPool) expireWaitersLocked(now time.Time, timeout time.Duration) []*poolWaiter {
	if timeout <= 0 {
		return nil
	}
	var expired []*poolWaiter
	for w := p.queue.oldest(); w != nil && now.Sub(w.enqueued) >= timeout; w = p.queue.oldest() {
		p.queue.remove(w)
		expired = append(expired, w)
	}
	if expired != nil {
		p.queued.Store(int32(p.queue.len()))
	}
	return expired
}

// abandon takes w out of the queue when its cancel channel fired. A grant
// that raced the cancel is handed back to the pool at once, so no server is
// lost; an error grant that raced it (the janitor's query_wait_timeout) is
// dropped, since the wait ends with reason anyway.
func (p *serverPool) abandon(w *poolWaiter, reason error) (*server, error) {
	p.mu.Lock()
	removed := p.queue.remove(w)
	p.queued.Store(int32(p.queue.len()))
	p.mu.Unlock()
	if !removed {
		g := <-w.grant
		if g.s != nil {
			p.release(g.s)
		}
	}
	return nil, reason
}
