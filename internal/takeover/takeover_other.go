//go:build windows

package takeover

import (
	"errors"
	"net"
	"time"
)

// Online restart passes descriptors over a Unix socket (SCM_RIGHTS):
// there is none of that here. The old process's side passes nothing
// (Sender is nil, every Dup fails) and the new one's refuses.

// Sender: see fd_unix.go.
func Sender(net.Conn, func() error) func(msg []byte, fd int) error { return nil }

// Dup: see fd_unix.go.
func Dup(int) int { return -1 }

// DupSocket: see fd_unix.go.
func DupSocket(any) int { return -1 }

// Close: see fd_unix.go.
func Close(int) {}

// FileConn: see fd_unix.go.
func FileConn(int) (net.Conn, error) { return nil, errors.New("not supported on this system") }

// TakeOver is not supported on this system.
func TakeOver(string, time.Duration) (*Handover, error) {
	return nil, errors.New("online restart is not supported on this system")
}

// conn: see takeover_unix.go.
type conn struct{}

// Commit: see takeover_unix.go.
func (h *Handover) Commit() error {
	return errors.New("online restart is not supported on this system")
}

// Abort: see takeover_unix.go.
func (h *Handover) Abort() {}
