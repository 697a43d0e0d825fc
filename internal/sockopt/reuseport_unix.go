//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sockopt

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setReusePort is a net.ListenConfig.Control that sets SO_REUSEPORT.
func setReusePort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
