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
)

// pgbHandler writes slog records in PgBouncer's line format, which operators
// and their tooling grep for:
//
//	2026-11-30 13:54:25.123 UTC [4242] LOG C-7: appdb/app@127.0.0.1:5555 login attempt: …
//
// Attributes follow the message as key=value pairs.
type pgbHandler struct {
	mu      *sync.Mutex
	w       io.Writer
	verbose *atomic.Pointer[func() int]
	attrs   []slog.Attr
	pid     int
}

// newHandler writes LOG and above, and DEBUG (NOISE) lines while
// verbose() is at least 1 (2). verbose is read per line, so SET verbose
// on the console takes effect at once; until setVerbose, it is fixed.
func newHandler(w io.Writer, verbose int) *pgbHandler {
	h := &pgbHandler{mu: &sync.Mutex{}, w: w, verbose: &atomic.Pointer[func() int]{}, pid: os.Getpid()}
	h.setVerbose(func() int { return verbose })
	return h
}

// setVerbose makes fn the source of the verbosity (the service's, once it
// exists: -v plus the verbose setting).
func (h *pgbHandler) setVerbose(fn func() int) { h.verbose.Store(&fn) }

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

func (h *pgbHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Time.UTC().Format("2006-01-02 15:04:05.000 UTC"))
	fmt.Fprintf(&b, " [%d] %s %s", h.pid, levelName(r.Level), r.Message)
	write := func(a slog.Attr) bool {
		if a.Key == "" {
			return true
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *pgbHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &n
}

func (h *pgbHandler) WithGroup(string) slog.Handler { return h }

var _ = time.Second
