//go:build unix

package main

import "syscall"

// detached starts the daemon in a session of its own.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// errDaemonPlatform is nil: -d works here.
var errDaemonPlatform error
