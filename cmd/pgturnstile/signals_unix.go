//go:build unix

package main

import (
	"os"
	"syscall"
)

// sigPause and sigResume are PgBouncer's SIGUSR1 (PAUSE) and SIGUSR2
// (RESUME).
var sigPause, sigResume os.Signal = syscall.SIGUSR1, syscall.SIGUSR2

// handledSignals are the signals handleSignals acts on.
var handledSignals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, sigPause, sigResume}
