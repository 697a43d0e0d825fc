package pooler

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/linkstate"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Bounded exhaust: a server whose client left while linked is brought back
// to idle and reused rather than closed (drain). Output still coming
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
func (l *link) startDrainLocked(s *server, now time.Time) {
	c := l.c
	d := l.mu.drain
	d.deadline = now.Add(drainTimeout)
	d.started = now
	if l.mu.ls.Outstanding() == 0 {
		return
	}
	if c.svc.settings().ClientDrainMaxBytes == 0 {
		l.startCancelLocked(s)
		return
	}
	d.seen = d.bytes.Load()
	d.timer = c.svc.clock.AfterFunc(drainQuietAfter, func() { l.drainQuietCheck(s) })
}

// drainQuietCheck cancels the running query of a drained server when it
// sent nothing since the last check, or runs past drainCancelAfter.
func (l *link) drainQuietCheck(s *server) {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	d := l.mu.drain
	if l.mu.srv != s || d.finished || d.cancel != nil || l.mu.ls.Outstanding() == 0 {
		return
	}
	b := d.bytes.Load()
	if b == d.seen || c.svc.clock.Since(d.started) >= drainCancelAfter {
		l.startCancelLocked(s)
		return
	}
	d.seen = b
	d.timer.Reset(drainQuietAfter)
}

// drainDiscarded counts n bytes of server output thrown away for a client
// that left, and cancels the query once client_drain_max_bytes is passed.
func (l *link) drainDiscarded(s *server, n int64) {
	c := l.c
	d := l.mu.drain
	if d.bytes.Add(n) <= int64(c.svc.settings().ClientDrainMaxBytes) || d.cancelling.Load() {
		return
	}
	c.mu.Lock()
	if l.mu.srv == s && l.mu.ls.Outstanding() > 0 {
		l.startCancelLocked(s)
	}
	c.mu.Unlock()
}

// startCancelLocked sends the drain's one cancel request, in the
// background: the pump keeps discarding meanwhile (a backend blocked on a
// full socket only sees the cancel once it can write again).
func (l *link) startCancelLocked(s *server) {
	d := l.mu.drain
	if d.cancel != nil {
		return
	}
	done := make(chan struct{})
	d.cancel = done
	d.cancelling.Store(true)
	p := s.pool
	go func() {
		d.cancelOK = p.drainCancel(s)
		close(done)
	}()
}

// awaitDrainCancel waits, with no lock held, until the drain's cancel
// (done) has reached Postgres or failed. False when that did not happen
// before the drain deadline: the server cannot be trusted with another
// message.
func (l *link) awaitDrainCancel(done chan struct{}, deadline time.Time) bool {
	c := l.c
	t := c.svc.clock.NewTimer(deadline.Sub(c.svc.clock.Now()))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C():
		return false
	}
}

// drainNextKind is what the pump does next for a drain.
type drainNextKind uint8

const (
	drainReadOn      drainNextKind = iota // read (and discard) on until the deadline
	drainSend                             // write s.scratch, then read on
	drainAwaitCancel                      // wait for the cancel, then decide again
	drainGiveBack                         // unlinked: back to the pool
	drainClose                            // unlinked: close the server
)

// drainNext is the drain's next step, decided under c.mu
// (nextDrainLocked) and carried out with it released (runDrain).
type drainNext struct {
	kind     drainNextKind
	deadline time.Time     // drainReadOn, drainSend, drainAwaitCancel
	cancel   chan struct{} // drainAwaitCancel: closed when the cancel is done
	reason   string        // drainClose: logged as the server's close reason
	unsure   bool          // drainGiveBack: the link is unsure (linkstate.State.Unsure): close it instead
}

// drain takes the next step to bring a server whose client left back to
// idle. Called without c.mu: it decides under the lock and does the I/O
// (a write to the server, the wait for the drain's cancel, the release)
// outside it. False when the link is over.
func (l *link) drain(s *server) bool {
	c := l.c
	for {
		c.mu.Lock()
		next := l.nextDrainLocked(s)
		c.mu.Unlock()
		if next.kind != drainAwaitCancel {
			return l.runDrain(s, next)
		}
		if !l.awaitDrainCancel(next.cancel, next.deadline) {
			c.mu.Lock()
			next = l.failDrainLocked("cancel of an abandoned query did not complete")
			c.mu.Unlock()
			return l.runDrain(s, next)
		}
		// The cancel is done: decide again (only the pump changes the
		// link once the client is gone, so the step is the same).
	}
}

// nextDrainLocked decides the drain's next step
// (linkstate.State.NextDrainStep) and records on the link what the pump
// is about to send.
// A step that sends the server anything waits for the drain's cancel
// first; a drain that ends is unlinked here.
func (l *link) nextDrainLocked(s *server) drainNext {
	c := l.c
	now := c.svc.clock.Now()
	d := l.mu.drain
	if d.deadline.IsZero() {
		l.startDrainLocked(s, now)
	}
	step := l.mu.ls.NextDrainStep(l.mu.resetDue)
	if step == linkstate.DrainWait {
		switch {
		case now.After(d.deadline):
			return l.failDrainLocked("client disconnect while server was not ready")
		case l.mu.ls.InCopy() && !d.copyFailed:
			// A COPY FROM STDIN waits for data that will never come.
			d.copyFailed = true
			l.mu.ls.FromClient(wire.MsgCopyFail)
			s.scratch = wire.AppendCopyFail(s.scratch[:0], "client disconnected")
			return drainNext{kind: drainSend, deadline: d.deadline}
		}
		return drainNext{kind: drainReadOn, deadline: d.deadline}
	}
	if done := d.cancel; done != nil {
		select {
		case <-done:
		default:
			return drainNext{kind: drainAwaitCancel, cancel: done, deadline: d.deadline}
		}
	}
	switch {
	case step == linkstate.DrainSync:
		l.mu.ls.FromClient(wire.MsgSync)
		l.pushSyncLocked(wire.MsgSync)
		s.scratch = wire.AppendSync(s.scratch[:0])
	case step == linkstate.DrainRollback:
		// Auto rollback: the client's transaction dies with it.
		l.mu.ls.FromClient(wire.MsgQuery)
		l.pushSyncLocked(wire.MsgQuery)
		s.scratch = wire.AppendQuery(s.scratch[:0], "ROLLBACK")
		l.mu.pool.metrics.drainRollbacks.Inc()
	case step == linkstate.DrainReset && c.svc.settings().ServerResetQuery == "":
		l.mu.resetDue = false
		return l.releaseDrainedLocked()
	case step == linkstate.DrainReset:
		l.mu.resetDue = false
		s.unreportedDirty = true // whatever the reset query is
		if c.tracking {
			// The reset (typically DISCARD ALL) may drop the mapping's
			// statements (a sharded session-mode client maps them):
			// forget them rather than guess.
			s.stmts.Clear(c.svc.stmts)
			s.unnamedOwner = 0
		}
		l.mu.ls.FromClient(wire.MsgQuery)
		l.pushSyncLocked(wire.MsgQuery)
		s.scratch = wire.AppendQuery(s.scratch[:0], c.svc.settings().ServerResetQuery)
	default: // linkstate.DrainRelease
		return l.releaseDrainedLocked()
	}
	return drainNext{kind: drainSend, deadline: d.deadline}
}

// runDrain carries out a drain step decided by nextDrainLocked; c.mu is
// not held. False when the link is over.
func (l *link) runDrain(s *server, next drainNext) bool {
	switch next.kind {
	case drainReadOn:
		s.conn.SetReadDeadline(next.deadline)
		return true
	case drainSend:
		s.conn.SetReadDeadline(next.deadline)
		if s.w.Write(s.scratch) != nil || s.w.Flush() != nil {
			l.serverLost(s, s.w.Err())
			return false
		}
		return true
	case drainGiveBack:
		s.conn.SetReadDeadline(time.Time{})
		if next.unsure {
			s.pool.discard(s, "client protocol state unknown after COPY")
			return false
		}
		s.pool.release(s)
		return false
	case drainClose:
		s.pool.discard(s, next.reason)
		return false
	}
	panic("BUG: drain step " + strconv.Itoa(int(next.kind)) + " cannot be run")
}

// finishDrainLocked counts the drain's outcome, once.
func (l *link) finishDrainLocked(outcome string) {
	d := l.mu.drain
	if d.finished {
		return
	}
	d.finished = true
	if d.timer != nil {
		d.timer.Stop()
	}
	l.mu.pool.metrics.count("pgturnstile_server_drain_total", "outcome", outcome)
}

// releaseDrainedLocked ends a drain that brought the server back to idle
// and unlinks it; runDrain gives it back to the pool.
func (l *link) releaseDrainedLocked() drainNext {
	outcome := "drained"
	if l.mu.drain.cancelOK {
		outcome = "cancelled"
	}
	l.finishDrainLocked(outcome)
	l.unlinkServerLocked()
	return drainNext{kind: drainGiveBack, unsure: l.mu.ls.Unsure()}
}

// failDrainLocked ends a drain that could not bring the server back and
// unlinks it; runDrain closes it.
func (l *link) failDrainLocked(reason string) drainNext {
	l.finishDrainLocked("closed")
	l.unlinkServerLocked()
	return drainNext{kind: drainClose, reason: reason}
}

// drainTick handles the read deadline expiring in the middle of a message
// of a server whose client left (leave wakes the pump that way): only the
// drain deadline applies; the message is finished before any drain step.
// False when the server was closed.
func (l *link) drainTick(s *server) bool {
	c := l.c
	c.mu.Lock()
	now := c.svc.clock.Now()
	if l.mu.drain.deadline.IsZero() {
		l.startDrainLocked(s, now)
	}
	next := drainNext{kind: drainReadOn, deadline: l.mu.drain.deadline}
	if now.After(next.deadline) {
		next = l.failDrainLocked("client disconnect while server was not ready")
	}
	c.mu.Unlock()
	return l.runDrain(s, next)
}

// relayFailed handles an error of the pump's s.r.Forward(out): the
// client's socket failing (it left mid-result: the rest of the message is
// discarded, the client's goroutine is woken by closing its socket, and
// leave starts the drain), or the read deadline that leave uses to wake the
// pump expiring mid-message (the message is resumed). Anything else is the
// server failing. False when the link is over.
func (l *link) relayFailed(s *server, out *wire.Writer, err error) bool {
	c := l.c
	for {
		switch {
		case out != nil && err == out.Err():
			// The client is gone: from here on this is a drain, bounded
			// like one (serve may be the one relaying, and then it cannot
			// notice the departure itself).
			c.conn.Close()
			c.mu.Lock()
			if l.mu.srv == s && !c.gone.Load() {
				if l.mu.drain == nil {
					l.mu.drain = &drainState{} // before gone: the pump reads it once gone
				}
				c.setStateLocked(clientDraining)
				l.mu.resetDue = c.mode == config.PoolModeSession || c.svc.settings().ServerResetQueryAlways
			}
			c.mu.Unlock()
			out = nil
			if c.gone.Load() {
				l.mu.pumpFreed.signal() // nothing more goes to the client
			}
			if s.r.Fits() {
				// Forward had read the whole message before the write
				// failed.
				return true
			}
		case isTimeout(err) && c.gone.Load():
			l.mu.pumpFreed.signal() // out is dropped: see pumpRun
			if !l.drainTick(s) {
				return false
			}
			out = nil
		default:
			l.serverLost(s, err)
			return false
		}
		if err = s.r.Forward(out); err == nil {
			return true
		}
	}
}

// abandonLink hands a linked server, if any, to its pump to drain back to
// clean once the client is gone: see leave.
func (l *link) abandonLink() {
	c := l.c
	c.mu.Lock()
	if l.mu.writing && l.mu.srv != nil {
		// serve still holds the server's writer with part of a batch it
		// recorded as sent (a refused frame read in the same batch kept
		// flushBatch from running): it goes out now, so the replies the
		// drain waits for are owed by the server, not by a buffer.
		s := l.mu.srv
		c.mu.Unlock()
		if err := s.w.Flush(); err != nil {
			s.conn.Close()
		}
		c.mu.Lock()
	}
	l.mu.writing = false
	l.mu.writerDone.Broadcast()
	s := l.mu.srv
	if s != nil {
		if l.mu.drain == nil {
			l.mu.drain = &drainState{} // before gone: the pump reads it once gone
		}
		if c.mu.state != clientDraining { // the pump may have seen the client go first (relayFailed)
			c.setStateLocked(clientDraining)
		}
		l.mu.resetDue = c.mode == config.PoolModeSession || c.svc.settings().ServerResetQueryAlways
		// Under mu: once the pump has released s, another client's pump
		// reads it, and this deadline must not reach that one.
		s.conn.SetReadDeadline(time.Now())
	}
	c.mu.Unlock()
	if s != nil {
		// A link left mid-batch has no pump yet: start the one that
		// drains it.
		l.startPump(s)
	}
}
