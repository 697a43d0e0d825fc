//go:build !linux

package main

import "os"

// takeActivation: socket activation is systemd's, so Linux only.
// Elsewhere the variables are unset and ignored, and the process binds.
func takeActivation() *activation {
	listenFDs(os.Getpid())
	return &activation{}
}
