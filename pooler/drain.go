package pooler

import (
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/config"

	"github.com/pgturnstile/pgturnstile/wire"
)

// Bounded exhaust: a server whose client left while linked is brought back
// to idle and reused rather than closed (drainLocked). Output still coming
// is discarded up to client_drain_max_bytes; a query that sends more, or
// nothing for drainQuietAfter, or is still running drainCancelAfter after
// the client left, is cancelled on the pool's bounded cancel path. Nothing
// is sent to the server until that cancel has reached Postgres, so it
// cannot hit the ROLLBACK or, after release, the next client's query. Then
// Sync / ROLLBACK / reset as needed, and release. Only a drain that does
// not reach idle within drainTimeout, or whose server fails, closes it.
// Each drain is counted once in pgturnstile_server_drain_total by outcome:
// drained (no cancel was needed), cancelled, closed.

// drainTimeout bounds how long a server whose client left may take to
// become idle before it is closed instead.
const drainTimeout = 5 * time.Second

// drainQuietAfter: a query that sent nothing for this long after its client
// left is cancelled. Most statements finish well within it (a cancel costs
// Postgres a connection), and it is short next to drainTimeout.
const drainQuietAfter = 100 * time.Millisecond

// drainCancelAfter: a query still running this long after its client left
// is cancelled even when it trickles output below the byte budget.
const drainCancelAfter = time.Second

// drainState is the progress of one drain. Guarded by client.mu, except
// bytes and cancelling (the pump's discard path reads them lock-free) and
// cancelOK (written by the cancel goroutine before it closes cancel).
type drainState struct {
	// deadline: the server is closed if it is not idle by then; zero
	// until the drain starts.
	deadline time.Time
	started  time.Time
	// bytes counts server output discarded since the client left; seen is
	// its value at the last quiet check.
	bytes atomic.Int64
	seen  int64
	timer timer // the quiet check, armed while a query runs
	// cancel is closed when the drain's one cancel request is done (nil:
	// none sent); cancelOK says Postgres took it.
	cancel     chan struct{}
	cancelling atomic.Bool
	cancelOK   bool
	copyFailed bool // CopyFail sent for a COPY FROM STDIN left open
	finished   bool // the outcome was counted
}

// startDrainLocked starts the clock of a drain and, when a query is still
// running, the quiet check that cancels it.
func (c *client) startDrainLocked(s *server, now time.Time) {
	d := c.link.drain
	d.deadline = now.Add(drainTimeout)
	d.started = now
	if c.link.ls.outstanding == 0 {
		return
	}
	if c.svc.settings().ClientDrainMaxBytes == 0 {
		c.startCancelLocked(s)
		return
	}
	d.seen = d.bytes.Load()
	d.timer = c.svc.clock.AfterFunc(drainQuietAfter, func() { c.drainQuietCheck(s) })
}

// drainQuietCheck cancels the running query of a drained server when it
// sent nothing since the last check, or runs past drainCancelAfter.
func (c *client) drainQuietCheck(s *server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.link.drain
	if c.link.srv != s || d.finished || d.cancel != nil || c.link.ls.outstanding == 0 {
		return
	}
	b := d.bytes.Load()
	if b == d.seen || c.svc.clock.Since(d.started) >= drainCancelAfter {
		c.startCancelLocked(s)
		return
	}
	d.seen = b
	d.timer.Reset(drainQuietAfter)
}

// drainDiscarded counts n bytes of server output thrown away for a client
// that left, and cancels the query once client_drain_max_bytes is passed.
func (c *client) drainDiscarded(s *server, n int64) {
	d := c.link.drain
	if d.bytes.Add(n) <= int64(c.svc.settings().ClientDrainMaxBytes) || d.cancelling.Load() {
		return
	}
	c.mu.Lock()
	if c.link.srv == s && c.link.ls.outstanding > 0 {
		c.startCancelLocked(s)
	}
	c.mu.Unlock()
}

// startCancelLocked sends the drain's one cancel request, in the
// background: the pump keeps discarding meanwhile (a backend blocked on a
// full socket only sees the cancel once it can write again).
func (c *client) startCancelLocked(s *server) {
	d := c.link.drain
	if d.cancel != nil {
		return
	}
	done := make(chan struct{})
	d.cancel = done
	d.cancelling.Store(true)
	p := c.pool
	go func() {
		d.cancelOK = p.drainCancel(s)
		close(done)
	}()
}

// awaitCancelLocked waits, with mu released, until the drain's cancel (if
// any) has reached Postgres or failed. False when that did not happen
// before the drain deadline: the server cannot be trusted with another
// message.
func (c *client) awaitCancelLocked() bool {
	done := c.link.drain.cancel
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	c.mu.Unlock()
	t := c.svc.clock.NewTimer(c.link.drain.deadline.Sub(c.svc.clock.Now()))
	ok := true
	select {
	case <-done:
	case <-t.C():
		ok = false
	}
	t.Stop()
	c.mu.Lock()
	return ok
}

// finishDrainLocked counts the drain's outcome, once.
func (c *client) finishDrainLocked(outcome string) {
	d := c.link.drain
	if d.finished {
		return
	}
	d.finished = true
	if d.timer != nil {
		d.timer.Stop()
	}
	c.svc.countEvents("pgturnstile_server_drain_total", "database", c.pool.key.db, "outcome", outcome)
}

// drainReleaseLocked ends a drain that brought the server back to idle:
// it goes back to the pool. Releases mu.
func (c *client) drainReleaseLocked(s *server) bool {
	outcome := "drained"
	if c.link.drain.cancelOK {
		outcome = "cancelled"
	}
	c.finishDrainLocked(outcome)
	c.unlinkServerLocked()
	unsure := c.link.ls.unsure
	c.mu.Unlock()
	s.conn.SetReadDeadline(time.Time{})
	if unsure {
		c.pool.discard(s, "client protocol state unknown after COPY")
		return false
	}
	c.pool.release(s)
	return false
}

// drainFailedLocked ends a drain that could not bring the server back: it
// is closed. Releases mu.
func (c *client) drainFailedLocked(s *server, reason string) bool {
	c.finishDrainLocked("closed")
	c.unlinkServerLocked()
	c.mu.Unlock()
	c.pool.discard(s, reason)
	return false
}

// drainTick handles the read deadline expiring in the middle of a message
// of a server whose client left (leave wakes the pump that way): only the
// drain deadline applies; the message is finished before any drain step.
// False when the server was closed.
func (c *client) drainTick(s *server) bool {
	c.mu.Lock()
	now := c.svc.clock.Now()
	if c.link.drain.deadline.IsZero() {
		c.startDrainLocked(s, now)
	}
	if now.After(c.link.drain.deadline) {
		return c.drainFailedLocked(s, "client disconnect while server was not ready")
	}
	deadline := c.link.drain.deadline
	c.mu.Unlock()
	s.conn.SetReadDeadline(deadline)
	return true
}

// relayFailed handles an error of the pump's s.r.Forward(out): the
// client's socket failing (it left mid-result: the rest of the message is
// discarded, the client's goroutine is woken by closing its socket, and
// leave starts the drain), or the read deadline that leave uses to wake the
// pump expiring mid-message (the message is resumed). Anything else is the
// server failing. False when the link is over.
func (c *client) relayFailed(s *server, out *wire.Writer, err error) bool {
	for {
		switch {
		case out != nil && err == out.Err():
			// The client is gone: from here on this is a drain, bounded
			// like one (serve may be the one relaying, and then it cannot
			// notice the departure itself).
			c.conn.Close()
			c.mu.Lock()
			if c.link.srv == s && !c.gone.Load() {
				if c.link.drain == nil {
					c.link.drain = &drainState{} // before gone: the pump reads it once gone
				}
				c.setStateLocked(clientDraining)
				c.link.resetDue = c.mode == config.PoolModeSession || c.svc.settings().ServerResetQueryAlways
			}
			c.mu.Unlock()
			out = nil
			if s.r.Fits() {
				// Forward had read the whole message before the write
				// failed.
				return true
			}
		case isTimeout(err) && c.gone.Load():
			if !c.drainTick(s) {
				return false
			}
			out = nil
		default:
			c.serverLost(s, err)
			return false
		}
		if err = s.r.Forward(out); err == nil {
			return true
		}
	}
}
