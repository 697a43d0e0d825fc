package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/errtext"
	"github.com/pgturnstile/pgturnstile/pooler"
)

// pgbHandler writes slog records in PgBouncer's line format, which operators
// and their tooling grep for:
//
//	2026-11-30 13:54:25.123 CET [4242] LOG C-7: appdb/app@127.0.0.1:5555 login attempt: …
//
// The time is local, with the zone's abbreviation, as PgBouncer's
// (localtime and tzname: TZ is honoured). A line about a client or a
// server carries the pooler's prefix attributes (pooler.LogKeyConn…),
// written as PgBouncer's prefix; other attributes follow the message as
// key=value pairs. With log_format = json the same record is one JSON
// object (logjson.go) instead.
type pgbHandler struct {
	mu      *sync.Mutex
	w       io.Writer
	verbose *atomic.Pointer[func() int]
	format  *atomic.Pointer[func() string] // log_format: "json" or text
	jsonH   slog.Handler                   // the JSON form of this handler (its attrs included)
	attrs   []slog.Attr
	pid     int
	loc     *time.Location // time.Local, but for tests
}

// newHandler writes LOG and above, and DEBUG (NOISE) lines while
// verbose() is at least 1 (2). verbose is read per line, so SET verbose
// on the console takes effect at once; until setVerbose, it is fixed.
// The lines are text until setFormat says json.
func newHandler(w io.Writer, verbose int) *pgbHandler {
	h := &pgbHandler{mu: &sync.Mutex{}, w: w, verbose: &atomic.Pointer[func() int]{}, format: &atomic.Pointer[func() string]{}, pid: os.Getpid(), loc: time.Local}
	h.jsonH = newJSONHandler(w, h.pid)
	h.setVerbose(func() int { return verbose })
	h.setFormat(func() string { return "text" })
	return h
}

// setVerbose makes fn the source of the verbosity (the service's, once it
// exists: -v plus the verbose setting).
func (h *pgbHandler) setVerbose(fn func() int) { h.verbose.Store(&fn) }

// setFormat makes fn the source of log_format for h and every handler
// derived from it (the service's settings, once it exists). It is read per
// line, so RELOAD and SET log_format take effect from the next line.
func (h *pgbHandler) setFormat(fn func() string) { h.format.Store(&fn) }

func (h *pgbHandler) Enabled(_ context.Context, l slog.Level) bool {
	switch {
	case l >= slog.LevelInfo:
		return true
	case l >= slog.LevelDebug:
		return (*h.verbose.Load())() >= 1
	}
	return (*h.verbose.Load())() >= 2
}

func levelName(l slog.Level) string {
	switch {
	case l >= levelFatal:
		return "FATAL"
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARNING"
	case l >= slog.LevelInfo:
		return "LOG"
	case l >= slog.LevelDebug:
		return "DEBUG"
	}
	return "NOISE"
}

func (h *pgbHandler) Handle(ctx context.Context, r slog.Record) error {
	if (*h.format.Load())() == "json" {
		return h.jsonH.Handle(ctx, r)
	}
	var b strings.Builder
	b.WriteString(r.Time.In(h.loc).Format("2006-01-02 15:04:05.000 MST"))
	fmt.Fprintf(&b, " [%d] %s ", h.pid, levelName(r.Level))
	b.WriteString(lineText(r, h.attrs))
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

// lineText is a record's text after the level, as PgBouncer writes it to
// its logfile and to syslog: the prefix of the client or server the line
// is about, the message, then the other attributes as key=value. A
// message of several lines continues on lines that start with a tab, and
// ends without trailing blanks, as PgBouncer's log_generic does, so that
// every line of the log starts with a time or a tab.
func lineText(r slog.Record, attrs []slog.Attr) string {
	var conn, db, user, addr string
	var rest []slog.Attr
	take := func(a slog.Attr) bool {
		switch a.Key {
		case "":
		case pooler.LogKeyConn:
			conn = a.Value.String()
		case pooler.LogKeyDB:
			db = a.Value.String()
		case pooler.LogKeyUser:
			user = a.Value.String()
		case pooler.LogKeyAddr:
			addr = a.Value.String()
		default:
			rest = append(rest, a)
		}
		return true
	}
	for _, a := range attrs {
		take(a)
	}
	r.Attrs(take)
	var b strings.Builder
	if conn != "" {
		// PgBouncer's words for a database or user not known yet.
		if db == "" {
			db = "(nodb)"
		}
		if user == "" {
			user = "(nouser)"
		}
		fmt.Fprintf(&b, "%s: %s/%s@%s ", conn, db, user, addr)
	}
	// System errors in the C library's words (errtext), as PgBouncer's
	// lines have them and log watchers match them.
	b.WriteString(errtext.Line(r.Message))
	for _, a := range rest {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	s := b.String()
	if strings.ContainsRune(s, '\n') {
		s = strings.TrimRight(strings.ReplaceAll(s, "\n", "\n\t"), " \t\r\n")
	}
	return s
}

func (h *pgbHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	n.jsonH = h.jsonH.WithAttrs(as)
	return &n
}

func (h *pgbHandler) WithGroup(string) slog.Handler { return h }
