//go:build unix && !linux

package netpoll

import "syscall"

// recvPeek is one recv(2) with MSG_PEEK on the non-blocking socket fd.
func recvPeek(fd uintptr, b []byte) (int, error) {
	n, _, err := syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK)
	return n, err
}
