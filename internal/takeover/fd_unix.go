//go:build !windows

package takeover

import (
	"net"
	"os"
	"syscall"
)

// Sender is the old process's side of passing descriptors: it writes msg
// to the console's client over conn, a Unix socket, with fd attached to
// msg's first byte (SCM_RIGHTS), after flush has written what the console
// wrote before it. nil when conn is no Unix socket: nothing passes then.
func Sender(conn net.Conn, flush func() error) func(msg []byte, fd int) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil
	}
	return func(msg []byte, fd int) error {
		if err := flush(); err != nil {
			return err
		}
		n, _, err := uc.WriteMsgUnix(msg, syscall.UnixRights(fd), nil)
		if err != nil {
			return err
		}
		if n < len(msg) {
			// A stream socket may take part of it: the rest follows
			// as plain bytes, the descriptor went with the first.
			_, err = uc.Write(msg[n:])
		}
		return err
	}
}

// Dup duplicates a descriptor (close-on-exec); -1 on failure.
func Dup(fd int) int {
	syscall.ForkLock.RLock()
	nfd, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(nfd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1
	}
	return nfd
}

// DupSocket duplicates the descriptor under a listener or connection of
// package net; -1 on failure (or for anything else, a TLS conn included).
func DupSocket(v any) int {
	sc, ok := v.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(s uintptr) { fd = Dup(int(s)) })
	return fd
}

// Close closes a descriptor Dup made or a row came with.
func Close(fd int) { syscall.Close(fd) }

// FileConn makes a net.Conn of a descriptor handed over; fd is closed
// (the conn holds a duplicate).
func FileConn(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "server")
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
	return conn, nil
}
