package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Rotation by rename: after mv and reopen (SIGHUP, RELOAD), lines go to a
// new file at the logfile's path and the renamed one keeps the old lines;
// stderr gets every line throughout.
func TestLogOutputReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pgbouncer.log")
	var stderr bytes.Buffer
	o, err := newLogOutput(path, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Write([]byte("before\n"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("between\n"))
	if err := o.reopen(path); err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("after\n"))
	if got := readFile(t, path+".1"); got != "before\nbetween\n" {
		t.Errorf("rotated file = %q", got)
	}
	if got := readFile(t, path); got != "after\n" {
		t.Errorf("new file = %q", got)
	}
	if got := stderr.String(); got != "before\nbetween\nafter\n" {
		t.Errorf("stderr = %q", got)
	}
}

// copytruncate: the file is copied and truncated in place while open;
// the next line lands at the new end (O_APPEND), so the file starts with
// it, not with a hole of NUL bytes as long as what was there before.
func TestLogOutputCopytruncate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pgbouncer.log")
	o, err := newLogOutput(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Write([]byte("a line before the rotation\n"))
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("after\n"))
	if got := readFile(t, path); got != "after\n" {
		t.Errorf("file after truncate = %q, want %q", got, "after\n")
	}
}

// A logfile that cannot be reopened (its directory gone) is an error, and
// lines keep going to the file already open rather than nowhere.
func TestLogOutputReopenFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pgbouncer.log")
	o, err := newLogOutput(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := o.reopen(filepath.Join(dir, "missing", "x.log")); err == nil {
		t.Fatal("reopen in a missing directory succeeded")
	}
	o.Write([]byte("still here\n"))
	if got := readFile(t, path); got != "still here\n" {
		t.Errorf("file = %q", got)
	}
	// "" (logfile removed from the config) stops file logging.
	if err := o.reopen(""); err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("stderr only\n"))
	if got := readFile(t, path); got != "still here\n" {
		t.Errorf("file after logfile = \"\": %q", got)
	}
}

// RELOAD with a logfile that cannot be opened logs PgBouncer's words for
// it, in the file still open.
func TestReopenLogsFailureLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pgbouncer.log")
	o, err := newLogOutput(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	st := config.Settings{Logfile: filepath.Join(dir, "missing", "x.log")}
	log, sys := withSyslog(slog.New(newHandler(o, 0)), &st)
	defer sys.Close()
	reopenLogs(log, o, sys, &st)
	want := "ERROR Cannot open logfile: '" + st.Logfile + "': No such file or directory\n"
	if got := readFile(t, path); !strings.HasSuffix(got, want) {
		t.Errorf("log = %q, want a line ending %q", got, want)
	}
}
