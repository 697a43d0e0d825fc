//go:build !unix

package netpoll

import (
	"errors"
	"syscall"
)

// PeekByte cannot look without consuming here: direct TLS is not
// detected, and every client starts with a startup packet.
func PeekByte(syscall.Conn) (byte, error) {
	return 0, errors.ErrUnsupported
}
