package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/pooler"
)

// at is a fixed instant: 20:03:04.123456789 UTC.
var at = time.Date(2026, 12, 1, 20, 3, 4, 123456789, time.UTC)

// handle passes one record at `at` with attrs through h.
func handle(t *testing.T, h slog.Handler, level slog.Level, msg string, attrs ...slog.Attr) {
	t.Helper()
	r := slog.NewRecord(at, level, msg, 0)
	r.AddAttrs(attrs...)
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// A text line is PgBouncer's: local time with the zone's abbreviation and
// milliseconds, [pid], level, then the prefix of the client or server the
// line is about (PgBouncer's "(nodb)/(nouser)" before the startup packet),
// the message, and any other attributes as key=value. A message of several
// lines continues on tab-led lines, without trailing blanks.
func TestHandlerTextLine(t *testing.T) {
	var out bytes.Buffer
	h := newHandler(&out, 0)
	h.loc = time.FixedZone("CET", 3600)
	pid := strconv.Itoa(os.Getpid())
	client := h.WithAttrs([]slog.Attr{
		slog.String(pooler.LogKeyConn, "C-7"), slog.String(pooler.LogKeyDB, "appdb"),
		slog.String(pooler.LogKeyUser, "app"), slog.String(pooler.LogKeyAddr, "127.0.0.1:5555"),
	})
	cases := []struct {
		h     slog.Handler
		level slog.Level
		msg   string
		attrs []slog.Attr
		want  string
	}{
		{h, slog.LevelInfo, "process up", nil, "LOG process up"},
		{client, slog.LevelInfo, "login attempt: db=appdb user=app tls=no", nil,
			"LOG C-7: appdb/app@127.0.0.1:5555 login attempt: db=appdb user=app tls=no"},
		{h, slog.LevelWarn, "got var", []slog.Attr{slog.String(pooler.LogKeyConn, "C-3"), slog.String(pooler.LogKeyAddr, "unix")},
			"WARNING C-3: (nodb)/(nouser)@unix got var"},
		{h, slog.LevelError, "server login failed", []slog.Attr{slog.String(pooler.LogKeyConn, "S-2"), slog.String(pooler.LogKeyDB, "db"),
			slog.String(pooler.LogKeyUser, "u"), slog.String(pooler.LogKeyAddr, "[::1]:5432"), slog.Int("n", 3)},
			"ERROR S-2: db/u@[::1]:5432 server login failed n=3"},
		{h.WithAttrs([]slog.Attr{slog.String("pool", "db/u")}), slog.LevelInfo, "taking connection from reserve_pool", nil,
			"LOG taking connection from reserve_pool pool=db/u"},
		{h, levelFatal, "first\nsecond  \n", nil, "FATAL first\n\tsecond"},
	}
	for _, c := range cases {
		out.Reset()
		handle(t, c.h, c.level, c.msg, c.attrs...)
		want := "2026-12-01 21:03:04.123 CET [" + pid + "] " + c.want + "\n"
		if out.String() != want {
			t.Errorf("line\n got %q\nwant %q", out.String(), want)
		}
	}
}

// log_format = json: one JSON object per line with the text line's
// fields: time (local, with its offset, milliseconds), level in PgBouncer's
// words, msg without the prefix, pid, and the prefix's parts as fields;
// verbose still decides which levels are written, and the format is read
// per line (SET log_format, RELOAD).
func TestHandlerJSON(t *testing.T) {
	var out bytes.Buffer
	h := newHandler(&out, 0)
	format := "json"
	h.setFormat(func() string { return format })
	log := slog.New(h)
	r := slog.NewRecord(at, slog.LevelInfo, "login attempt: db=appdb user=app tls=no", 0)
	client := log.With(pooler.LogKeyConn, "C-7", pooler.LogKeyDB, "appdb", pooler.LogKeyUser, "app", pooler.LogKeyAddr, "127.0.0.1:5555")
	if err := client.Handler().Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	log.Debug("not at verbose 0")
	log.Warn("multi\nline", "k", 1)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (DEBUG stays out):\n%s", len(lines), out.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("line 1 is not JSON: %v\n%s", err, lines[0])
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatalf("line 2 is not JSON: %v\n%s", err, lines[1])
	}
	want := map[string]any{
		"level": "LOG", "msg": "login attempt: db=appdb user=app tls=no", "pid": float64(os.Getpid()),
		"conn": "C-7", "db": "appdb", "user": "app", "addr": "127.0.0.1:5555",
	}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("%s = %#v, want %#v (line %s)", k, first[k], v, lines[0])
		}
	}
	ts, _ := first["time"].(string)
	got, err := time.Parse("2006-01-02T15:04:05.000Z07:00", ts)
	if err != nil || !got.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("time %q (%v), want %v with milliseconds and an offset", ts, err, at)
	}
	if second["level"] != "WARNING" || second["msg"] != "multi\nline" || second["k"] != float64(1) {
		t.Errorf("line 2 = %s", lines[1])
	}
	out.Reset()
	format = "text"
	log.Info("back to text")
	if !strings.Contains(out.String(), "] LOG back to text\n") {
		t.Errorf("after log_format = text: %q", out.String())
	}
}

// System errors in log lines are in the C library's words, text and JSON
// alike: PgBouncer's log watchers match "No such file or directory".
func TestHandlerErrnoText(t *testing.T) {
	_, err := os.Open("/nonexistent/pgturnstile.log")
	msg := "Cannot open logfile: '/nonexistent/pgturnstile.log': " + err.Error()
	want := "Cannot open logfile: '/nonexistent/pgturnstile.log': open /nonexistent/pgturnstile.log: No such file or directory"
	var out bytes.Buffer
	h := newHandler(&out, 0)
	handle(t, h, slog.LevelError, msg)
	if !strings.HasSuffix(strings.TrimSpace(out.String()), want) {
		t.Errorf("text line %q, want it to end %q", out.String(), want)
	}
	out.Reset()
	h.setFormat(func() string { return "json" })
	handle(t, h, slog.LevelError, msg)
	var rec map[string]any
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["msg"] != want {
		t.Errorf("JSON msg %q, want %q", rec["msg"], want)
	}
}
