// Package workers runs each client connection's goroutine on a goroutine
// a finished client left, when one is idle, instead of starting a new one.
//
// Why: a new goroutine starts on a small stack, and a login runs deep
// (SCRAM, the welcome, the first transaction): the runtime grows the
// stack by copying it twice or three times, walking every frame each
// time. On a connection-per-transaction load that was a tenth of the
// pooler's user CPU. A goroutine that served a client keeps the stack it
// grew, and the next client's login finds it grown. The garbage collector
// still halves the stack of a worker that waits long enough, so idle
// workers give back what they do not use; there are at most
// maxIdle of them, and Shrink ends all but a few of those that stayed idle
// for a second, so that a burst of logins does not
// leave 64 grown stacks behind it.
package workers

import "sync"

// Pool is the idle workers. It is open only between Start and Stop (while
// the pooler serves); before and after, Run is a plain go statement. Once
// closed, idle workers end and busy ones end when their client does. The
// zero Pool is closed.
type Pool struct {
	mu   sync.Mutex
	open bool
	idle []chan func()
	// lowIdle is the fewest idle workers since the last Shrink.
	lowIdle int
}

// maxIdle bounds the goroutines kept waiting for a client.
const maxIdle = 64

// Run runs f on an idle worker, or a new goroutine.
func (w *Pool) Run(f func()) {
	w.mu.Lock()
	if !w.open {
		w.mu.Unlock()
		go f()
		return
	}
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
		w.lowIdle = min(w.lowIdle, n-1)
		w.mu.Unlock()
		ch <- f // buffered: never blocks
		return
	}
	w.mu.Unlock()
	go w.work(f)
}

// work runs f, then waits for the next client's f while the pool is open
// and has room for one more idle worker.
func (w *Pool) work(f func()) {
	var ch chan func()
	for f != nil {
		f()
		w.mu.Lock()
		if !w.open || len(w.idle) >= maxIdle {
			w.mu.Unlock()
			return
		}
		if ch == nil {
			ch = make(chan func(), 1)
		}
		w.idle = append(w.idle, ch)
		w.mu.Unlock()
		f = <-ch // nil: the pool closed, or Shrink ends the worker
	}
}

// shrinkKeep is how many idle workers Shrink leaves: the next few logins
// still find a grown stack.
const shrinkKeep = 4

// Shrink ends the workers that stayed idle since the last Shrink, but
// shrinkKeep, and returns how many it told to end. The pooler's janitor
// calls it every second: after a burst of logins the up to maxIdle grown
// stacks (8–32 KiB each) that the burst left were a fifth of an idle
// client's memory at 5,000 clients; a steady load keeps its workers,
// since each is taken within the interval.
func (w *Pool) Shrink() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Run takes the most recently idle (the end of the list) and work
	// appends there, so the first lowIdle were idle all along.
	n := max(min(w.lowIdle, len(w.idle))-shrinkKeep, 0)
	for _, ch := range w.idle[:n] {
		ch <- nil // as Stop ends them; buffered: never blocks
	}
	m := copy(w.idle, w.idle[n:])
	clear(w.idle[m:])
	w.idle = w.idle[:m]
	w.lowIdle = m
	return n
}

// Start opens the pool.
func (w *Pool) Start() {
	w.mu.Lock()
	w.open = true
	w.mu.Unlock()
}

// Stop closes the pool: idle workers end now, busy ones with their client.
func (w *Pool) Stop() {
	w.mu.Lock()
	w.open = false
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	for _, ch := range idle {
		ch <- nil
	}
}
