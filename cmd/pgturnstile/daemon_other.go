//go:build !unix

package main

import (
	"errors"
	"syscall"
)

func detached() *syscall.SysProcAttr { return nil }

// errDaemonPlatform is PgBouncer's refusal of -d on Windows, where it
// runs as a service instead.
var errDaemonPlatform = errors.New("option --daemon (-d) is not supported on this platform")
