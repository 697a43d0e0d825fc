//go:build linux

package netpoll

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The event loop's side of a Conn.
//
// Every Conn is in one poller's epoll set (one poller per core; a Conn on
// the loop may move to another between requests: Rebalance, place_linux.go).
// Normally the poller's goroutine turns readiness into tokens for Read's
// and Write's waits, and a goroutine per connection does the rest. A Conn
// given a handler (SetHandler) is on the loop instead: the poller's
// goroutine calls the handler with each of the socket's events, and with
// EvPost for each Post, and the handler reads with TryRead, which never
// waits. A socket the handler must wait on for a while that is not a
// Conn (a server's) is watched on the same poller by a Watch, so that a
// client and its server are always handled by one goroutine, in turn.
//
// While on the loop nothing may wait on the Conn: the goroutine that
// would be woken is the one waiting. Read and Write then fail with
// errLoopWait instead of waiting, except that in write-behind mode a
// Write keeps what the socket cannot take (SetWriteBehind, FlushBehind).

// CanLoop is true where SetHandler works.
const CanLoop = true

// EvPost is the event a handler gets for a Post. It is none of epoll's.
const EvPost uint32 = 1 << 28

// Readable reports whether an event mask from the poller says the socket
// is readable, hung up or failed (a read will not wait).
func Readable(ev uint32) bool {
	return ev&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0
}

// HungUp reports whether an event mask from the poller says the peer
// closed its side or the socket failed. Such an event is the last edge the
// socket gives: a read that then returns less than there was room for has
// not found the end yet, and must be followed by another (which meets it)
// rather than by a wait for an edge that will not come.
func HungUp(ev uint32) bool {
	return ev != EvPost && ev&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0
}

// HungUp reports whether the socket has reported a hang-up or an error,
// in any event since it was accepted or adopted: one a goroutine's wait
// took before the loop had the Conn too, which no later event repeats.
func (c *Conn) HungUp() bool { return c.hup.Load() }

// loopConn is a Conn's loop state.
type loopConn struct {
	h      atomic.Pointer[func(ev uint32)]
	posted atomic.Bool
	// watch is the Watch whose socket this is (a Watch's registration),
	// nil for a Conn.
	watch *Watch
	// moving is set while Rebalance moves the Conn (place_linux.go).
	moving atomic.Bool
	// writeBehind and behind are guarded by the Conn's wmu.
	writeBehind bool
	behind      []byte
}

// loopUsed: some Conn has had a handler, so the pollers measure their
// load (place_linux.go).
var loopUsed atomic.Bool

var errLoopWait = errors.New("netpoll: wait on the event loop's own goroutine")

// SetHandler puts c on its poller's loop with handler h (non-nil, made
// once per connection), or takes it off (nil). Taken off, both
// directions get a token, so that a read or write then looks at the
// socket before it waits: an event the handler never saw is not lost.
// Put on, an event that came before is not replayed: the caller reads
// (TryRead) first if the socket may hold something.
func (c *Conn) SetHandler(h *func(ev uint32)) {
	if h != nil && !loopUsed.Load() {
		loopUsed.Store(true)
	}
	c.loop.h.Store(h)
	if h == nil {
		wake(c.rready)
		wake(c.wready)
	}
}

// TryRead is one read(2) that never waits: again when the socket has
// nothing now, io.EOF when the peer has closed it. For the loop's
// handler, the socket's only reader while it is on the loop.
func (c *Conn) TryRead(b []byte) (n int, again bool, err error) {
	if len(b) == 0 {
		return 0, false, nil
	}
	if !c.incref() {
		return 0, false, c.opErr("read", errClosed)
	}
	defer c.decref()
	n, again, err = Read(uintptr(c.fd), b)
	switch {
	case err != nil:
		return 0, false, c.opErr("read", err)
	case !again && n == 0:
		return 0, false, eof
	}
	return n, again, nil
}

// SetWriteBehind turns write-behind mode on or off: while on, a Write
// that finds the socket's send buffer full keeps the rest in memory and
// returns at once, as if written. The loop turns it on for the time it
// runs a handler's work, so that a client that does not read its replies
// cannot stop the loop; the caller bounds what may be kept (a loop writes
// at most one buffered reply). Bytes kept go before any later write.
func (c *Conn) SetWriteBehind(on bool) {
	c.wmu.Lock()
	c.loop.writeBehind = on
	c.wmu.Unlock()
}

// Behind is how many bytes write-behind mode has kept.
func (c *Conn) Behind() int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return len(c.loop.behind)
}

// FlushBehind writes the bytes write-behind mode kept, waiting for room
// as Write does: off the loop only.
func (c *Conn) FlushBehind() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.loop.behind) == 0 {
		return nil
	}
	if !c.incref() {
		return c.opErr("write", errClosed)
	}
	defer c.decref()
	return c.flushBehindLocked()
}

// flushBehindLocked writes and drops the kept bytes; c.wmu is held and
// write-behind mode is off.
func (c *Conn) flushBehindLocked() error {
	b := c.loop.behind
	c.loop.behind = nil
	_, err := c.writeLocked(b)
	return err
}

// Post asks c's poller to run c's handler with EvPost soon, on its
// goroutine: how other goroutines reach a Conn on the loop (the handler
// alone changes its state). Posts not yet run coalesce; a Post while c
// has no handler is dropped.
func (c *Conn) Post() {
	p := c.p.Load()
	if p == nil || !c.loop.posted.CompareAndSwap(false, true) {
		return
	}
	p.postMu.Lock()
	p.posts = append(p.posts, c)
	p.postMu.Unlock()
	if p.busy.Load() {
		// The poller's goroutine is handing out events (often this
		// very call is on it: a server released to a waiter on the
		// same loop) and runs the queue when it is done.
		return
	}
	one := uint64(1)
	syscall.RawSyscall(syscall.SYS_WRITE, uintptr(p.efd), uintptr(unsafe.Pointer(&one)), 8)
}

// runPosts runs the handlers of the Conns posted since the last time,
// reporting whether there were any; bell: the eventfd rang, and is read
// back to silent.
func (p *poller) runPosts(bell bool) bool {
	if bell {
		var v uint64
		syscall.RawSyscall(syscall.SYS_READ, uintptr(p.efd), uintptr(unsafe.Pointer(&v)), 8)
	}
	p.postMu.Lock()
	if len(p.posts) == 0 {
		p.postMu.Unlock()
		return false
	}
	posts := p.posts
	p.posts = p.spare[:0]
	p.postMu.Unlock()
	for i, c := range posts {
		posts[i] = nil
		c.loop.posted.Store(false)
		if c.p.Load() != p {
			// Posted here before Rebalance moved it: its own poller
			// runs it.
			c.Post()
			continue
		}
		if h := c.loop.h.Load(); h != nil {
			(*h)(EvPost)
		}
	}
	p.spare = posts[:0]
	return true
}

// A Watch watches a socket that is not a Conn (a server's, which package
// net owns) on a Conn's poller, for a handler run there, from Start to
// Stop: how a loop waits for a server's reply. One Watch serves one
// socket; it is made once and started again for each wait. Start, Stop
// and the handler run on the poller's goroutine of the Conn Start names.
//
// The socket stays registered, edge-triggered, in the set of the poller
// of the wait that added it (its home) after the wait ends, as PgBouncer
// keeps its sockets in its one set: the next wait on the same poller, the
// common case, costs no system call, where arming a one-shot
// registration for each wait cost one epoll_ctl per reply (7 % of the
// loop's CPU at 100 clients, bench/FINDINGS.md §4). An event that comes
// while no wait of that poller's is active (a reply a goroutine reads, a
// message the server sent unasked, a wait since begun on another poller)
// takes the registration out of that set (EPOLL_CTL_DEL), so that such a
// socket costs one stray event, not one per message; the next wait adds
// it again, and ADD reports what arrived meanwhile. A wait on another
// poller moves the registration: out of the old home's set, into its
// own (two system calls).
//
// Each poller has a registration of its own (regs: its own seq in that
// poller's table), written only by that poller's goroutine;
// home and owner (the poller whose wait is active) are atomic, as other
// pollers read them. The socket is reached through its
// syscall.RawConn's Control, which holds net's descriptor open for the
// call: a socket closed meanwhile by another goroutine left every set
// with its descriptor, and its number, which a new socket may have
// taken, is never touched.
type Watch struct {
	h     *func(ev uint32)
	regs  []*Conn // one per poller (reg); only fd, seq, p and loop
	home  atomic.Pointer[poller]
	owner atomic.Pointer[poller]
	rc    syscall.RawConn // the watched socket, from the first Start
	// The wait under way (the owner's goroutine's): its poller, and
	// Start's result from inside Control.
	on      *poller
	err     error
	startFn func(fd uintptr)
	// adds counts the registrations Start made (the tests read it).
	adds int
}

// watchEvents are a Watch's registration's: readable, hung up;
// edge-triggered.
const watchEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | uint32(1<<31) // EPOLLET, whose constant overflows uint32

// NewWatch makes a Watch whose events go to h.
func NewWatch(h *func(ev uint32)) *Watch {
	w := &Watch{h: h}
	w.startFn = w.start
	return w
}

// reg is the Watch's registration on p, made on first use. (A few
// pollers at most: the ones the socket's waits ran on.)
func (w *Watch) reg(p *poller) *Conn {
	for _, c := range w.regs {
		if c.p.Load() == p {
			return c
		}
	}
	c := &Conn{fd: -1}
	c.p.Store(p)
	c.loop.watch = w
	h := func(ev uint32) { w.event(c, ev) }
	c.loop.h.Store(&h)
	w.regs = append(w.regs, c)
	return c
}

// Start watches rc's socket on on's poller. A socket that is readable
// already is reported at once.
func (w *Watch) Start(on *Conn, rc syscall.RawConn) error {
	p := on.p.Load()
	if w.rc == nil {
		w.rc = rc // the same socket's for the Watch's life
	}
	if w.home.Load() == p {
		// Registered here since an earlier wait: nothing to arm. An
		// edge since then found no wait and took the registration out,
		// so none is missed.
		w.on = p
		w.owner.Store(p)
		return nil
	}
	w.on, w.err = p, nil
	if err := rc.Control(w.startFn); err != nil {
		w.on = nil
		return err
	}
	if w.err != nil {
		w.on = nil
		return w.err
	}
	w.owner.Store(p)
	return nil
}

// start registers the socket fd on w.on's set, out of the old home's.
func (w *Watch) start(fd uintptr) {
	p := w.on
	if old := w.home.Load(); old != nil && old != p {
		// Its table keeps the registration's entry; an event of it
		// already taken from the set is stray there (event).
		old.ctl(syscall.EPOLL_CTL_DEL, int(fd), 0, 0)
	}
	c := w.reg(p)
	c.fd = int(fd)
	w.adds++
	seq := p.enter(c)
	e := p.ctl(syscall.EPOLL_CTL_ADD, c.fd, watchEvents, seq)
	if e == syscall.EEXIST {
		// Left in this set by a wait here before a move away whose DEL
		// this poller's stray event has not yet repeated.
		e = p.ctl(syscall.EPOLL_CTL_MOD, c.fd, watchEvents, seq)
	}
	if e != 0 {
		p.clear(c)
		w.home.Store(nil) // out of the old home's set too
		w.err = os.NewSyscallError("epoll_ctl", e)
		return
	}
	w.home.Store(p)
}

// event is the handler of the registration c's events, on its poller's
// goroutine: the wait's, if that poller's wait is active; else stray.
func (w *Watch) event(c *Conn, ev uint32) {
	p := c.p.Load()
	if w.owner.Load() == p {
		(*w.h)(ev)
		return
	}
	// No wait of this poller's: out of its set until a wait adds it.
	p.clear(c)
	if w.rc != nil && w.home.CompareAndSwap(p, nil) {
		w.rc.Control(func(fd uintptr) {
			if int(fd) == c.fd {
				p.ctl(syscall.EPOLL_CTL_DEL, c.fd, 0, 0)
			}
		})
	}
}

// Stop ends the wait Start began. The registration stays in the set for
// the next.
func (w *Watch) Stop() {
	w.owner.Store(nil)
	w.on = nil
}

// HomedWith reports whether the socket is registered on c's poller, where
// a wait arms nothing. Any goroutine.
func (w *Watch) HomedWith(c *Conn) bool { return w.home.Load() == c.p.Load() }

// Watching reports whether a wait is under way.
func (w *Watch) Watching() bool { return w.on != nil }
