//go:build linux

package sockopt

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// setUserTimeout sets TCP_USER_TIMEOUT (milliseconds).
func setUserTimeout(c TCPSocket, ms int) error {
	return setIntOpt(c, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
}

// SetDeferAccept sets TCP_DEFER_ACCEPT to 1 second or clears it, as
// PgBouncer's tune_accept (whose docs say 45; its code sets 1).
func SetDeferAccept(ln net.Listener, on bool) error {
	v := 0
	if on {
		v = 1
	}
	return setIntOpt(ln.(syscall.Conn), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, v)
}

// SetBacklog calls listen(2) again on a listening socket: Linux then
// takes the new backlog (capped by net.core.somaxconn, as for PgBouncer).
func SetBacklog(ln net.Listener, backlog int) error {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = unix.Listen(int(fd), backlog) }); err != nil {
		return err
	}
	return lerr
}

func setIntOpt(sc syscall.Conn, level, opt, v int) error {
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = rawSetsockoptInt(fd, level, opt, v) }); err != nil {
		return err
	}
	return serr
}

// setKeepalive sets SO_KEEPALIVE and, when on, TCP_KEEPIDLE, TCP_KEEPINTVL
// and TCP_KEEPCNT where ka's field is not negative (whole seconds).
func setKeepalive(c TCPSocket, ka net.KeepAliveConfig) error {
	if nc, ok := c.(*netpoll.Conn); ok {
		// Every connection accepted: without the interface, k and its
		// method value stay on the stack.
		k := keepaliveSetter{ka: ka}
		if err := nc.Control(k.apply); err != nil {
			return err
		}
		return k.err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	k := &keepaliveSetter{ka: ka}
	if err := rc.Control(k.apply); err != nil {
		return err
	}
	return k.err
}

// keepaliveSetter is setKeepalive's work on a descriptor.
type keepaliveSetter struct {
	ka  net.KeepAliveConfig
	err error
}

func (k *keepaliveSetter) apply(fd uintptr) {
	if !k.ka.Enable {
		k.set(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 0)
		return
	}
	k.set(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	if k.ka.Idle >= 0 {
		k.set(fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, seconds(k.ka.Idle))
	}
	if k.ka.Interval >= 0 {
		k.set(fd, unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, seconds(k.ka.Interval))
	}
	if k.ka.Count >= 0 {
		k.set(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT, k.ka.Count)
	}
}

func (k *keepaliveSetter) set(fd uintptr, level, opt, v int) {
	if k.err == nil {
		k.err = rawSetsockoptInt(fd, level, opt, v)
	}
}

// seconds is d in whole seconds, rounded up, at least 1.
func seconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// rawSetsockoptInt is setsockopt(2) made with RawSyscall (see recvPeek):
// on every connection accepted, so it must not wake sysmon.
func rawSetsockoptInt(fd uintptr, level, opt, v int) error {
	v32 := int32(v)
	_, _, e := syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, fd, uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&v32)), unsafe.Sizeof(v32), 0)
	if e != 0 {
		return os.NewSyscallError("setsockopt", e)
	}
	return nil
}

// osKeepalive is the kernel's keepalive defaults (net.ipv4.tcp_keepalive_*),
// read once; a field is 0 where it could not be read.
var osKeepalive = sync.OnceValue(func() (d struct{ idle, intvl, cnt int }) {
	read := func(name string) int {
		b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
		if err != nil {
			return 0
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	d.idle, d.intvl, d.cnt = read("tcp_keepalive_time"), read("tcp_keepalive_intvl"), read("tcp_keepalive_probes")
	return d
})

// keepaliveDefaults fills the fields of ka left unchanged (negative) with
// the OS defaults, on a socket where Go may have set its own.
func keepaliveDefaults(ka *net.KeepAliveConfig) {
	d := osKeepalive()
	if ka.Idle < 0 && d.idle > 0 {
		ka.Idle = time.Duration(d.idle) * time.Second
	}
	if ka.Interval < 0 && d.intvl > 0 {
		ka.Interval = time.Duration(d.intvl) * time.Second
	}
	if ka.Count < 0 && d.cnt > 0 {
		ka.Count = d.cnt
	}
}

// buffersBeforeHandshake: tcp_socket_buffer is set on the listeners and
// on server sockets before connect (setSocketBuffers), so an accepted or
// dialled connection has its sizes already.
const buffersBeforeHandshake = true

// setSocketBuffers sets SO_SNDBUF and SO_RCVBUF to n on a socket not yet
// connected or listening (tcp_socket_buffer).
func setSocketBuffers(rc syscall.RawConn, n int) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n); serr != nil {
			serr = fmt.Errorf("setsockopt/SO_SNDBUF: %w", serr)
			return
		}
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n); serr != nil {
			serr = fmt.Errorf("setsockopt/SO_RCVBUF: %w", serr)
		}
	})
	if err != nil {
		return err
	}
	return serr
}
