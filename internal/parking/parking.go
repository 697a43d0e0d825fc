// Package parking keeps idle connections as bare socket descriptors in
// one epoll set (internal/netpoll's Poller), with no goroutine each, and
// wakes each one when its socket becomes readable or hangs up; while
// asked to (SUSPEND), it holds them parked instead. What a connection is,
// and how it is taken up again, is the caller's: a Lot holds values of
// any comparable type by descriptor.
//
// Where netpoll has no epoll set (netpoll.CanPark is false: systems other
// than Linux) Start fails and nothing parks.
package parking

import (
	"errors"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// Lot is one epoll set of parked connections. It lives from Start (its
// first use) to Stop. mu is a leaf lock; epoll_ctl is called under it, so
// that a Del cannot remove a later Add of the same descriptor.
type Lot[T comparable] struct {
	once   sync.Once
	poller *netpoll.Poller
	err    error
	done   chan struct{} // closed when run returns
	// wake takes up a connection whose socket woke (or that Stop or
	// Rewatch could not keep): it is the caller's again, with its
	// descriptor. Called under mu: it must only start a goroutine.
	wake func(fd int, v T)
	// hold says to keep a connection that woke parked, out of the set
	// (SUSPEND): Rewatch puts it back.
	hold func() bool

	mu      sync.Mutex
	stopped bool        // no epoll set is made after Stop
	parked  map[int32]T // by socket descriptor
	fds     map[T]int32 // parked's inverse
	// held are the descriptors of parked connections out of the epoll
	// set while hold says so: readable ones, and those parked meanwhile.
	held map[int32]bool
	// freedAt is len(parked) at the last FreeOSMemory: many connections
	// going idle together hand their stacks and buffers back to the OS at
	// once. lastScan is len(parked) at the previous AfterScan: when
	// parking has settled, the tail of a burst is handed back too.
	freedAt  int
	lastScan int
}

// ErrStopped is Start's answer once the lot has stopped.
var ErrStopped = errors.New("the service has stopped")

// Start creates the epoll set and its goroutine on first use; later calls
// return what the first did. Under mu, so that Stop sees either the set
// or none that will ever be made.
func (l *Lot[T]) Start(wake func(fd int, v T), hold func() bool) error {
	l.once.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.stopped {
			l.err = ErrStopped
			return
		}
		l.poller, l.err = netpoll.NewPoller()
		if l.err != nil {
			return
		}
		l.wake, l.hold = wake, hold
		l.parked = map[int32]T{}
		l.fds = map[T]int32{}
		l.held = map[int32]bool{}
		l.done = make(chan struct{})
		go l.run()
	})
	return l.err
}

// Stop ends run and closes the epoll set, and wakes the connections
// parked then. One that parks meanwhile finds the set closed (Park's
// error); none parks after Stop.
func (l *Lot[T]) Stop() {
	l.mu.Lock()
	l.stopped = true
	poller := l.poller
	l.mu.Unlock()
	if poller == nil {
		return // never started, and now never will
	}
	poller.Close() // run's Wait returns net.ErrClosed
	<-l.done
	l.mu.Lock()
	parked := l.parked
	l.parked = map[int32]T{}
	l.fds = map[T]int32{}
	for fd, v := range parked {
		l.wake(int(fd), v)
	}
	l.mu.Unlock()
}

// run wakes the connections whose socket became readable or hung up,
// until Stop closes the epoll set. The wait is a blocking system call on
// a thread of its own.
func (l *Lot[T]) run() {
	defer close(l.done)
	fds := make([]int32, 128)
	for {
		n, err := l.poller.Wait(fds)
		if err != nil {
			return
		}
		for _, fd := range fds[:n] {
			l.mu.Lock()
			v, ok := l.parked[fd]
			l.poller.Del(int(fd))
			switch {
			case ok && l.hold():
				// Held: it waits, parked, for Rewatch or for
				// whoever takes it (Take).
				l.held[fd] = true
			case ok:
				l.forgetLocked(fd, v)
				l.wake(int(fd), v)
			}
			l.mu.Unlock()
		}
	}
}

// Park parks v on fd, a descriptor of its own (Detach): watched, or held
// while hold says so. An error means it could not be watched and is not
// parked: the caller takes it up at once. Level-triggered and one-shot:
// bytes that arrived before this call are reported at once, and one
// wake-up wakes it once.
func (l *Lot[T]) Park(fd int, v T) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.parked == nil {
		return ErrStopped
	}
	l.parked[int32(fd)] = v
	l.fds[v] = int32(fd)
	if l.hold() {
		l.held[int32(fd)] = true
		return nil
	}
	if err := l.poller.Add(fd); err != nil {
		l.forgetLocked(int32(fd), v)
		return err
	}
	return nil
}

func (l *Lot[T]) forgetLocked(fd int32, v T) {
	delete(l.parked, fd)
	delete(l.fds, v)
}

// Take takes v out of the lot for good, without waking it: its
// descriptor is the caller's now. false if v is not parked.
func (l *Lot[T]) Take(v T) (fd int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pfd, ok := l.fds[v]
	if !ok {
		return -1, false
	}
	l.forgetLocked(pfd, v)
	delete(l.held, pfd)
	l.poller.Del(int(pfd))
	return int(pfd), true
}

// Rewatch puts the connections held back in the epoll set (RESUME): those
// with something to read wake at once.
func (l *Lot[T]) Rewatch() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fd := range l.held {
		delete(l.held, fd)
		if l.stopped {
			continue // Stop wakes every parked connection itself
		}
		if err := l.poller.Add(int(fd)); err != nil {
			v := l.parked[fd]
			l.forgetLocked(fd, v)
			l.wake(int(fd), v)
		}
	}
}

// Parked returns the parked connections, by descriptor.
func (l *Lot[T]) Parked() map[int32]T {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int32]T, len(l.parked))
	for fd, v := range l.parked {
		out[fd] = v
	}
	return out
}

// Len is how many connections are parked now.
func (l *Lot[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.parked)
}

// AfterScan is called after each scan that asked idle connections to
// park: it returns memory to the OS when many parked since the last time,
// or when parking has settled after a smaller burst; true when it did.
func (l *Lot[T]) AfterScan() bool {
	l.mu.Lock()
	n := len(l.parked)
	settled := n == l.lastScan && n-l.freedAt >= 32
	free := n-l.freedAt >= 256 || settled
	if free || n < l.freedAt {
		l.freedAt = n
	}
	l.lastScan = n
	l.mu.Unlock()
	if free {
		ReturnMemory()
	}
	return free
}

// ReturnMemory frees what the process no longer uses and returns its
// pages to the OS, at once: after a burst of connections went idle.
func ReturnMemory() {
	// Two collections: buffers the parked connections gave back to
	// sync.Pools (wire's lent read and write buffers) survive the first
	// as the pools' victims and are freed by the second, whose pages
	// FreeOSMemory then returns.
	runtime.GC()
	debug.FreeOSMemory()
}

// Detach duplicates conn's socket descriptor, for the connection to live
// on as that bare descriptor once conn is closed; false where conn has
// none (not a syscall.Conn) or it cannot be duplicated.
func Detach(conn net.Conn) (fd int, ok bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return -1, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd = -1
	var derr error
	cerr := rc.Control(func(sysfd uintptr) { fd, derr = netpoll.DupCloexec(int(sysfd)) })
	if cerr != nil || derr != nil {
		return -1, false
	}
	return fd, true
}

// Attach makes a net.Conn of a parked connection's descriptor again; the
// descriptor itself is closed (the conn has a duplicate). With loop, a
// TCP socket becomes an internal/netpoll Conn instead, which owns fd from
// then on and can rest on the event loop.
func Attach(fd int, loop bool) (net.Conn, error) {
	if loop {
		if c, ok := netpoll.Adopt(fd); ok {
			return c, nil
		}
	}
	f := os.NewFile(uintptr(fd), "client")
	conn, err := net.FileConn(f)
	f.Close()
	return conn, err
}

// ClosedConn stands in for a parked connection's net.Conn: every call
// fails as on a closed conn, so code that reaches it meanwhile needs no
// case of its own.
type ClosedConn struct{}

func (ClosedConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (ClosedConn) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (ClosedConn) Close() error                     { return nil }
func (ClosedConn) LocalAddr() net.Addr              { return closedAddr{} }
func (ClosedConn) RemoteAddr() net.Addr             { return closedAddr{} }
func (ClosedConn) SetDeadline(time.Time) error      { return net.ErrClosed }
func (ClosedConn) SetReadDeadline(time.Time) error  { return net.ErrClosed }
func (ClosedConn) SetWriteDeadline(time.Time) error { return net.ErrClosed }

type closedAddr struct{}

func (closedAddr) Network() string { return "parked" }
func (closedAddr) String() string  { return "parked" }
