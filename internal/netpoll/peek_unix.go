//go:build unix

package netpoll

import (
	"io"
	"syscall"
)

// PeekByte waits (within the connection's read deadline) for the
// peer's next byte and returns it without consuming it (MSG_PEEK), as
// PgBouncer's sbuf_possible_direct_tls_startup_cb looks: the byte stays
// for the startup packet's reader, or for the TLS handshake.
func PeekByte(sc syscall.Conn) (byte, error) {
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var buf [1]byte
	var n int
	var perr error
	err = raw.Read(func(fd uintptr) bool {
		for {
			n, perr = recvPeek(fd, buf[:])
			if perr != syscall.EINTR {
				return perr != syscall.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case perr != nil:
		return 0, perr
	case n == 0:
		return 0, io.EOF
	}
	return buf[0], nil
}
