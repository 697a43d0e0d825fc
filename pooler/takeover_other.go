//go:build windows

package pooler

import (
	"errors"
	"net"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
)

// Online restart passes descriptors over a Unix socket (SCM_RIGHTS):
// there is none of that here.

func (c *client) fdSender() admin.FDSender { return nil }
func dupFD(int) int                        { return -1 }
func dupListener(net.Listener) int         { return -1 }
func closeFD(int)                          {}
func dupServerFD(*server) int              { return -1 }
func fileConn(int) (net.Conn, error)       { return nil, errors.New("not supported on this system") }

// ErrNoOldProcess: see takeover_unix.go.
var ErrNoOldProcess = errors.New("old process not found")

// TakeOver is not supported on this system.
func TakeOver(string, time.Duration) (*Handover, error) {
	return nil, errors.New("online restart is not supported on this system")
}

// takeoverConn: see takeover_unix.go.
type takeoverConn struct{}

// Commit: see takeover_unix.go.
func (h *Handover) Commit() error {
	return errors.New("online restart is not supported on this system")
}

// Abort: see takeover_unix.go.
func (h *Handover) Abort() {}
