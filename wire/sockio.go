package wire

import (
	"io"
	"net"
	"syscall"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// SocketIO returns the reader and writer that Reader and Writer should use
// for conn. For a plain TCP or Unix socket that is a wrapper that makes the
// read(2) and write(2) calls without telling the Go scheduler about them
// (syscall.RawSyscall, in internal/netpoll) and waits for readiness
// through the runtime's netpoller as net.Conn does. Any other conn (TLS),
// and every conn where netpoll has no raw calls (netpoll.RawIO is false:
// systems other than Linux), is returned as it is.
//
// Why: a pooler's goroutines spend most of their time in short,
// non-blocking socket calls. Each call made the ordinary way marks the
// goroutine's P as "in a system call"; the runtime's monitor thread then
// wakes every 20 µs to take such Ps back and hand them to other threads,
// and on a busy machine that is a large share of the pooler's CPU (about a
// tenth of it in `perf` profiles of `make bench`'s select-only runs). The
// sockets are non-blocking (the net package sets O_NONBLOCK), so these calls
// never sleep in the kernel: an empty socket answers EAGAIN at once, and the
// goroutine then parks in the netpoller exactly as net.Conn's Read would.
//
// Deadlines (SetReadDeadline, SetWriteDeadline) and Close from another
// goroutine work as with net.Conn, because the waiting is net's own
// (syscall.RawConn).
func SocketIO(conn net.Conn) io.ReadWriter {
	if !netpoll.RawIO {
		return conn
	}
	switch conn.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		// Any other conn (TLS), and netpoll.Conn, whose own calls
		// are raw already.
		return conn
	}
	rc, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return conn
	}
	s := &sockIO{rc: rc}
	// Method values made once: a closure per call would allocate.
	s.readFn = s.readOnce
	s.writeFn = s.writeOnce
	s.awaitFn = s.writeThenAwait
	s.tryFn = s.tryOnce
	return s
}

// sockIO is SocketIO's wrapper. Reads and writes may run at the same time on
// different goroutines, so each has its own fields; net serialises readers
// among themselves and writers among themselves.
type sockIO struct {
	rc syscall.RawConn

	readFn func(fd uintptr) bool
	rbuf   []byte
	rn     int
	rerr   error
	// emptyReads counts reads that found nothing (EAGAIN), which is what
	// WriteAwaitReply saves; the tests read it.
	emptyReads int

	writeFn func(fd uintptr) bool
	wbuf    []byte
	wn      int
	werr    error

	// TryRead's own: an event loop's read, never waiting.
	tryFn  func(fd uintptr)
	tbuf   []byte
	tn     int
	tagain bool
	terr   error

	// WriteAwaitReply's own, so that a stray Write elsewhere cannot race
	// with it on the fields above.
	awaitFn  func(fd uintptr) bool
	abuf     []byte
	an       int
	aerr     error
	awaiting awaitStep
}

// awaitStep is where WriteAwaitReply's callback is.
type awaitStep uint8

const (
	awaitWrite awaitStep = iota // nothing written yet
	awaitReply                  // all written; waiting for the socket to turn readable
	awaitFull                   // the send buffer filled up: finish with Write
)

func (s *sockIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rbuf, s.rn, s.rerr = p, 0, nil
	err := s.rc.Read(s.readFn)
	n, rerr := s.rn, s.rerr
	s.rbuf, s.rerr = nil, nil
	if err != nil {
		return 0, err // closed, or the read deadline passed
	}
	if rerr != nil {
		return 0, rerr
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// readOnce is one read(2); false asks net to wait until the socket is
// readable and call it again.
func (s *sockIO) readOnce(fd uintptr) bool {
	n, again, err := netpoll.Read(fd, s.rbuf)
	if again {
		s.emptyReads++
		return false
	}
	s.rn, s.rerr = n, err
	return true
}

// TryRead is one read(2) that never waits (TryReader): again when the
// socket has nothing now, io.EOF when the peer closed it. An event loop's,
// which reads a server's reply as it arrives (Reader.FillNow).
func (s *sockIO) TryRead(p []byte) (int, bool, error) {
	if len(p) == 0 {
		return 0, false, nil
	}
	s.tbuf, s.tn, s.tagain, s.terr = p, 0, false, nil
	err := s.rc.Control(s.tryFn)
	n, again, terr := s.tn, s.tagain, s.terr
	s.tbuf, s.terr = nil, nil
	switch {
	case err != nil:
		return 0, false, err
	case terr != nil:
		return 0, false, terr
	case !again && n == 0:
		return 0, false, io.EOF
	}
	return n, again, nil
}

func (s *sockIO) tryOnce(fd uintptr) {
	s.tn, s.tagain, s.terr = netpoll.Read(fd, s.tbuf)
}

// ReplyAwaiter is a connection that can send a request and wait for the
// first byte of its reply without a read(2) that finds nothing.
type ReplyAwaiter interface {
	// WriteAwaitReply writes p like Write, then returns once the socket is
	// readable or the wait failed. A failed wait (read deadline, Close) is
	// not returned: the next Read meets it.
	WriteAwaitReply(p []byte) (int, error)
}

// WriteAwaitReply saves the read(2) that Read would make right after a
// request, when the peer cannot have answered yet: that read finds nothing
// (EAGAIN) and costs a system call per round trip before the goroutine
// parks. The write is made inside net's read wait (RawConn.Read), after
// net has reset the socket's readiness, so any reply arrives after the
// reset and wakes the wait; a write made before the wait could be answered
// before the reset, and the wait would then sleep through the only wake-up.
//
// Only for a peer that answers every request (a PostgreSQL server after a
// Sync or Query), and never while another goroutine reads the socket: the
// wait holds net's read lock.
func (s *sockIO) WriteAwaitReply(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.abuf, s.an, s.aerr, s.awaiting = p, 0, nil, awaitWrite
	// A failed wait (read deadline, Close) is left to the next Read.
	_ = s.rc.Read(s.awaitFn)
	n, aerr, step := s.an, s.aerr, s.awaiting
	s.abuf, s.aerr = nil, nil
	switch {
	case aerr != nil:
		return n, aerr
	case step == awaitWrite || step == awaitFull:
		// The wait ended before the callback ran (an expired read
		// deadline or a closed socket), or the send buffer is full:
		// write the rest the ordinary way, which waits for room.
		m, werr := s.Write(p[n:])
		return n + m, werr
	}
	return n, nil
}

// writeThenAwait is WriteAwaitReply's callback: the first call writes,
// false then asks net to wait for readability; the call after the wait
// reads nothing and ends it.
func (s *sockIO) writeThenAwait(fd uintptr) bool {
	if s.awaiting == awaitReply {
		return true // woken
	}
	switch full, err := writeFrom(fd, s.abuf, &s.an); {
	case err != nil:
		s.aerr = err
		return true
	case full:
		s.awaiting = awaitFull
		return true
	}
	s.awaiting = awaitReply
	return false
}

func (s *sockIO) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.wbuf, s.wn, s.werr = p, 0, nil
	err := s.rc.Write(s.writeFn)
	n, werr := s.wn, s.werr
	s.wbuf, s.werr = nil, nil
	if err != nil {
		return n, err
	}
	if werr != nil {
		return n, werr
	}
	return n, nil
}

// writeOnce writes what the socket takes; false (a full socket buffer) asks
// net to wait until it is writable and call it again.
func (s *sockIO) writeOnce(fd uintptr) bool {
	full, err := writeFrom(fd, s.wbuf, &s.wn)
	if err != nil {
		s.werr = err
	}
	return !full
}

// writeFrom writes buf[*n:] with write(2), advancing *n, until all is
// written or the send buffer is full (full: EAGAIN).
func writeFrom(fd uintptr, buf []byte, n *int) (full bool, err error) {
	for *n < len(buf) {
		m, again, err := netpoll.Write(fd, buf[*n:])
		switch {
		case err != nil:
			return false, err
		case again:
			return true, nil
		}
		*n += m
	}
	return false, nil
}
