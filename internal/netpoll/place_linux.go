//go:build linux

package netpoll

import (
	"sync/atomic"
	"time"
)

// Where a Conn on the loop lives: fill the first pollers first.
//
// Accept deals Conns out to the pollers in turn, which spreads a load
// that one core could serve over all of them: each poller's goroutine
// then wakes for a batch of one or two events, and the wake-ups (the
// runtime's epoll_wait, the scheduler) cost more than the work
// (bench/FINDINGS.md §4: every client on one poller spent a fifth to a
// quarter less CPU per transaction at 10 clients, at the same rate). But
// a fixed placement on the first poller would leave a busy pooler on one
// core. So a Conn on the loop moves, at a rest point (between requests:
// Rebalance), to the first poller with room, and away from a poller that
// is saturated: a load a core can serve gathers on the first pollers, and
// one that outgrows them spreads to the next, core by core.
//
// A poller's load is its goroutine's share of wall time spent handing
// out events (dispatch and posts: the loop's handlers), measured over
// windows of loadWindow. The band between fillBelow and spillAbove is
// where a poller neither takes Conns nor sends them away, so that a
// Conn does not move back and forth; and each poller lets at most one
// Conn leave per moveGap, as the loads it decides by lag a window behind.

const (
	loadWindow = int64(5 * time.Millisecond)
	loadSmooth = 16 // windows the load is averaged over
	// A poller that has ended no window for this long has been idle.
	loadStale  = 4 * loadWindow
	fillBelow  = 600 // thousandths: a poller under this load takes Conns
	spillAbove = 900 // a poller over it sends them to the first with room
	moveGap    = int64(time.Millisecond)
)

var clockBase = time.Now()

// nanotime is a monotonic clock (time.Since reads the monotonic one).
func nanotime() int64 { return int64(time.Since(clockBase)) }

// account adds a batch handed out from t0 to t1 to the poller's load.
// The poller's goroutine's.
func (p *poller) account(t0, t1 int64) {
	p.winBusy += t1 - t0
	if d := t1 - p.winStart; d >= loadWindow {
		// An average over about loadSmooth windows: a thread
		// descheduled while it hands out a batch counts as busy, which
		// on a loaded machine makes one window's share jump about.
		w := p.winBusy * 1000 / d
		if now := p.loadAt.Load(); t1-now > loadStale {
			p.load.Store(w) // idle since: start afresh
		} else {
			l := p.load.Load()
			p.load.Store(l + (w-l)/loadSmooth)
		}
		p.loadAt.Store(t1)
		p.winStart, p.winBusy = t1, 0
	}
}

// loadNow is p's load as of now: its last window's, or 0 when it has been
// idle since.
func (p *poller) loadNow(now int64) int64 {
	if now-p.loadAt.Load() > loadStale {
		return 0
	}
	return p.load.Load()
}

// Rebalance moves c to another poller when the placement asks for it: to
// the first poller before its own with room, or, when its own is
// saturated, to the first one with room after it. It reports whether c
// moved. c must be on the loop, and Rebalance called by its handler on
// its poller's goroutine, as the handler's last use of c: once c has
// moved, its next event runs the handler on the other poller's goroutine,
// maybe before this one has returned.
func (c *Conn) Rebalance() bool {
	from := c.p.Load()
	ps, err := thePollers()
	if err != nil || len(ps) < 2 || from == nil {
		return false
	}
	now := nanotime()
	if now-from.movedAt < moveGap {
		return false
	}
	to := pick(ps, from, now)
	if to == nil || !c.move(from, to) {
		return false
	}
	from.movedAt = now
	moves.Add(1)
	return true
}

var moves atomic.Uint64

// Moves is how many times Rebalance moved a Conn.
func Moves() uint64 { return moves.Load() }

// PollerLoads is each started poller's load (0 to 1), in placement order;
// none before the first Accept started them.
func PollerLoads() []float64 {
	if !pollersStarted.Load() {
		return nil
	}
	now := nanotime()
	loads := make([]float64, len(pollersVal))
	for i, p := range pollersVal {
		loads[i] = float64(p.loadNow(now)) / 1000
	}
	return loads
}

// pick is where a Conn on from goes: the first poller before from with
// room, else (from saturated) the first after it with room; nil to stay.
func pick(ps []*poller, from *poller, now int64) *poller {
	for _, q := range ps {
		if q == from {
			if from.loadNow(now) <= spillAbove {
				return nil // none before it has room, and it is not saturated
			}
			continue
		}
		if q.loadNow(now) < fillBelow {
			return q
		}
	}
	return nil
}

// move takes c out of from's set and puts it in to's. Its events run on
// to's goroutine from the moment it is in to's set, and Posts from the
// moment c.p says to (a Post that went to from before is sent on:
// runPosts), maybe before move has returned: the caller's goroutine,
// from's, touches nothing of c's after. c is in neither set for a moment;
// what arrives then is reported by the ADD (edge-triggered, an ADD
// reports what the socket holds). While a move is under way none other
// starts (moving), so that c is never in two sets.
func (c *Conn) move(from, to *poller) bool {
	if !c.loop.moving.CompareAndSwap(false, true) {
		return false
	}
	defer c.loop.moving.Store(false)
	if !c.incref() {
		return false // closed
	}
	defer c.decref()
	from.del(c)
	c.p.Store(to)
	if err := to.add(c); err != nil {
		// Back where it was; where it cannot go back, its reader meets
		// the end.
		c.p.Store(from)
		if from.add(c) != nil {
			c.hup.Store(true)
			c.Close()
		}
		return false
	}
	if c.closing() {
		// Close took c out of the set c.p named before: maybe from's.
		to.del(c)
	}
	return true
}
