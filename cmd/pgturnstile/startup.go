package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/pooler"
)

// levelFatal is PgBouncer's FATAL: the line it logs before it exits.
const levelFatal = slog.LevelError + 4

// startup carries PgBouncer's process guards through the start, in its
// order: the user to become, no root, no live Unix socket, no live
// pidfile, then -d; the listeners open; then (pgturnstile binds first, so
// that root can still bind a port below 1024) the switch to the user, the
// pidfile, and the daemon's parent is told we are up.
type startup struct {
	log      *slog.Logger
	settings *config.Settings
	target   *target // user to switch to after the listeners open; nil: none
	pid      *pidfile
}

// logfileMissing reports whether the logfile is yet to be created; called
// before it is opened, for chownNewLogfile.
func logfileMissing(path string) bool {
	if path == "" {
		return false
	}
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// fatal logs msg as PgBouncer's die() does.
func fatal(log *slog.Logger, msg string) {
	log.Log(context.Background(), levelFatal, msg)
}

// beforeListen runs the guards that come before the listeners. It returns
// code >= 0 when the process must exit now with that code: a guard
// refused (logged FATAL), or this is -d's parent and the daemon is up.
// activated: the listeners are systemd's (socket activation), so the
// Unix socket is not ours to check, as PgBouncer's check_old_process_unix.
func beforeListen(cfg *config.Config, flagUser string, daemon, logCreated, activated bool, log *slog.Logger, stderr io.Writer) (s *startup, code int) {
	st := &cfg.Settings
	s = &startup{log: log, settings: st}
	t, err := lookupTarget(flagUser, st.User)
	if err != nil {
		fatal(log, err.Error())
		return nil, 1
	}
	if err := checkRoot(t); err != nil {
		fatal(log, err.Error())
		return nil, 1
	}
	if t != nil {
		if os.Getuid() == 0 {
			s.target = t
			// Now, not at the switch: -d's parent created it, and its
			// child finds it there.
			chownNewLogfile(st.Logfile, logCreated, t)
		} else if err := switchUser(t); err != nil {
			// Not root: nothing to keep for the bind, so switch (or
			// fail: another user needs root) now, as PgBouncer does.
			fatal(log, err.Error())
			return nil, 1
		}
	}
	// With listen_port = 0 (tests) the socket's name is known only after
	// the TCP bind; Listen applies the same guard then.
	if st.UnixSocketDir != "" && st.ListenPort != 0 && !activated {
		if err := pooler.CheckUnixSocket(pooler.UnixSocketPath(st.UnixSocketDir, st.ListenPort)); err != nil {
			fatal(log, err.Error())
			return nil, 1
		}
	}
	stale, err := checkPidfile(st.Pidfile)
	if err != nil {
		fatal(log, err.Error())
		return nil, 1
	}
	if stale {
		log.Info("stale pidfile, removing")
	}
	if daemon && !daemonChild() {
		if err := checkDaemonConfig(st); err != nil {
			fatal(log, err.Error())
			return nil, 1
		}
		return nil, daemonize(stderr)
	}
	return s, -1
}

// afterListen switches to the target user, writes the pidfile and tells
// -d's parent we are up. It returns false when the process must exit 1
// (logged FATAL).
func (s *startup) afterListen() bool {
	if s.target != nil {
		if err := switchUser(s.target); err != nil {
			fatal(s.log, err.Error())
			return false
		}
	}
	pid, err := writePidfile(s.settings.Pidfile)
	if err != nil {
		fatal(s.log, err.Error())
		return false
	}
	s.pid = pid
	daemonReady()
	return true
}

// exit removes the pidfile if it is still ours.
func (s *startup) exit() { s.pid.remove() }
