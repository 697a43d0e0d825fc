package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// takeActivation takes the sockets systemd passed to this process, if it
// did; run calls it before it opens any descriptor of its own.
func takeActivation() *activation { return takeActivationFrom(listenFDsStart) }

// takeActivationFrom is takeActivation with the descriptors from start on
// (tests pass theirs above the ones the process holds).
func takeActivationFrom(start int) *activation {
	n, names := listenFDs(os.Getpid())
	if n == 0 {
		return &activation{}
	}
	lns, err := takeListenFDs(start, n, names)
	return &activation{start: start, n: n, lns: lns, err: err}
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
