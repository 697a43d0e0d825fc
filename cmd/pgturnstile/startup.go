package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/listener"
	"github.com/pgturnstile/pgturnstile/internal/takeover"
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
	// activated: systemd passed the listeners (socket activation).
	activated bool
	// tookOver: an online restart committed (the old process let go);
	// noPidfile: its pidfile could not be checked, none is written.
	tookOver, noPidfile bool
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
//
// With -R (reboot) the Unix socket and the pidfile are the running
// process's, which the takeover replaces: those two guards wait for
// takeOver, which runs them only if there is no process to take over.
// activated: the listeners are systemd's (socket activation), so the
// Unix socket is not ours to check, as PgBouncer's check_old_process_unix.
func beforeListen(cfg *config.Config, flagUser string, daemon, reboot, logCreated, activated bool, log *slog.Logger, stderr io.Writer) (s *startup, code int) {
	st := &cfg.Settings
	s = &startup{log: log, settings: st, activated: activated}
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
	if !reboot && !s.processGuards() {
		return nil, 1
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

// processGuards refuses a live Unix socket and a live pidfile (another
// instance runs) and removes a stale pidfile; false when the process must
// exit 1 (logged FATAL).
func (s *startup) processGuards() bool {
	st, log := s.settings, s.log
	// With listen_port = 0 (tests) the socket's name is known only after
	// the TCP bind; Listen applies the same guard then.
	if st.UnixSocketDir != "" && st.ListenPort != 0 && !s.activated {
		if err := listener.CheckUnixSocket(listener.UnixSocketPath(st.UnixSocketDir, st.ListenPort)); err != nil {
			fatal(log, err.Error())
			return false
		}
	}
	stale, err := checkPidfile(st.Pidfile)
	if err != nil {
		fatal(log, err.Error())
		return false
	}
	if stale {
		log.Info("stale pidfile, removing")
	}
	return true
}

// takeOver is -R's first step: the running process's listeners and
// clients, received (takeover.TakeOver) once this process runs as its user,
// and still the old process's until commitTakeover. nil with true when
// there is no running process: the start goes on as a normal one, with
// the guards -R put off. false: exit 1 (logged FATAL; the old process
// goes on).
func (s *startup) takeOver() (*takeover.Handover, bool) {
	st := s.settings
	if st.UnixSocketDir == "" {
		fatal(s.log, "online restart (-R) needs unix_socket_dir: the takeover goes through the console's Unix socket")
		return nil, false
	}
	if s.target != nil {
		// The old process lets only its own OS user in without a
		// password: become it first.
		if err := switchUser(s.target); err != nil {
			fatal(s.log, err.Error())
			return nil, false
		}
		s.target = nil
	}
	path := listener.UnixSocketPath(st.UnixSocketDir, st.ListenPort)
	s.log.Info("takeover_init: launching connection")
	h, err := takeover.TakeOver(path, st.SuspendTimeout)
	switch {
	case errors.Is(err, takeover.ErrNoOldProcess):
		s.log.Info("old process not found, try to continue normally")
		return nil, s.processGuards()
	case errors.Is(err, takeover.ErrRefused):
		fatal(s.log, err.Error())
		return nil, false
	case err != nil:
		fatal(s.log, "takeover failed: "+err.Error())
		return nil, false
	}
	return h, true
}

// commitTakeover is -R's last step, once everything that can fail has
// been done (the service built, the listeners and the metrics port
// ready, the pidfile's directory writable): the old process lets go
// (Handover.Commit) and removes its pidfile. false: exit 1 (logged FATAL);
// the caller aborts the takeover and the old process goes on.
func (s *startup) commitTakeover(h *takeover.Handover) bool {
	st := s.settings
	if st.Pidfile != "" {
		// The pidfile is written after the old process let go: find
		// out now, while it can still go on, whether it can be.
		f, err := os.CreateTemp(filepath.Dir(st.Pidfile), ".pgturnstile-pid-*")
		if err != nil {
			fatal(s.log, fmt.Sprintf("could not open pidfile '%s': %v", st.Pidfile, errnoText(err)))
			return false
		}
		f.Close()
		os.Remove(f.Name())
	}
	if err := h.Commit(); err != nil {
		fatal(s.log, "takeover failed: SHUTDOWN: "+err.Error())
		return false
	}
	s.log.Info("old process handed over " + strconv.Itoa(len(h.Listeners)) + " listening sockets, " + strconv.Itoa(len(h.Clients)) + " clients and " + strconv.Itoa(len(h.Servers)) + " servers")
	if st.Pidfile != "" {
		// The old process removes its pidfile when it lets go; wait
		// for that, as PgBouncer does.
		s.log.Info("waiting for old pidfile to go away")
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(st.Pidfile); errors.Is(err, fs.ErrNotExist) {
				break
			}
		}
		if stale, err := checkPidfile(st.Pidfile); err != nil {
			// Too late to give anything back: serve without
			// a pidfile rather than not at all.
			s.log.Error(err.Error())
			s.noPidfile = true
		} else if stale {
			s.log.Info("stale pidfile, removing")
		}
	}
	s.tookOver = true
	return true
}

// afterListen switches to the target user, writes the pidfile and tells
// -d's parent we are up. It returns false when the process must exit 1
// (logged FATAL). After a takeover the old process has let go of
// everything: a pidfile that cannot be written is logged, and the process
// serves on.
func (s *startup) afterListen() bool {
	if s.target != nil {
		if err := switchUser(s.target); err != nil {
			fatal(s.log, err.Error())
			return false
		}
	}
	if !s.noPidfile {
		pid, err := writePidfile(s.settings.Pidfile)
		switch {
		case err != nil && s.tookOver:
			s.log.Error(err.Error())
		case err != nil:
			fatal(s.log, err.Error())
			return false
		}
		s.pid = pid
	}
	daemonReady()
	return true
}

// exit removes the pidfile if it is still ours.
func (s *startup) exit() { s.pid.remove() }
