//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sockopt

import (
	"errors"
	"syscall"
)

// setReusePort fails where there is no SO_REUSEPORT, as PgBouncer does.
func setReusePort(network, address string, c syscall.RawConn) error {
	return errors.New("so_reuseport not supported on this platform")
}
