package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/wire"
)

// The NOTICEs the pooler sends on its own, in PgBouncer's words:
// login_notify_message with the welcome (appendWelcome), and
// query_wait_notify's to a client queued that long for a server, once per
// wait. The janitor, which may not write to a client, finds the waiters
// (notifyWaitersLocked) and signals each one's notify channel; the
// client's own goroutine, blocked in the pool's queue and owner of the
// client's writer while no server is linked, wakes and writes the NOTICE
// (sendQueuedNotice), then waits on.

// msgQueued is PgBouncer's query_wait_notify text (janitor.c).
const msgQueued = "No server connection available in postgres backend, client being queued"

// newWaitLocked readies w for a new wait: a notice signalled for an earlier
// one that was granted first is dropped. Called with the pool's mu held.
func (w *poolWaiter) newWaitLocked() {
	w.notified = false
	if w.notify != nil {
		select {
		case <-w.notify:
		default:
		}
	}
}

// notifyWaitersLocked signals every waiter queued for at least after and
// not yet told in this wait; 0 = never. Called with p.mu held.
func (p *serverPool) notifyWaitersLocked(now time.Time, after time.Duration) {
	if after <= 0 {
		return
	}
	for w := p.queue.oldest(); w != nil && now.Sub(w.enqueued) >= after; w = p.queue.younger(w) {
		if w.notify == nil || w.notified {
			continue
		}
		w.notified = true
		w.notify <- struct{}{} // its one slot, emptied at each new wait
		w.tellLoop()
	}
}

// sendQueuedNotice tells the client it is queued. It runs on the client's
// goroutine while it waits for a server, when it owns the client's writer;
// a failed write is the client's loss, found at its next read.
func (c *client) sendQueuedNotice() {
	// Not in c.scratch: the message being routed may hold it.
	if err := c.w.Write(wire.AppendNotice(nil, msgQueued)); err == nil {
		c.w.Flush()
	}
}
