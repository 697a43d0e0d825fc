//go:build !linux

package sockopt

import (
	"errors"
	"net"
	"syscall"
)

// Elsewhere than Linux there is no TCP_USER_TIMEOUT: setting it fails, as
// in PgBouncer; the backlog stays Go's.

var errNotOnPlatform = errors.New("not supported on this platform")

func setUserTimeout(TCPSocket, int) error { return errNotOnPlatform }

// SetDeferAccept does nothing: tcp_defer_accept's default is 1 only on
// Linux in PgBouncer, and 0 (nothing to set) elsewhere.
func SetDeferAccept(net.Listener, bool) error { return nil }

func SetBacklog(net.Listener, int) error { return nil }

func keepaliveDefaults(*net.KeepAliveConfig) {}

// setKeepalive sets SO_KEEPALIVE and, when on, the fields of ka that are
// not negative.
func setKeepalive(s TCPSocket, ka net.KeepAliveConfig) error {
	c, ok := s.(*net.TCPConn) // the only kind accepted here (netpoll.CanAccept is false)
	if !ok {
		return errNotOnPlatform
	}
	if !ka.Enable {
		return c.SetKeepAlive(false)
	}
	return c.SetKeepAliveConfig(ka)
}

// buffersBeforeHandshake: elsewhere than Linux, Tune sets
// tcp_socket_buffer on each connection once it is made.
const buffersBeforeHandshake = false

// setSocketBuffers does nothing before the handshake elsewhere than Linux:
// Tune sets the sizes once the connection is made.
func setSocketBuffers(syscall.RawConn, int) error { return nil }
