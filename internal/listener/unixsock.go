package listener

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ErrUnixSocketInUse is PgBouncer's refusal to start while another process
// listens on the Unix socket it would bind (check_old_process_unix).
var ErrUnixSocketInUse = errors.New("unix socket is in use, cannot continue")

// UnixSocketPath is the listening socket of unix_socket_dir for port, as
// PostgreSQL and PgBouncer name it.
func UnixSocketPath(dir string, port int) string {
	return filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
}

// ClearUnixSocket makes path free for our listener. A socket some process
// accepts connections on is live: ErrUnixSocketInUse, and it is left alone
// (removing it would leave that process running but unreachable). One whose
// connect is refused is stale (its process died without unlinking it) and
// is removed. Anything else (no file, not a socket, no permission to
// connect) is left for the bind to report.
func ClearUnixSocket(path string) error {
	err := probeUnixSocket(path)
	if err == nil {
		return ErrUnixSocketInUse
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	// connect(2) is refused on a regular file too: remove only a socket.
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// CheckUnixSocket is PgBouncer's check_old_process_unix, run before the
// pidfile check: ErrUnixSocketInUse when a process accepts on path. It
// removes nothing; Listen clears a stale socket when it binds.
func CheckUnixSocket(path string) error {
	if probeUnixSocket(path) == nil {
		return ErrUnixSocketInUse
	}
	return nil
}

// probeUnixSocket connects to path and hangs up: nil when a process
// accepts there.
func probeUnixSocket(path string) error {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}
