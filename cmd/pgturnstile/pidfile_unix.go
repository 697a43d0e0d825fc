//go:build unix

package main

import (
	"errors"
	"syscall"
)

// processMayExist is PgBouncer's test of a pidfile's pid: signal 0 checks
// the process exists, and only ESRCH says it does not (EPERM: it exists,
// as another user).
func processMayExist(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
