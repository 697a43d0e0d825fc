package main

import (
	"os"
	"strconv"
	"strings"
)

// listenFDsStart is SD_LISTEN_FDS_START: systemd passes its listening
// sockets as the descriptors from 3 on.
const listenFDsStart = 3

// listenEnv is what systemd sets for socket activation (sd_listen_fds(3)).
var listenEnv = []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}

// listenFDs reads systemd's socket activation variables as
// sd_listen_fds(unset_environment=1) does, and unsets them in every case so
// that no process we start takes the sockets for its own. It returns how
// many descriptors from listenFDsStart on were passed to this process, and
// their names (LISTEN_FDNAMES, when it names each of them; else nil). As
// sd_listen_fds, it returns 0 when the variables are missing, malformed, or
// meant for another process (LISTEN_PID is not ours: we are -d's daemon,
// or a child of the process they were set for); the process then binds
// listen_addr and unix_socket_dir itself, as PgBouncer does.
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
