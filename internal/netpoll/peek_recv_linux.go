package netpoll

import (
	"syscall"
	"unsafe"
)

// recvPeek is one recv(2) with MSG_PEEK on the non-blocking socket fd,
// made with RawSyscall: a system call entered the ordinary way wakes the
// runtime's sysmon thread from its deep sleep when the pooler was idle,
// which then polls every 20 µs for a while, two context switches each;
// a login made of such calls costs sysmon's wake-ups more than the calls.
func recvPeek(fd uintptr, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		syscall.MSG_PEEK, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
