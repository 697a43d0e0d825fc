package main

import (
	"io"
	"log/slog"

	"github.com/pgturnstile/pgturnstile/internal/errtext"
)

// newJSONHandler is log_format = json: each line one JSON object, slog's
// own JSON form, with the fields of a text line:
//
//	{"time":"2026-12-01T21:03:04.123+01:00","level":"LOG","msg":"login attempt: db=appdb user=app tls=no","pid":4242,"conn":"C-7","db":"appdb","user":"app","addr":"127.0.0.1:5555"}
//
// time is local with its offset from UTC (RFC 3339, milliseconds), level
// is PgBouncer's word for it (the text line's), msg is the message without
// the client's or server's prefix, whose parts are fields of their own
// (conn, db, user, addr; db and user absent until the startup packet names
// them), followed by the line's other attributes. Which levels are written
// is the pgbHandler's decision (verbose), not this handler's.
func newJSONHandler(w io.Writer, pid int) slog.Handler {
	opts := &slog.HandlerOptions{
		Level: slog.Level(-1 << 10), // every record it is handed
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) != 0 {
				return a
			}
			switch a.Key {
			case slog.LevelKey:
				if l, ok := a.Value.Any().(slog.Level); ok {
					return slog.String(slog.LevelKey, levelName(l))
				}
			case slog.MessageKey:
				// The C library's words for system errors, as the text lines.
				if a.Value.Kind() == slog.KindString {
					return slog.String(slog.MessageKey, errtext.Line(a.Value.String()))
				}
			case slog.TimeKey:
				// Milliseconds, as the text lines (slog's default is
				// nanoseconds).
				if a.Value.Kind() == slog.KindTime {
					return slog.String(slog.TimeKey, a.Value.Time().Format("2006-01-02T15:04:05.000Z07:00"))
				}
			}
			return a
		},
	}
	return slog.NewJSONHandler(w, opts).WithAttrs([]slog.Attr{slog.Int("pid", pid)})
}
