//go:build !linux

package main

import (
	"log/slog"
	"net"
	"os"

	"github.com/pgturnstile/pgturnstile/config"
)

// activatedListeners: socket activation is systemd's, so Linux only.
// Elsewhere the variables are unset and ignored, and the process binds.
func activatedListeners(_ *config.Settings, _ *slog.Logger, _ bool) ([]net.Listener, error) {
	listenFDs(os.Getpid())
	return nil, nil
}
