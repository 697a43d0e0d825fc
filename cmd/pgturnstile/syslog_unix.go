//go:build unix

package main

import (
	"context"
	"log/slog"
	"log/syslog"
	"sync"

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

// withSyslog adds syslog to log: while the syslog setting is on, every
// line also goes there, without the time and pid (syslog adds its own), at
// the priority PgBouncer gives its level (FATAL crit, ERROR err, WARNING
// warning, LOG info); DEBUG lines stay out, as PgBouncer's syslog level is
// LOG. The returned sink is what RELOAD resets (PgBouncer's reset_logging:
// syslog, syslog_ident and syslog_facility follow the file) and what
// closes the connection at exit. A syslog it cannot reach is a warning,
// not a reason to stop: PgBouncer's openlog cannot fail either.
func withSyslog(log *slog.Logger, st *config.Settings) (*slog.Logger, *syslogSink) {
	sink := &syslogSink{}
	l := slog.New(&syslogHandler{next: log.Handler(), sink: sink})
	sink.reset(l, st)
	return l, sink
}

// syslogSink is the connection to syslog, nil while syslog is off.
type syslogSink struct {
	mu sync.Mutex
	w  *syslog.Writer
}

// reset closes the connection and opens one as st says, if st.Syslog;
// log takes the warning when syslog cannot be reached.
func (s *syslogSink) reset(log *slog.Logger, st *config.Settings) {
	w, err := openSyslog(st)
	if err != nil {
		log.Warn("cannot connect to syslog: " + err.Error())
	}
	s.mu.Lock()
	old := s.w
	s.w = w
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

// Close closes the connection.
func (s *syslogSink) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		s.w.Close()
		s.w = nil
	}
}

func (s *syslogSink) write(l slog.Level, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.w == nil:
	case l >= levelFatal:
		s.w.Crit(msg)
	case l >= slog.LevelError:
		s.w.Err(msg)
	case l >= slog.LevelWarn:
		s.w.Warning(msg)
	default:
		s.w.Info(msg)
	}
}

// syslogHandler passes each record to next and to the sink.
type syslogHandler struct {
	next  slog.Handler
	sink  *syslogSink
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
	if r.Level >= slog.LevelInfo {
		// PgBouncer's line without its time, pid and level.
		h.sink.write(r.Level, lineText(r, h.attrs))
	}
	return err
}

func (h *syslogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &syslogHandler{next: h.next.WithAttrs(as), sink: h.sink, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *syslogHandler) WithGroup(name string) slog.Handler {
	return &syslogHandler{next: h.next.WithGroup(name), sink: h.sink, attrs: h.attrs}
}
