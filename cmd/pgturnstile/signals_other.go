//go:build !unix

package main

import (
	"os"
	"syscall"
)

// noSignal stands for a signal this system does not have; it is never
// delivered.
type noSignal string

func (s noSignal) String() string { return string(s) }
func (noSignal) Signal()          {}

// sigPause and sigResume are PgBouncer's SIGUSR1 (PAUSE) and SIGUSR2
// (RESUME), which this system lacks: use the console's PAUSE and RESUME.
var sigPause, sigResume os.Signal = noSignal("SIGUSR1"), noSignal("SIGUSR2")

// handledSignals are the signals handleSignals acts on.
var handledSignals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT}
