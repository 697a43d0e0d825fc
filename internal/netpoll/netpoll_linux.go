//go:build linux

package netpoll

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// RawIO is true where Read and Write make the system calls themselves.
const RawIO = true

// CanPeek is true where PeekClosed looks at the socket.
const CanPeek = true

// CanPark is true where NewPoller works.
const CanPark = true

// Read makes one read(2) on the non-blocking descriptor fd into p
// (len(p) > 0), retrying EINTR. again: the socket had nothing (EAGAIN) and
// the caller should wait for readability; n == 0 with no error is EOF.
func Read(fd uintptr, p []byte) (n int, again bool, err error) {
	return rawIO(syscall.SYS_READ, "read", fd, p)
}

// Write makes one write(2) of p (len(p) > 0) on the non-blocking
// descriptor fd, retrying EINTR. again: the send buffer is full (EAGAIN)
// and the caller should wait for writability.
func Write(fd uintptr, p []byte) (n int, again bool, err error) {
	return rawIO(syscall.SYS_WRITE, "write", fd, p)
}

// rawIO is Read's and Write's one system call, made with RawSyscall so the
// goroutine's P never enters the syscall state.
func rawIO(trap uintptr, name string, fd uintptr, p []byte) (n int, again bool, err error) {
	for {
		r, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			return int(r), false, nil
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, true, nil
		default:
			return 0, false, os.NewSyscallError(name, e)
		}
	}
}

// PeekClosed reports, without blocking or consuming anything, whether the
// socket fd has something to read (EOF, data) or an error pending: for a
// connection that should be silent, a sign that the peer closed it or is
// about to. buf is the one byte the peek reads into (the caller's, so
// that nothing escapes).
func PeekClosed(fd uintptr, buf *[1]byte) bool {
	n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&buf[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	switch {
	case e == syscall.EAGAIN || e == syscall.EINTR:
		return false
	case e != 0 || int(n) >= 0:
		return true // EOF (n == 0), data, or a socket error
	}
	return false
}

// PeekLeft reports, without blocking or consuming anything, that conn's
// socket holds the end of the stream, an error, or next a message of type
// bye (a Terminate): a peer that has left though its reader has not seen
// it yet. False for a conn without a descriptor.
func PeekLeft(conn net.Conn, bye byte) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [1]byte
	left := false
	rc.Control(func(fd uintptr) {
		// buf stays 0 for the end or an error; no message type is 0.
		left = PeekClosed(fd, &buf) && (buf[0] == 0 || buf[0] == bye)
	})
	return left
}

// PeerUID returns the user id of the process at the other end of a Unix
// socket (SO_PEERCRED); ok is false when it cannot be told.
func PeerUID(uc *net.UnixConn) (uid int, ok bool) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	raw.Control(func(fd uintptr) {
		cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err == nil {
			uid, ok = int(cred.Uid), true
		}
	})
	return uid, ok
}

// PeerPID returns the process id at the other end of a Unix socket
// (SO_PEERCRED), for the log prefix; ok is false when it cannot be told.
func PeerPID(uc *net.UnixConn) (pid int, ok bool) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	raw.Control(func(fd uintptr) {
		cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err == nil && cred.Pid > 0 {
			pid, ok = int(cred.Pid), true
		}
	})
	return pid, ok
}

// DupCloexec duplicates a descriptor, close-on-exec like every descriptor
// Go opens.
func DupCloexec(fd int) (int, error) {
	nfd, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(nfd), nil
}

// Poller is an epoll set of bare descriptors, each watched once for
// readability or hang-up. Add, Del and Close may be called from any
// goroutine; Wait from one goroutine at a time.
//
// Close must be able to end a Wait blocked in epoll_wait, which closing
// the epoll descriptor does not do (and a descriptor closed under a
// system call may be reused by the time it returns). So the set also
// watches the read end of a pipe that nothing reads: Close writes a byte
// to it, which wakes the Wait for good (level-triggered), waits for the
// Wait to return, and only then closes the descriptors.
type Poller struct {
	epfd         int
	wakeR, wakeW int // the pipe Close wakes Wait with
	events       []syscall.EpollEvent

	mu     sync.Mutex // guards closed and the descriptors' lifetime
	closed bool
	// waits counts the Waits under way; Close waits for them to return
	// before it closes the descriptors. Added to under mu while !closed.
	waits sync.WaitGroup
}

// NewPoller creates an empty set.
func NewPoller() (*Poller, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	var pipe [2]int
	if err := syscall.Pipe2(pipe[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil, os.NewSyscallError("pipe2", err)
	}
	p := &Poller{epfd: epfd, wakeR: pipe[0], wakeW: pipe[1]}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(p.wakeR)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.wakeR, &ev); err != nil {
		p.closeFDs()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return p, nil
}

// Add watches fd until it is readable or hung up. Level-triggered and
// one-shot: bytes that arrived before the call are reported at once, and
// fd is reported once; Del it after that before adding it again. After
// Close it fails with net.ErrClosed.
func (p *Poller) Add(fd int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return net.ErrClosed
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(fd)}
	if err := syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// Del stops watching fd (nothing if it is not watched, or after Close).
func (p *Poller) Del(fd int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	_ = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
}

// Wait blocks until at least one watched descriptor is ready and stores
// the ready ones in fds, returning how many. It is a blocking system call
// on a thread of its own. EINTR is retried. Once Close was called it
// returns net.ErrClosed (what was ready with the wake-up is not reported).
func (p *Poller) Wait(fds []int32) (int, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0, net.ErrClosed
	}
	p.waits.Add(1)
	p.mu.Unlock()
	defer p.waits.Done()
	if len(p.events) < len(fds) {
		p.events = make([]syscall.EpollEvent, len(fds))
	}
	events := p.events[:len(fds)]
	for {
		n, err := syscall.EpollWait(p.epfd, events, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return 0, os.NewSyscallError("epoll_wait", err)
		}
		for i, ev := range events[:n] {
			if ev.Fd == int32(p.wakeR) {
				return 0, net.ErrClosed
			}
			fds[i] = ev.Fd
		}
		return n, nil
	}
}

// Close ends the set: a Wait under way returns net.ErrClosed, as do
// every later Wait and Add, and the set's descriptors are closed once no
// Wait uses them. The descriptors that were watched are left as they
// are (they are the caller's). Close returns after the Wait did; it must
// not be called from the goroutine in Wait. A second Close does nothing.
func (p *Poller) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	// The pipe stays readable (nothing reads it), so a Wait that has
	// counted itself but not yet reached epoll_wait returns at once too.
	one := [1]byte{1}
	if _, err := syscall.Write(p.wakeW, one[:]); err != nil {
		panic("BUG: netpoll: cannot wake the poller: " + err.Error())
	}
	p.waits.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeFDs()
}

// closeFDs closes the epoll set and the wake pipe.
func (p *Poller) closeFDs() error {
	err := syscall.Close(p.epfd)
	syscall.Close(p.wakeR)
	syscall.Close(p.wakeW)
	if err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}
