//go:build !unix

package pooler

import (
	"errors"
	"syscall"
)

// peekFirstByte cannot look without consuming here: direct TLS is not
// detected, and every client starts with a startup packet.
func peekFirstByte(syscall.Conn) (byte, error) {
	return 0, errors.ErrUnsupported
}
