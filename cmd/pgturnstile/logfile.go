package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"github.com/pgturnstile/pgturnstile/config"
)

// logOutput is where log lines go: the logfile when one is set, and
// stderr unless -q. The logfile can be reopened while lines are being
// written (reopen), which is how log rotation works:
//
//   - mv pgbouncer.log pgbouncer.log.1, then SIGHUP or RELOAD: the next
//     line goes to a new pgbouncer.log, as PgBouncer's reset_logging does;
//   - logrotate's copytruncate: the file is opened with O_APPEND, so after
//     the truncation each write lands at the new end of the file instead
//     of at the old offset, which would leave a hole of NUL bytes.
type logOutput struct {
	mu     sync.Mutex
	path   string   // the logfile's setting when it was opened; "" = none
	file   *os.File // nil when path is ""
	stderr io.Writer
}

// openLogfile opens path for appending, creating it if needed.
func openLogfile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
}

// newLogOutput opens the logfile (path, when not empty); stderr is nil
// under -q.
func newLogOutput(path string, stderr io.Writer) (*logOutput, error) {
	o := &logOutput{path: path, stderr: stderr}
	if path != "" {
		f, err := openLogfile(path)
		if err != nil {
			return nil, fmt.Errorf("cannot open logfile: %v", err)
		}
		o.file = f
	}
	return o, nil
}

// Write writes one whole line to the logfile and to stderr; the first
// error is returned, after both have been tried.
func (o *logOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var err error
	if o.file != nil {
		_, err = o.file.Write(p)
	}
	if o.stderr != nil {
		if _, e := o.stderr.Write(p); err == nil {
			err = e
		}
	}
	return len(p), err
}

// reopen closes the logfile and opens path, the logfile setting in force
// (a RELOAD may have changed it; "" stops file logging). The old file is
// closed only once the new one is open: when the new one cannot be
// opened, lines keep going to the old one and the error is returned
// (PgBouncer exits instead; losing the pooler over its log is worse).
func (o *logOutput) reopen(path string) error {
	var f *os.File
	if path != "" {
		var err error
		if f, err = openLogfile(path); err != nil {
			return err
		}
	}
	o.mu.Lock()
	old := o.file
	o.file, o.path = f, path
	o.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// Close closes the logfile.
func (o *logOutput) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.file != nil {
		o.file.Close()
		o.file = nil
	}
}

// stderrUnless is stderr, or nil under -q.
func stderrUnless(quiet bool, stderr io.Writer) io.Writer {
	if quiet {
		return nil
	}
	return stderr
}

// reopenLogs is what RELOAD and SIGHUP do to the logs, as PgBouncer's
// reset_logging after each load_config: the logfile is closed and opened
// again (at the logfile setting in force) and syslog reconnected with its
// settings in force.
func reopenLogs(log *slog.Logger, out *logOutput, sys *syslogSink, st *config.Settings) {
	if err := out.reopen(st.Logfile); err != nil {
		// PgBouncer's words (it exits after them).
		reason := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err
		}
		log.Error(fmt.Sprintf("Cannot open logfile: '%s': %v", st.Logfile, reason))
	}
	sys.reset(log, st)
}
