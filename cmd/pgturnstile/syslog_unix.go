//go:build unix

package main

import (
	"context"
	"fmt"
	"log/slog"
	"log/syslog"
	"strings"

	"github.com/pgturnstile/pgturnstile/config"
)

// syslogFacilities are the names PgBouncer accepts for syslog_facility;
// any other name means daemon, as in PgBouncer.
var syslogFacilities = map[string]syslog.Priority{
	"auth": syslog.LOG_AUTH, "authpriv": syslog.LOG_AUTHPRIV, "daemon": syslog.LOG_DAEMON, "user": syslog.LOG_USER,
	"local0": syslog.LOG_LOCAL0, "local1": syslog.LOG_LOCAL1, "local2": syslog.LOG_LOCAL2, "local3": syslog.LOG_LOCAL3,
	"local4": syslog.LOG_LOCAL4, "local5": syslog.LOG_LOCAL5, "local6": syslog.LOG_LOCAL6, "local7": syslog.LOG_LOCAL7,
}

// syslogNetwork and syslogAddr are where the syslog writer connects: the
// local syslog daemon (/dev/log) unless a test points them elsewhere.
var syslogNetwork, syslogAddr string

// openSyslog connects to syslog when the syslog setting is on, as
// syslog_ident (the program name when empty) with syslog_facility, each
// message tagged with the pid (PgBouncer's openlog(ident, LOG_PID, fac)).
// nil when off.
func openSyslog(st *config.Settings) (*syslog.Writer, error) {
	if !st.Syslog {
		return nil, nil
	}
	fac, ok := syslogFacilities[st.SyslogFacility]
	if !ok {
		fac = syslog.LOG_DAEMON
	}
	// An empty tag is the program name (os.Args[0]), as getprogname().
	return syslog.Dial(syslogNetwork, syslogAddr, fac|syslog.LOG_INFO, st.SyslogIdent)
}

// withSyslog adds syslog to log when the syslog setting is on: every line
// also goes there, without the time and pid (syslog adds its own), at the
// priority PgBouncer gives its level (FATAL crit, ERROR err, WARNING
// warning, LOG info); DEBUG lines stay out, as PgBouncer's syslog level is
// LOG. It returns the logger and what closes the connection. A syslog it
// cannot reach is a warning, not a reason to stop: PgBouncer's openlog
// cannot fail either.
func withSyslog(log *slog.Logger, st *config.Settings) (*slog.Logger, func()) {
	w, err := openSyslog(st)
	if err != nil {
		log.Warn("cannot connect to syslog: " + err.Error())
		return log, func() {}
	}
	if w == nil {
		return log, func() {}
	}
	return slog.New(&syslogHandler{next: log.Handler(), w: w}), func() { w.Close() }
}

// syslogHandler passes each record to next and to syslog.
type syslogHandler struct {
	next  slog.Handler
	w     *syslog.Writer
	attrs []slog.Attr
}

func (h *syslogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *syslogHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.next.Enabled(ctx, r.Level) {
		err = h.next.Handle(ctx, r)
	}
	if r.Level < slog.LevelInfo {
		return err
	}
	var b strings.Builder
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		if a.Key != "" {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	msg := b.String()
	switch {
	case r.Level >= levelFatal:
		h.w.Crit(msg)
	case r.Level >= slog.LevelError:
		h.w.Err(msg)
	case r.Level >= slog.LevelWarn:
		h.w.Warning(msg)
	default:
		h.w.Info(msg)
	}
	return err
}

func (h *syslogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &syslogHandler{next: h.next.WithAttrs(as), w: h.w, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *syslogHandler) WithGroup(name string) slog.Handler {
	return &syslogHandler{next: h.next.WithGroup(name), w: h.w, attrs: h.attrs}
}
