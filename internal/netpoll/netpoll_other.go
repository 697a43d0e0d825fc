//go:build !linux

package netpoll

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// errUnsupported is what the functions that should not be called here
// return.
var errUnsupported = errors.New("netpoll: not supported on this system")

// RawIO is true where Read and Write make the system calls themselves.
const RawIO = false

// CanPeek is true where PeekClosed looks at the socket.
const CanPeek = false

// CanPark is true where NewPoller works.
const CanPark = false

// Read is not available here (RawIO is false).
func Read(fd uintptr, p []byte) (n int, again bool, err error) { return 0, false, errUnsupported }

// Write is not available here (RawIO is false).
func Write(fd uintptr, p []byte) (n int, again bool, err error) { return 0, false, errUnsupported }

// PeekClosed cannot tell here (CanPeek is false): the connection counts
// as healthy until a read says otherwise.
func PeekClosed(fd uintptr, buf *[1]byte) bool { return false }

// PeekLeft cannot tell here (CanPeek is false): the peer counts as there.
func PeekLeft(conn net.Conn, bye byte) bool { return false }

// PeerUID cannot tell here.
func PeerUID(uc *net.UnixConn) (uid int, ok bool) { return 0, false }

// PeerPID cannot tell here.
func PeerPID(uc *net.UnixConn) (pid int, ok bool) { return 0, false }

// DupCloexec is not available here.
func DupCloexec(fd int) (int, error) { return -1, errUnsupported }

// Poller is not available here (CanPark is false).
type Poller struct{}

// NewPoller fails here: clients are never parked.
func NewPoller() (*Poller, error) { return nil, errUnsupported }

// Add is never reached (NewPoller fails).
func (p *Poller) Add(fd int) error { return errUnsupported }

// Del is never reached (NewPoller fails).
func (p *Poller) Del(fd int) {}

// Wait is never reached (NewPoller fails).
func (p *Poller) Wait(fds []int32) (int, error) { return 0, errUnsupported }

// Close is never reached (NewPoller fails).
func (p *Poller) Close() error { return nil }

// CanAccept is true where NewAcceptor works.
const CanAccept = false

// Acceptor is not available here (CanAccept is false).
type Acceptor struct{}

// NewAcceptor fails here: the caller uses the listener's Accept.
func NewAcceptor(net.Listener) (*Acceptor, bool) { return nil, false }

// Accept is never reached (NewAcceptor fails).
func (*Acceptor) Accept() (*Conn, error) { return nil, errUnsupported }

// SetDeadline is never reached (NewAcceptor fails).
func (*Acceptor) SetDeadline(time.Time) error { return errUnsupported }

// Close is never reached (NewAcceptor fails).
func (*Acceptor) Close() error { return nil }

// Conn is never made here (Accept is never reached); it has a TCP
// connection's methods so that code naming it builds everywhere.
type Conn struct{ net.TCPConn }

// Control is never reached (no Conn is made here).
func (c *Conn) Control(func(fd uintptr)) error { return errUnsupported }

// CanLoop is true where SetHandler works.
const CanLoop = false

// EvPost is the event a handler gets for a Post (never, here).
const EvPost uint32 = 1 << 28

// Readable is never reached (CanLoop is false).
func Readable(ev uint32) bool { return false }

// HungUp is never reached (CanLoop is false).
func HungUp(ev uint32) bool { return false }

// SetHandler is never reached (CanLoop is false).
func (c *Conn) SetHandler(h *func(ev uint32)) {}

// TryRead is never reached (CanLoop is false).
func (c *Conn) TryRead(b []byte) (int, bool, error) { return 0, false, errUnsupported }

// HungUp is never reached (CanLoop is false).
func (c *Conn) HungUp() bool { return false }

// SetWriteBehind is never reached (CanLoop is false).
func (c *Conn) SetWriteBehind(on bool) {}

// Behind is never reached (CanLoop is false).
func (c *Conn) Behind() int { return 0 }

// FlushBehind is never reached (CanLoop is false).
func (c *Conn) FlushBehind() error { return nil }

// Post is never reached (CanLoop is false).
func (c *Conn) Post() {}

// Rebalance is never reached (CanLoop is false).
func (c *Conn) Rebalance() bool { return false }

// Moves is 0: no Conn is on a loop.
func Moves() uint64 { return 0 }

// PollerLoads is nil: there are no pollers.
func PollerLoads() []float64 { return nil }

// Watch is never made here (CanLoop is false).
type Watch struct{}

// NewWatch is never reached (CanLoop is false).
func NewWatch(h *func(ev uint32)) *Watch { return &Watch{} }

// Start is never reached (CanLoop is false).
func (w *Watch) Start(on *Conn, rc syscall.RawConn) error { return errUnsupported }

// Stop does nothing here.
func (w *Watch) Stop() {}

// HomedWith is false here.
func (w *Watch) HomedWith(c *Conn) bool { return false }

// Watching is false here.
func (w *Watch) Watching() bool { return false }

// Adopt is not available here: the caller makes a net.Conn of fd.
func Adopt(fd int) (*Conn, bool) { return nil, false }
