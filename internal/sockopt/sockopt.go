// Package sockopt sets the socket options of a pooler's connections and
// listeners in PgBouncer's terms (tune_socket, tune_accept, listen_backlog,
// so_reuseport, unix_socket_mode and unix_socket_group).
package sockopt

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// Socket options, as PgBouncer's tune_socket sets them on every client and
// server TCP connection (Unix sockets get none): SO_KEEPALIVE on or off
// (tcp_keepalive), and when on TCP_KEEPIDLE, TCP_KEEPINTVL and TCP_KEEPCNT
// where set; TCP_USER_TIMEOUT (tcp_user_timeout); SO_SNDBUF and SO_RCVBUF
// (tcp_socket_buffer). A value of 0 leaves the OS default. They are read
// at each accept and dial, so a RELOAD or SET applies to new connections.
//
// The buffer sizes must be in place before the connection is made, as
// PgBouncer's tune_socket has them (on the listening socket before listen,
// on a server socket before connect): the receive buffer decides the TCP
// window scale offered in the handshake. Shrinking it on a connection that
// already agreed a large scale (127.0.0.1's 64 KiB MSS and scale 7) left
// the receiver announcing windows the sender would not fill, and a base
// backup relayed with 4096-byte buffers stalled with every side waiting
// to read. So the listeners carry the sizes (accepted sockets inherit
// them, and a RELOAD that changes them re-applies them to the listeners
// open) and the server dialer sets them in its Control hook (on Linux;
// elsewhere Tune sets them once connected).
//
// Go's net package would otherwise set its own keepalive (15 s idle, 15 s
// interval, 9 probes) on every accepted and dialled connection: the
// listeners opened here and the dialer ask it not to (KeepAlive -1), so
// that 0 means the OS default as in PgBouncer. Listeners handed over by
// an online restart or systemd (net.FileListener) cannot be asked, so on
// their connections the OS defaults are put back (keepaliveDefaults).
//
// On the listeners: listen_backlog, and TCP_DEFER_ACCEPT (tcp_defer_accept,
// Linux; 1 while the setting is non-zero, as PgBouncer's tune_accept),
// which a RELOAD that turns it on or off applies to the listeners open.

// Tune sets the tcp_* options of st on a client or server connection.
// restore puts the OS defaults back where a setting is 0 and Go's own
// keepalive may have been set (a connection from an inherited listener).
// TCPSocket is a TCP connection, of package net's or netpoll's.
type TCPSocket interface {
	net.Conn
	syscall.Conn
	SetReadBuffer(int) error
	SetWriteBuffer(int) error
}

// TCP is conn as a TCPSocket where it is a TCP connection (a Unix
// socket's has the same methods but takes no TCP options).
func TCP(conn net.Conn) (TCPSocket, bool) {
	switch c := conn.(type) {
	case *net.TCPConn:
		return c, true
	case *netpoll.Conn:
		return c, true
	}
	return nil, false
}

func Tune(c TCPSocket, st *config.Settings, restore bool) error {
	// A negative field leaves the option as it is (the OS default on a
	// socket Go was told not to touch).
	ka := net.KeepAliveConfig{Enable: st.TCPKeepalive, Idle: -1, Interval: -1, Count: -1}
	if ka.Enable {
		if st.TCPKeepIdle > 0 {
			ka.Idle = time.Duration(st.TCPKeepIdle) * time.Second
		}
		if st.TCPKeepIntvl > 0 {
			ka.Interval = time.Duration(st.TCPKeepIntvl) * time.Second
		}
		if st.TCPKeepCnt > 0 {
			ka.Count = st.TCPKeepCnt
		}
		if restore {
			keepaliveDefaults(&ka)
		}
	}
	if err := setKeepalive(c, ka); err != nil {
		return newTuneError(c, "socket_set_keepalive", err)
	}
	if st.TCPUserTimeout != 0 {
		if err := setUserTimeout(c, st.TCPUserTimeout); err != nil {
			return newTuneError(c, "setsockopt/TCP_USER_TIMEOUT", err)
		}
	}
	if n := st.TCPSocketBuffer; n != 0 && !buffersBeforeHandshake {
		// Where the listener and the dialer could not set them (see
		// above), once connected.
		if err := c.SetWriteBuffer(n); err != nil {
			return newTuneError(c, "setsockopt/SO_SNDBUF", err)
		}
		if err := c.SetReadBuffer(n); err != nil {
			return newTuneError(c, "setsockopt/SO_RCVBUF", err)
		}
	}
	return nil
}

// tuneError is an option Tune could not set; it reads as PgBouncer's
// warning, "ERRPOS(FD) failed: STRERROR", and the connection is dropped.
type tuneError struct {
	pos string
	fd  int
	err error
}

func newTuneError(c TCPSocket, pos string, err error) *tuneError {
	e := &tuneError{pos: pos, fd: -1, err: err}
	if rc, rerr := c.SyscallConn(); rerr == nil {
		rc.Control(func(fd uintptr) { e.fd = int(fd) })
	}
	return e
}

func (e *tuneError) Error() string {
	text := e.err.Error()
	var errno syscall.Errno
	if errors.As(e.err, &errno) {
		// strerror's text: Go's is the same, uncapitalised.
		text = errno.Error()
		if text != "" {
			text = strings.ToUpper(text[:1]) + text[1:]
		}
	}
	return fmt.Sprintf("%s(%d) failed: %s", e.pos, e.fd, text)
}

func (e *tuneError) Unwrap() error { return e.err }

// listenConfig is how the pooler's own listeners are opened: SO_REUSEPORT
// before the bind when so_reuseport is on, and no keepalive of Go's on
// the connections accepted (Tune sets PgBouncer's).
func listenConfig(reusePort bool) net.ListenConfig {
	lc := net.ListenConfig{KeepAlive: -1}
	if reusePort {
		lc.Control = setReusePort
	}
	return lc
}

// defaultServerDialer dials Postgres without Go's keepalive (Tune sets
// PgBouncer's once connected).
var defaultServerDialer = &net.Dialer{KeepAlive: -1}

// ServerDialer is defaultServerDialer, with tcp_socket_buffer applied to a TCP
// socket before it connects when the setting is on.
func ServerDialer(st *config.Settings) *net.Dialer {
	n := st.TCPSocketBuffer
	if n == 0 {
		return defaultServerDialer
	}
	return &net.Dialer{KeepAlive: -1, Control: func(network, _ string, rc syscall.RawConn) error {
		if !strings.HasPrefix(network, "tcp") {
			return nil
		}
		return setSocketBuffers(rc, n)
	}}
}

// SetListenerBuffers gives a TCP listener tcp_socket_buffer's sizes, which
// the connections it accepts from then on start with (0: nothing to set).
func SetListenerBuffers(ln net.Listener, n int) error {
	if n == 0 {
		return nil
	}
	rc, err := ln.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	return setSocketBuffers(rc, n)
}

// ChownUnixSocket gives the Unix socket file unix_socket_group (a name or
// a number) and unix_socket_mode, as PgBouncer's change_file_mode, whose
// failures are fatal and whose messages these are; an abstract socket is
// left alone, as PgBouncer does.
func ChownUnixSocket(path string, mode int, group string) error {
	if strings.HasPrefix(path, "@") {
		// An abstract socket (unix_socket_dir = @name) has no file.
		return nil
	}
	if group != "" {
		gid, err := strconv.Atoi(group)
		if err != nil {
			g, lerr := user.LookupGroup(group)
			if lerr != nil {
				return fmt.Errorf("could not find group '%s': %v", group, lerr)
			}
			gid, _ = strconv.Atoi(g.Gid)
		}
		if err := os.Chown(path, -1, gid); err != nil {
			return fmt.Errorf("chown(%s, %d, %d) failed: %v", path, uint32(0xffffffff), gid, unwrapPathErr(err))
		}
	}
	if err := os.Chmod(path, os.FileMode(mode)&os.ModePerm|unixModeBits(mode)); err != nil {
		return fmt.Errorf("failure to chmod(%s, 0%o): %v", path, mode, unwrapPathErr(err))
	}
	return nil
}

// unixModeBits maps the setuid, setgid and sticky bits of a C mode to
// Go's FileMode bits.
func unixModeBits(mode int) os.FileMode {
	var m os.FileMode
	if mode&04000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&02000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&01000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// unwrapPathErr is strerror's text of an *os.PathError.
func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
