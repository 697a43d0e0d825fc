//go:build linux

package netpoll

import (
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// CanAccept is true where NewAcceptor works.
const CanAccept = true

// An Acceptor takes connections off a TCP listener with accept4(2) made
// by RawSyscall, and hands each out as a Conn: a socket that package net
// never sees, whose every system call is raw and whose readiness comes
// from the pooler's own epoll set (see poller).
//
// Why: a system call entered the ordinary way (net.Conn's, the syscall
// package's) wakes the runtime's sysmon thread when the process was idle,
// and sysmon then polls every 20 µs while the process works, a context
// switch each. On a connection-per-transaction load the process is idle
// between most connections, and accept4, the socket options, getsockname
// and close(2), made by net, woke sysmon on every connection: four or five
// context switches each, more than the login's own system calls cost.
//
// The Acceptor waits on a duplicate of the listener's descriptor, an
// os.File in the runtime's netpoller (net's listeners offer no raw read
// wait). So the listener's owner must pass its deadline (SetDeadline) and
// its Close on to the Acceptor too: closing only the listener would leave
// the socket listening through the duplicate.
type Acceptor struct {
	file *os.File
	rc   syscall.RawConn
	addr net.Addr
	fn   func(fd uintptr) bool // once, as a method value made once
	// closed is set by Close; the wait's error is then net.ErrClosed.
	closed atomic.Bool
	// laddr is the listener's address where it names one (not 0.0.0.0
	// or ::): its connections' own address, without a getsockname.
	laddr *net.TCPAddr

	nfd  int
	err  error
	rsa  syscall.RawSockaddrAny
	alen uint32
}

// NewAcceptor makes an Acceptor for ln; ok is false where ln is not a
// TCP listener, is closed, or the poller cannot start (the caller then
// uses ln.Accept).
func NewAcceptor(ln net.Listener) (a *Acceptor, ok bool) {
	tl, isTCP := ln.(*net.TCPListener)
	if !isTCP {
		return nil, false
	}
	if _, err := thePollers(); err != nil {
		return nil, false
	}
	lrc, err := tl.SyscallConn()
	if err != nil {
		return nil, false
	}
	dfd, derr := -1, error(nil)
	if err := lrc.Control(func(fd uintptr) { dfd, derr = DupCloexec(int(fd)) }); err != nil || derr != nil {
		return nil, false
	}
	// The listener is non-blocking (net made it so) and the duplicate
	// shares that: os puts it in the runtime's netpoller.
	f := os.NewFile(uintptr(dfd), "listener")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, false
	}
	a = &Acceptor{file: f, rc: rc, addr: ln.Addr()}
	if ta, ok := a.addr.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		// Every connection's own address is the listener's.
		a.laddr = ta
	}
	a.fn = a.once
	return a, true
}

// SetDeadline ends an Accept waiting, and every later one, with
// os.ErrDeadlineExceeded once t has passed; zero t clears it.
func (a *Acceptor) SetDeadline(t time.Time) error { return a.file.SetReadDeadline(t) }

// Close closes the duplicate: an Accept waiting returns net.ErrClosed.
func (a *Acceptor) Close() error {
	a.closed.Store(true)
	return a.file.Close()
}

// Accept waits for the next connection. Its errors are net's: the
// deadline (os.ErrDeadlineExceeded), Close (net.ErrClosed), or a
// *net.OpError for accept4's own.
func (a *Acceptor) Accept() (*Conn, error) {
	p, err := nextPoller()
	if err != nil {
		return nil, err
	}
	a.nfd, a.err = -1, nil
	if err := a.rc.Read(a.fn); err != nil {
		if a.closed.Load() {
			err = net.ErrClosed // os's own is unexported
		}
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: a.addr, Err: err}
	}
	if a.err != nil {
		return nil, a.err
	}
	c := &Conn{fd: a.nfd, raddr: sockaddrTCP(&a.rsa), fixedLaddr: a.laddr}
	c.p.Store(p)
	c.rready = make(chan struct{}, 1)
	c.wready = make(chan struct{}, 1)
	one := int32(1)
	// net sets TCP_NODELAY on every TCP connection; so does the pooler.
	syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, uintptr(c.fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY,
		uintptr(unsafe.Pointer(&one)), unsafe.Sizeof(one), 0)
	if err := p.add(c); err != nil {
		rawClose(c.fd)
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: a.addr, Err: err}
	}
	return c, nil
}

// once is one accept4(2); false asks net to wait until the listener is
// readable and call it again.
func (a *Acceptor) once(fd uintptr) bool {
	for {
		a.alen = syscall.SizeofSockaddrAny
		r, _, e := syscall.RawSyscall6(syscall.SYS_ACCEPT4, fd, uintptr(unsafe.Pointer(&a.rsa)),
			uintptr(unsafe.Pointer(&a.alen)), syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0, 0)
		switch e {
		case 0:
			a.nfd = int(r)
			return true
		case syscall.EINTR, syscall.ECONNABORTED:
			// As net: a connection reset before it was accepted is
			// not an error of the listener's.
			continue
		case syscall.EAGAIN:
			return false
		default:
			a.err = &net.OpError{Op: "accept", Net: "tcp", Addr: a.addr, Err: os.NewSyscallError("accept4", e)}
			return true
		}
	}
}

// sockaddrTCP is the peer address accept4 wrote.
func sockaddrTCP(rsa *syscall.RawSockaddrAny) *net.TCPAddr {
	switch rsa.Addr.Family {
	case syscall.AF_INET:
		sa := (*syscall.RawSockaddrInet4)(unsafe.Pointer(rsa))
		port := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return &net.TCPAddr{IP: net.IP(sa.Addr[:]).To16(), Port: int(port[0])<<8 | int(port[1])}
	case syscall.AF_INET6:
		sa := (*syscall.RawSockaddrInet6)(unsafe.Pointer(rsa))
		port := (*[2]byte)(unsafe.Pointer(&sa.Port))
		a := &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: int(port[0])<<8 | int(port[1])}
		if sa.Scope_id != 0 {
			// net names the interface; its index is as good an
			// identifier and needs no netlink query.
			a.Zone = strconv.Itoa(int(sa.Scope_id))
		}
		return a
	}
	return &net.TCPAddr{}
}

// Conn is a TCP connection accepted by an Acceptor. It behaves as a
// *net.TCPConn for what the pooler uses: Read, Write, Close from any
// goroutine (which ends a Read or Write waiting), the three deadlines,
// SyscallConn (whose Read and Write wait for readiness as net's do), the
// addresses and the buffer sizes.
type Conn struct {
	fd    int
	raddr *net.TCPAddr

	// fixedLaddr is the listener's specific address, shared; else laddr
	// is looked up once (getsockname).
	fixedLaddr *net.TCPAddr
	laddrOnce  sync.Once
	laddr      *net.TCPAddr

	// state is the count of operations under way (each holds the
	// descriptor open) times two, plus one once Close was called. The
	// descriptor is closed by whoever brings it to exactly one: Close when
	// nothing is under way, else the last operation to end. So a read can
	// never reach a descriptor number that was closed and reused.
	state atomic.Uint64

	// seq tells this socket's events from those of an earlier socket that
	// had the same descriptor number.
	seq uint32
	// p is the poller whose epoll set holds the socket (one of one per
	// core, taken in turn at accept; another one's after Rebalance).
	p atomic.Pointer[poller]
	// loop is the socket's event loop state while its events go to a
	// handler on p's goroutine instead of to Read's and Write's waits
	// (loop_linux.go).
	loop loopConn
	// rready and wready hold a token each time the poller saw the socket
	// turn readable or writable (edge-triggered), or a deadline or Close
	// wants a waiter to look again. A token may be stale: the waiter then
	// makes a system call that finds nothing and waits again.
	rready, wready chan struct{}

	rmu, wmu sync.Mutex // one reader and one writer at a time, as net
	// drained: Read's last read(2) returned less than asked, so the
	// socket was empty then (guarded by rmu).
	drained bool
	// hup is set by the poller once the socket reported a hang-up or an
	// error (EPOLLRDHUP, EPOLLHUP, EPOLLERR), before that event's token.
	hup atomic.Bool

	rdl, wdl deadline
}

var errClosed = net.ErrClosed

var eof = io.EOF

func (c *Conn) incref() bool {
	for {
		v := c.state.Load()
		if v&1 != 0 {
			return false
		}
		if c.state.CompareAndSwap(v, v+2) {
			return true
		}
	}
}

func (c *Conn) decref() {
	if c.state.Add(^uint64(1)) == 1 {
		rawClose(c.fd)
	}
}

// Close closes the socket; a Read or Write waiting returns net.ErrClosed.
func (c *Conn) Close() error {
	old := c.state.Or(1)
	if old&1 != 0 {
		return errClosed
	}
	if p := c.p.Load(); p != nil {
		p.del(c)
	}
	wake(c.rready)
	wake(c.wready)
	if old == 0 {
		rawClose(c.fd)
	}
	return nil
}

func (c *Conn) closing() bool { return c.state.Load()&1 != 0 }

func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if !c.incref() {
		return 0, c.opErr("read", errClosed)
	}
	defer c.decref()
	if c.drained && !c.hup.Load() {
		// The last read left the socket empty: whatever arrived since
		// left a token, so wait for one before the read that would
		// otherwise find nothing (a system call per request saved). A
		// stale token costs that read back, no more. Not once the peer
		// hung up or the socket failed (hup): the end of the stream
		// may have come before that read, which returned data and left
		// the end for the next, and its token may have been the data's.
		c.drained = false
		if err := c.wait(c.rready, &c.rdl); err != nil {
			return 0, c.opErr("read", err)
		}
	}
	for {
		if c.rdl.expired.Load() {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		n, again, err := Read(uintptr(c.fd), b)
		switch {
		case err != nil:
			return 0, c.opErr("read", err)
		case !again && n == 0:
			return 0, eof
		case !again:
			// A stream socket returns less than asked only when that
			// was all it had.
			c.drained = n < len(b)
			return n, nil
		}
		if err := c.wait(c.rready, &c.rdl); err != nil {
			return 0, c.opErr("read", err)
		}
	}
}

func (c *Conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.incref() {
		return 0, c.opErr("write", errClosed)
	}
	defer c.decref()
	if len(c.loop.behind) > 0 {
		// Bytes a loop left behind go first (loop_linux.go).
		if c.loop.writeBehind {
			c.loop.behind = append(c.loop.behind, b...)
			return len(b), nil
		}
		if err := c.flushBehindLocked(); err != nil {
			return 0, err
		}
	}
	return c.writeLocked(b)
}

// writeLocked writes b whole, waiting for room; on a loop in write-behind
// mode it keeps what does not fit instead. c.wmu is held.
func (c *Conn) writeLocked(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		if c.wdl.expired.Load() {
			return written, c.opErr("write", os.ErrDeadlineExceeded)
		}
		n, again, err := Write(uintptr(c.fd), b[written:])
		if err != nil {
			return written, c.opErr("write", err)
		}
		written += n
		if again {
			if c.loop.writeBehind {
				c.loop.behind = append(c.loop.behind, b[written:]...)
				return len(b), nil
			}
			if err := c.wait(c.wready, &c.wdl); err != nil {
				return written, c.opErr("write", err)
			}
		}
	}
	return written, nil
}

// wait blocks until a token arrives on ready, then reports Close or an
// expired deadline.
func (c *Conn) wait(ready chan struct{}, dl *deadline) error {
	if c.closing() {
		return errClosed
	}
	if c.loop.h.Load() != nil {
		// Its readiness goes to the loop's handler, which runs on the
		// goroutine that would be waiting: nothing would ever wake it.
		return errLoopWait
	}
	if dl.expired.Load() {
		return os.ErrDeadlineExceeded
	}
	<-ready
	if c.closing() {
		return errClosed
	}
	if dl.expired.Load() {
		return os.ErrDeadlineExceeded
	}
	return nil
}

func (c *Conn) opErr(op string, err error) error {
	if err == eof {
		return err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.raddr, Err: err}
}

// LocalAddr is the socket's own address (getsockname(2), once).
func (c *Conn) LocalAddr() net.Addr {
	if c.fixedLaddr != nil {
		return c.fixedLaddr
	}
	c.laddrOnce.Do(func() {
		var rsa syscall.RawSockaddrAny
		n := uint32(syscall.SizeofSockaddrAny)
		c.laddr = &net.TCPAddr{}
		if !c.incref() {
			return
		}
		defer c.decref()
		_, _, e := syscall.RawSyscall(syscall.SYS_GETSOCKNAME, uintptr(c.fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&n)))
		if e == 0 {
			c.laddr = sockaddrTCP(&rsa)
		}
	})
	return c.laddr
}

func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

func (c *Conn) SetDeadline(t time.Time) error {
	if c.closing() {
		return c.opErr("set", errClosed)
	}
	c.rdl.set(t, c.rready)
	c.wdl.set(t, c.wready)
	return nil
}

func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closing() {
		return c.opErr("set", errClosed)
	}
	c.rdl.set(t, c.rready)
	return nil
}

func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closing() {
		return c.opErr("set", errClosed)
	}
	c.wdl.set(t, c.wready)
	return nil
}

// SetReadBuffer sets SO_RCVBUF.
func (c *Conn) SetReadBuffer(n int) error { return c.setsockopt(syscall.SO_RCVBUF, n) }

// SetWriteBuffer sets SO_SNDBUF.
func (c *Conn) SetWriteBuffer(n int) error { return c.setsockopt(syscall.SO_SNDBUF, n) }

func (c *Conn) setsockopt(opt, v int) error {
	if !c.incref() {
		return c.opErr("set", errClosed)
	}
	defer c.decref()
	v32 := int32(v)
	_, _, e := syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, uintptr(c.fd), syscall.SOL_SOCKET, uintptr(opt),
		uintptr(unsafe.Pointer(&v32)), unsafe.Sizeof(v32), 0)
	if e != 0 {
		return c.opErr("set", os.NewSyscallError("setsockopt", e))
	}
	return nil
}

// SyscallConn returns the socket's syscall.RawConn.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return (*rawConn)(c), nil }

// rawConn is Conn's syscall.RawConn: Read and Write call f until it
// returns true, waiting for readiness (or a deadline, or Close) whenever
// it returns false, as net's do.
type rawConn Conn

func (rc *rawConn) Control(f func(fd uintptr)) error { return (*Conn)(rc).Control(f) }

// Control calls f with the socket's descriptor, held open for the call:
// SyscallConn's Control, callable without the interface so that f need
// not escape (the socket options set on every connection accepted).
func (c *Conn) Control(f func(fd uintptr)) error {
	if !c.incref() {
		return c.opErr("raw-control", errClosed)
	}
	defer c.decref()
	f(uintptr(c.fd))
	return nil
}

func (rc *rawConn) Read(f func(fd uintptr) bool) error {
	c := (*Conn)(rc)
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.drained = false // f's reads are not Read's, and its waits take tokens
	return c.rawWait("raw-read", f, c.rready, &c.rdl)
}

func (rc *rawConn) Write(f func(fd uintptr) bool) error {
	c := (*Conn)(rc)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.rawWait("raw-write", f, c.wready, &c.wdl)
}

func (c *Conn) rawWait(op string, f func(fd uintptr) bool, ready chan struct{}, dl *deadline) error {
	if !c.incref() {
		return c.opErr(op, errClosed)
	}
	defer c.decref()
	for {
		if dl.expired.Load() {
			return c.opErr(op, os.ErrDeadlineExceeded)
		}
		if f(uintptr(c.fd)) {
			return nil
		}
		if err := c.wait(ready, dl); err != nil {
			return c.opErr(op, err)
		}
	}
}

// deadline is one direction's deadline: expired once it has passed, and a
// token on the direction's channel then wakes a waiter to notice.
type deadline struct {
	expired atomic.Bool
	mu      sync.Mutex
	when    time.Time // zero: none
	timer   *time.Timer
	ready   chan struct{}
}

func (d *deadline) set(t time.Time, ready chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.when, d.ready = t, ready
	if t.IsZero() {
		if d.timer != nil {
			d.timer.Stop()
		}
		d.expired.Store(false)
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		if d.timer != nil {
			d.timer.Stop()
		}
		d.expired.Store(true)
		wake(ready)
		return
	}
	d.expired.Store(false)
	if d.timer == nil {
		d.timer = time.AfterFunc(dur, d.fire)
	} else {
		d.timer.Reset(dur)
	}
}

// fire is the timer's: a timer reset or stopped after it fired finds the
// deadline moved (or gone) and leaves it.
func (d *deadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.when.IsZero() || time.Now().Before(d.when) {
		return
	}
	d.expired.Store(true)
	wake(d.ready)
}

// wake puts a token on ch unless one is there already.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func rawClose(fd int) {
	syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0)
}

// poller is one epoll set of Conns, edge-triggered for reading and
// writing; there is one per core (GOMAXPROCS at first use), and an
// accepted Conn is given to the next in turn (a Conn on the loop may move
// later: Rebalance). Its descriptor is itself in
// the runtime's netpoller (epoll sets nest), so one goroutine sleeps in
// the runtime until any Conn is ready, then collects the events with a
// raw epoll_wait and hands each Conn's waiter a token, or runs the
// Conn's handler itself when the Conn is on the loop (loop_linux.go).
type poller struct {
	epfd int
	file *os.File // keeps the descriptor in the runtime's netpoller
	rc   syscall.RawConn
	// efd is an eventfd in the set: Post's bell (loop_linux.go).
	efd int

	mu    sync.Mutex // serialises add and del's table changes
	table atomic.Pointer[[]atomic.Pointer[Conn]]
	seq   uint32

	postMu sync.Mutex
	posts  []*Conn // Post's queue, run by dispatch
	// busy is set while the poller's goroutine hands out events: a Post
	// then needs no bell, as run looks at the queue afterwards.
	busy  atomic.Bool
	spare []*Conn

	collectFn func(fd uintptr) bool
	events    [128]syscall.EpollEvent

	// idx is the poller's place among the process's (Rebalance fills
	// the first ones first).
	idx int
	// load is its goroutine's share of the time spent handing out events,
	// in thousandths, over the last window of at least loadWindow, and
	// loadAt when that window ended (the goroutine's own clock: nanotime
	// below); read by every poller's Rebalance. winStart, winBusy and
	// movedAt are the goroutine's: the window under way, and when a Conn
	// last left it by Rebalance.
	load, loadAt      atomic.Int64
	winStart, winBusy int64
	movedAt           int64
}

var (
	pollersOnce sync.Once
	pollersVal  []*poller
	pollersErr  error
	pollerNext  atomic.Uint32
	// pollersStarted: pollersVal is complete (PollerLoads reads it
	// without starting the pollers).
	pollersStarted atomic.Bool
)

// thePollers starts the process's pollers on first use, one per core.
func thePollers() ([]*poller, error) {
	pollersOnce.Do(func() {
		n := max(1, runtime.GOMAXPROCS(0))
		for i := range n {
			p, err := startPoller(i)
			if err != nil {
				pollersErr = err
				return
			}
			pollersVal = append(pollersVal, p)
		}
		pollersStarted.Store(pollersErr == nil)
	})
	if pollersErr != nil {
		return nil, pollersErr
	}
	return pollersVal, nil
}

// nextPoller is the poller an accepted Conn goes to: each in turn.
func nextPoller() (*poller, error) {
	ps, err := thePollers()
	if err != nil {
		return nil, err
	}
	return ps[int(pollerNext.Add(1))%len(ps)], nil
}

func startPoller(idx int) (*poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	r, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		syscall.Close(epfd)
		return nil, os.NewSyscallError("eventfd2", e)
	}
	efd := int(r)
	bell := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLET&0xffffffff, Fd: int32(efd)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, efd, &bell); err != nil {
		syscall.Close(efd)
		syscall.Close(epfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	f := os.NewFile(uintptr(epfd), "pgturnstile-epoll")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		syscall.Close(efd)
		return nil, err
	}
	p := &poller{epfd: epfd, file: f, rc: rc, efd: efd, idx: idx}
	p.collectFn = p.collect
	t := make([]atomic.Pointer[Conn], 1024)
	p.table.Store(&t)
	go p.run()
	return p, nil
}

// connEvents are a Conn's: readable, writable, hung up; edge-triggered.
const connEvents = syscall.EPOLLIN | syscall.EPOLLOUT | syscall.EPOLLRDHUP | syscall.EPOLLET&0xffffffff

func (p *poller) add(c *Conn) error { return p.addEvents(c, connEvents) }

// addEvents puts c's descriptor in the set for events.
func (p *poller) addEvents(c *Conn, events uint32) error {
	seq := p.enter(c)
	if e := p.ctl(syscall.EPOLL_CTL_ADD, c.fd, events, seq); e != 0 {
		p.clear(c)
		return os.NewSyscallError("epoll_ctl", e)
	}
	return nil
}

// enter puts c in the table, under a new seq that its events carry, and
// returns the seq: once c is in the table another goroutine may handle
// its events, and move it (Rebalance), which writes c.seq.
func (p *poller) enter(c *Conn) uint32 {
	p.mu.Lock()
	p.seq++
	c.seq = p.seq
	seq := c.seq
	t := *p.table.Load()
	if c.fd >= len(t) {
		nt := make([]atomic.Pointer[Conn], max(2*len(t), c.fd+1))
		for i := range t {
			nt[i].Store(t[i].Load())
		}
		p.table.Store(&nt)
		t = nt
	}
	t[c.fd].Store(c)
	p.mu.Unlock()
	return seq
}

// del takes c out of the set. Its descriptor may live on in a duplicate
// (a parked client's), which would keep it in the set.
func (p *poller) del(c *Conn) {
	p.clear(c)
	p.ctl(syscall.EPOLL_CTL_DEL, c.fd, 0, 0)
}

// ctl is epoll_ctl(2) on p's set for fd, whose events carry seq.
func (p *poller) ctl(op, fd int, events, seq uint32) syscall.Errno {
	ev := syscall.EpollEvent{Events: events, Fd: int32(fd), Pad: int32(seq)}
	_, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_CTL, uintptr(p.epfd), uintptr(op), uintptr(fd),
		uintptr(unsafe.Pointer(&ev)), 0, 0)
	return e
}

func (p *poller) clear(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := *p.table.Load()
	t[c.fd].CompareAndSwap(c, nil)
}

// run is the poller's goroutine, for the life of the process.
func (p *poller) run() {
	for {
		if err := p.rc.Read(p.collectFn); err != nil {
			return
		}
	}
}

// collect takes the events ready now and hands them out (dispatch, which
// may run loop handlers, then the posts they made); false asks the
// runtime to wait until the set has more. The runtime reset the set's
// readiness before the first call, so an event that arrives after a
// collection, during the handing out included, ends the wait at once;
// when the set is quiet the goroutine sleeps without another epoll_pwait.
// A full batch is followed by the next at once: no new edge would
// announce what is left.
func (p *poller) collect(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&p.events[0])),
			uintptr(len(p.events)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || r == 0 {
			return false
		}
		n := int(r)
		// The clock is read only once a Conn has been on the loop:
		// placement is the loop's alone.
		measure := loopUsed.Load()
		var t0 int64
		if measure {
			t0 = nanotime()
		}
		p.busy.Store(true)
		p.dispatch(p.events[:n])
		// Posts made while busy rang no bell (Post): run them, and
		// those they make, then once more after busy is cleared, so
		// that none made in between is missed.
		for p.runPosts(false) {
		}
		p.busy.Store(false)
		p.runPosts(false)
		if measure {
			p.account(t0, nanotime())
		}
		if n < len(p.events) {
			return false
		}
	}
}

// dispatch hands each event's Conn its tokens, or runs its handler.
func (p *poller) dispatch(events []syscall.EpollEvent) {
	for i := range events {
		ev := &events[i]
		if int(ev.Fd) == p.efd && ev.Pad == 0 {
			p.runPosts(true)
			continue
		}
		t := *p.table.Load()
		if int(ev.Fd) >= len(t) {
			continue
		}
		c := t[ev.Fd].Load()
		if c == nil || c.seq != uint32(ev.Pad) {
			continue // a socket since closed
		}
		if ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
			c.hup.Store(true)
		}
		if h := c.loop.h.Load(); h != nil {
			(*h)(ev.Events)
			continue
		}
		if ev.Events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
			wake(c.rready)
		}
		if ev.Events&(syscall.EPOLLOUT|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
			wake(c.wready)
		}
	}
}

// Adopt makes a Conn of fd, a connected TCP socket's descriptor that the
// caller hands over (a parked client's, coming back): in the next
// poller's set, non-blocking, as Accept's are, so that it can rest on the
// event loop again. false, with fd untouched, for anything else (a Unix
// socket, no poller), which the caller turns into a net.Conn instead.
func Adopt(fd int) (*Conn, bool) {
	var rsa syscall.RawSockaddrAny
	n := uint32(syscall.SizeofSockaddrAny)
	if _, _, e := syscall.RawSyscall(syscall.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&n))); e != 0 {
		return nil, false
	}
	if rsa.Addr.Family != syscall.AF_INET && rsa.Addr.Family != syscall.AF_INET6 {
		return nil, false
	}
	raddr := sockaddrTCP(&rsa)
	p, err := nextPoller()
	if err != nil {
		return nil, false
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil, false
	}
	c := &Conn{fd: fd, raddr: raddr}
	c.p.Store(p)
	c.rready = make(chan struct{}, 1)
	c.wready = make(chan struct{}, 1)
	if err := p.add(c); err != nil {
		return nil, false
	}
	return c, true
}
