//go:build !unix

package main

import (
	"log/slog"

	"github.com/pgturnstile/pgturnstile/config"
)

// withSyslog: the standard library has no syslog writer here (PgBouncer
// uses the Windows event log instead); lines go to stderr and logfile only.
func withSyslog(log *slog.Logger, st *config.Settings) (*slog.Logger, func()) {
	if st.Syslog {
		log.Warn("syslog is not supported on this platform")
	}
	return log, func() {}
}
