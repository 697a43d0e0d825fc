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
// maxIdle of them.
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
		f = <-ch // nil: the pool closed
	}
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
