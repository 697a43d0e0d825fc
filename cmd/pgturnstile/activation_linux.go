package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/pgturnstile/pgturnstile/config"
)

// activatedListeners takes the listening sockets systemd passed (socket
// activation: a .socket unit, or systemd-socket-activate) and returns them
// as listeners for pooler.WithListeners; nil when none were passed. As
// PgBouncer's pooler_setup, it warns that listen_addr, and a
// unix_socket_dir other than the default /tmp, are then ignored (Listen
// binds nothing of its own), and logs each descriptor it takes. A
// descriptor that is not a listening TCP or Unix stream socket is an
// error: the caller logs it FATAL and exits 1.
//
// With -d (daemon, in the process that starts the daemon) none are taken:
// PgBouncer forks before it looks, and its daemon, whose pid is not
// LISTEN_PID, binds its own; ours, started again, does the same.
func activatedListeners(st *config.Settings, log *slog.Logger, daemon bool) ([]net.Listener, error) {
	return activatedFrom(listenFDsStart, st, log, daemon)
}

// activatedFrom is activatedListeners with the descriptors from start on
// (tests pass theirs above the ones the process holds).
func activatedFrom(start int, st *config.Settings, log *slog.Logger, daemon bool) ([]net.Listener, error) {
	n, names := listenFDs(os.Getpid())
	if n == 0 || daemon {
		return nil, nil
	}
	if st.ListenAddr != "" {
		log.Warn("sockets passed from service manager, cf_listen_addr ignored")
	}
	if st.UnixSocketDir != "" && st.UnixSocketDir != "/tmp" {
		log.Warn("sockets passed from service manager, cf_unix_socket_dir ignored")
	}
	lns, err := takeListenFDs(start, n, names)
	if err != nil {
		return nil, err
	}
	for i := range lns {
		log.Info("socket passed from service manager (fd " + strconv.Itoa(start+i) + ")")
	}
	return lns, nil
}

// takeListenFDs makes listeners of the n descriptors from start on. Each
// listener holds a duplicate (close-on-exec, as sd_listen_fds marks them);
// the passed descriptor itself is closed, so that no process we start
// inherits it.
func takeListenFDs(start, n int, names []string) ([]net.Listener, error) {
	lns := make([]net.Listener, 0, n)
	fail := func(err error) ([]net.Listener, error) {
		for _, ln := range lns {
			ln.Close()
		}
		return nil, err
	}
	for i := 0; i < n; i++ {
		fd := start + i
		if err := checkListenFD(fd); err != nil {
			return fail(fmt.Errorf("socket passed from service manager (fd %d): %w", fd, err))
		}
		name := "LISTEN_FD_" + strconv.Itoa(fd)
		if names != nil {
			name = names[i]
		}
		f := os.NewFile(uintptr(fd), name)
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fail(fmt.Errorf("failed to set up socket passed from service manager (fd %d): %w", fd, err))
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// checkListenFD accepts what PgBouncer serves on (a Unix, IPv4 or IPv6
// socket) when it is a stream socket that listens: a datagram socket or
// one that was never listen(2)ed would fail each accept, later and
// without saying why.
func checkListenFD(fd int) error {
	domain, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_DOMAIN)
	if errors.Is(err, syscall.ENOTSOCK) {
		return errors.New("not a socket")
	}
	if err != nil {
		return err
	}
	if domain != syscall.AF_UNIX && domain != syscall.AF_INET && domain != syscall.AF_INET6 {
		return fmt.Errorf("address family %d, want a TCP or Unix stream socket", domain)
	}
	typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil {
		return err
	}
	if typ != syscall.SOCK_STREAM {
		return errors.New("not a stream socket, want a TCP or Unix stream socket (ListenStream=)")
	}
	listening, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	if err != nil {
		return err
	}
	if listening == 0 {
		return errors.New("not a listening socket (Accept=yes passes connections, not listeners)")
	}
	return nil
}
