//go:build linux

package netpoll

import (
	"errors"
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

// loopConn is a Conn's loop state.
type loopConn struct {
	h      atomic.Pointer[func(ev uint32)]
	posted atomic.Bool
	// watch is the Watch whose socket this is (a Watch's own Conn), nil
	// for a Conn; armed says its one-shot registration has not fired
	// since it was last armed. The poller's goroutine's.
	watch *Watch
	armed bool
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
// socket at a time; it is made once and started again for each wait.
// Start, Stop and the handler run on the poller's goroutine.
//
// The socket is reached through its syscall.RawConn's Control, which
// holds net's descriptor open for the call: a socket closed meanwhile by
// another goroutine left the set with its descriptor, and its number,
// which a new socket may have taken, is never touched.
//
// The registration is one-shot (EPOLLONESHOT): an event disarms it, and
// it stays in the set disarmed. A wait that ends with its event (a reply
// read whole) then costs one system call, the epoll_ctl that arms it at
// Start (EPOLL_CTL_MOD, or ADD the first time on a poller), where adding
// and deleting it for each wait cost two. A handler that returns to wait
// for more (a reply read in part) arms it again (Rearm). A disarmed registration left in a poller's set
// while the socket is watched on another never fires there; the kernel
// drops it when the socket is closed.
type Watch struct {
	c     Conn // only fd, seq, p and loop
	on    *poller
	rc    syscall.RawConn
	err   error
	addFn func(fd uintptr)
	modFn func(fd uintptr)
	delFn func(fd uintptr)
}

// watchEvents are a Watch's: readable, hung up; level-triggered, once.
const watchEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

// NewWatch makes a Watch whose events go to h.
func NewWatch(h *func(ev uint32)) *Watch {
	w := &Watch{}
	w.c.fd = -1
	w.c.loop.h.Store(h)
	w.c.loop.watch = w
	w.addFn = w.add
	w.modFn = w.rearm
	w.delFn = w.del
	return w
}

// Start watches rc's socket on on's poller. A socket that is readable
// already is reported at once.
func (w *Watch) Start(on *Conn, rc syscall.RawConn) error {
	w.on, w.rc, w.err = on.p.Load(), rc, nil
	if err := rc.Control(w.addFn); err != nil {
		w.on, w.rc = nil, nil
		return err
	}
	if w.err != nil {
		w.on, w.rc = nil, nil
		return w.err
	}
	return nil
}

func (w *Watch) add(fd uintptr) {
	w.c.fd = int(fd)
	w.c.p.Store(w.on)
	if w.err = w.on.arm(&w.c); w.err != nil {
		w.c.fd = -1
		w.c.p.Store(nil)
	}
}

// Rearm arms the started Watch again, for a handler that read part of
// what it waits for and returns to wait for the rest: an event disarmed
// the one-shot registration. Arming one that is armed does no harm.
func (w *Watch) Rearm() {
	if w.c.p.Load() != nil {
		w.rc.Control(w.modFn)
	}
}

func (w *Watch) rearm(fd uintptr) {
	if int(fd) != w.c.fd {
		return
	}
	w.c.loop.armed = w.c.p.Load().ctl(syscall.EPOLL_CTL_MOD, w.c.fd, watchEvents, w.c.seq) == 0
}

// Stop stops watching rc's socket, which Start watched. A registration
// that fired is disarmed already and only leaves the table; one that did
// not leaves the set.
func (w *Watch) Stop(rc syscall.RawConn) {
	p := w.c.p.Load()
	if p == nil {
		return
	}
	if !w.c.loop.armed {
		p.clear(&w.c)
	} else if rc.Control(w.delFn) != nil {
		// Closed: it left the set then; only the table keeps it.
		p.clear(&w.c)
	}
	w.c.loop.armed = false
	w.c.fd, w.on, w.rc = -1, nil, nil
	w.c.p.Store(nil)
}

func (w *Watch) del(fd uintptr) {
	if int(fd) == w.c.fd {
		w.c.p.Load().del(&w.c)
	} else {
		w.c.p.Load().clear(&w.c)
	}
}

// Watching reports whether the Watch is started.
func (w *Watch) Watching() bool { return w.c.p.Load() != nil }
