package main

import (
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/pgturnstile/pgturnstile/config"
)

// listenFDsStart is SD_LISTEN_FDS_START: systemd passes its listening
// sockets as the descriptors from 3 on.
const listenFDsStart = 3

// listenEnv is what systemd sets for socket activation (sd_listen_fds(3)).
var listenEnv = []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}

// listenFDs reads systemd's socket activation variables as
// sd_listen_fds(unset_environment=1) does, and unsets them in every case so
// that no process we start (-d's daemon included) takes the sockets for
// its own. It returns how many descriptors from listenFDsStart on were
// passed to process pid, and their names (LISTEN_FDNAMES, when it names
// each of them; else nil). As sd_listen_fds, it returns 0 when the
// variables are missing, malformed, or meant for another process
// (LISTEN_PID is not pid); the process then binds listen_addr and
// unix_socket_dir itself, as PgBouncer does.
func listenFDs(pid int) (n int, names []string) {
	pidText, fdsText, namesText := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	for _, k := range listenEnv {
		os.Unsetenv(k)
	}
	if p, err := strconv.Atoi(pidText); err != nil || p != pid {
		return 0, nil
	}
	n, err := strconv.Atoi(fdsText)
	if err != nil || n <= 0 {
		return 0, nil
	}
	if namesText != "" {
		if names = strings.Split(namesText, ":"); len(names) != n {
			names = nil
		}
	}
	return n, names
}

// activation is what systemd passed (socket activation: a .socket unit,
// or systemd-socket-activate), taken by takeActivation first thing, while
// the descriptors from 3 on are still only the passed ones (no logfile or
// syslog socket opened yet that a wrong LISTEN_FDS could name).
type activation struct {
	start int            // the first passed descriptor
	n     int            // how many were passed; 0: not activated
	lns   []net.Listener // one for each, when err is nil
	err   error          // a descriptor that is not a listening stream socket
}

// listeners returns the passed sockets for pooler.WithListeners, or nil
// when none were passed. As PgBouncer's pooler_setup, it warns that
// listen_addr, and a unix_socket_dir other than the default /tmp, are then
// ignored (Listen binds nothing of its own), and logs each descriptor. A
// descriptor that is not a listening TCP or Unix stream socket is an
// error: the caller logs it FATAL and exits 1.
//
// With -d (daemon: this process only starts the daemon) none are served:
// PgBouncer forks before it looks, and its daemon, whose pid is not
// LISTEN_PID, binds its own; ours, started again without the variables,
// does the same, and the passed sockets are closed here so that it does
// not inherit them.
func (a *activation) listeners(st *config.Settings, log *slog.Logger, daemon bool) ([]net.Listener, error) {
	if daemon {
		for _, ln := range a.lns {
			ln.Close()
		}
		return nil, nil
	}
	if a.n == 0 {
		return nil, nil
	}
	if st.ListenAddr != "" {
		log.Warn("sockets passed from service manager, cf_listen_addr ignored")
	}
	if st.UnixSocketDir != "" && st.UnixSocketDir != "/tmp" {
		log.Warn("sockets passed from service manager, cf_unix_socket_dir ignored")
	}
	if a.err != nil {
		return nil, a.err
	}
	for i := range a.lns {
		log.Info("socket passed from service manager (fd " + strconv.Itoa(a.start+i) + ")")
	}
	return a.lns, nil
}
