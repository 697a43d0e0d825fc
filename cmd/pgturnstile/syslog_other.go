//go:build !unix

package main

import (
	"log/slog"

	"github.com/pgturnstile/pgturnstile/config"
)

// withSyslog: the standard library has no syslog writer here (PgBouncer
// uses the Windows event log instead); lines go to stderr and logfile only.
func withSyslog(log *slog.Logger, st *config.Settings) (*slog.Logger, *syslogSink) {
	s := &syslogSink{}
	s.reset(log, st)
	return log, s
}

// syslogSink is no syslog.
type syslogSink struct{}

func (*syslogSink) reset(log *slog.Logger, st *config.Settings) {
	if st.Syslog {
		log.Warn("syslog is not supported on this platform")
	}
}

// Close does nothing.
func (*syslogSink) Close() {}
