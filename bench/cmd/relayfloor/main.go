//go:build linux

// Command relayfloor is a measuring stick for issue 6's plan: a TCP relay
// with no pooling and no protocol work, in two designs, so that `pgbench`
// through it shows what the relaying alone costs in Go.
//
//   - goroutines: a goroutine per direction, net.Conn reads and writes (the
//     runtime's netpoller parks and wakes them);
//   - epoll: one locked OS thread runs an epoll loop over raw descriptors,
//     as PgBouncer's libevent loop does; -raw makes its reads and writes
//     RawSyscalls, which skip the runtime's syscall bookkeeping.
//
// Each client connection gets its own connection to -to (no pooling), so
// pgbench logs in to PostgreSQL straight through it. Measure the relay's CPU
// per transaction as for the poolers (bench/README.md, "The floor of a Go
// relay").
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

func main() {
	mode := flag.String("mode", "epoll", "goroutines or epoll")
	listen := flag.String("listen", "127.0.0.1:24000", "address to listen on")
	to := flag.String("to", "127.0.0.1:5432", "address to relay to (PostgreSQL)")
	raw := flag.Bool("raw", false, "epoll: reads and writes as RawSyscall")
	flag.Parse()
	var err error
	switch *mode {
	case "goroutines":
		var ln net.Listener
		if ln, err = net.Listen("tcp", *listen); err == nil {
			err = relayGoroutines(ln, *to)
		}
	case "epoll":
		var l *epollRelay
		if l, err = newEpollRelay(*listen, *to, *raw); err == nil {
			fmt.Fprintln(os.Stderr, "relayfloor: epoll loop on", l.addr)
			err = l.run()
		}
	default:
		err = fmt.Errorf("-mode must be goroutines or epoll")
	}
	log.Fatal("relayfloor: ", err)
}

// relayGoroutines relays every connection accepted on ln to to, with a
// goroutine per direction.
func relayGoroutines(ln net.Listener, to string) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				return
			}
			go copyThenClose(s, c)
			copyThenClose(c, s)
		}()
	}
}

// copyThenClose copies src to dst with plain Read and Write (io.Copy would
// splice, which no pooler can do: it has to see the messages).
func copyThenClose(dst, src net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

// epollRelay is the event-loop design: one thread, one epoll set, every
// descriptor non-blocking, a descriptor's readiness handled by reading it
// once and writing what came to its peer.
type epollRelay struct {
	lfd, ep int
	addr    netip.AddrPort
	to      netip.AddrPort
	raw     bool
	peer    map[int]int
}

func newEpollRelay(listen, to string, raw bool) (*epollRelay, error) {
	la, err := netip.ParseAddrPort(listen)
	if err != nil {
		return nil, err
	}
	ta, err := netip.ParseAddrPort(to)
	if err != nil {
		return nil, err
	}
	if !la.Addr().Is4() || !ta.Addr().Is4() {
		return nil, errors.New("IPv4 addresses only")
	}
	lfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	syscall.SetsockoptInt(lfd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(lfd, &syscall.SockaddrInet4{Port: int(la.Port()), Addr: la.Addr().As4()}); err != nil {
		syscall.Close(lfd)
		return nil, err
	}
	if err := syscall.Listen(lfd, 1024); err != nil {
		syscall.Close(lfd)
		return nil, err
	}
	sa, err := syscall.Getsockname(lfd)
	if err != nil {
		syscall.Close(lfd)
		return nil, err
	}
	in4 := sa.(*syscall.SockaddrInet4)
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		syscall.Close(lfd)
		return nil, err
	}
	l := &epollRelay{lfd: lfd, ep: ep, addr: netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)), to: ta, raw: raw, peer: map[int]int{}}
	if err := l.watch(lfd); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *epollRelay) watch(fd int) error {
	return syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)})
}

// run is the loop; it returns only on an epoll error.
func (l *epollRelay) run() error {
	runtime.LockOSThread()
	evs := make([]syscall.EpollEvent, 256)
	buf := make([]byte, 16<<10)
	for {
		n, err := syscall.EpollWait(l.ep, evs, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		for _, ev := range evs[:n] {
			fd := int(ev.Fd)
			if fd == l.lfd {
				l.acceptAll()
				continue
			}
			if p, ok := l.peer[fd]; ok {
				l.forward(fd, p, buf)
			}
		}
	}
}

func (l *epollRelay) acceptAll() {
	for {
		cfd, _, err := syscall.Accept4(l.lfd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: all taken
		}
		sfd, err := l.dial()
		if err != nil {
			syscall.Close(cfd)
			continue
		}
		for _, fd := range []int{cfd, sfd} {
			syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		}
		l.peer[cfd], l.peer[sfd] = sfd, cfd
		if l.watch(cfd) != nil || l.watch(sfd) != nil {
			l.closePair(cfd, sfd)
		}
	}
}

// dial connects to the target; the connect blocks (a login is not what is
// measured), then the descriptor turns non-blocking.
func (l *epollRelay) dial() (int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(l.to.Port()), Addr: l.to.Addr().As4()}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// forward reads fd once (a message batch fits the buffer; a longer one
// comes back as the next event, the descriptor being level-triggered) and
// writes what it read to p.
func (l *epollRelay) forward(fd, p int, buf []byte) {
	n, err := l.read(fd, buf)
	if err == syscall.EAGAIN {
		return
	}
	if err != nil || n == 0 {
		l.closePair(fd, p)
		return
	}
	if err := l.writeAll(p, buf[:n]); err != nil {
		l.closePair(fd, p)
	}
}

// writeAll writes b to fd; when the peer's socket buffer is full it waits
// for it in blocking mode, which stalls the whole loop. pgbench's messages
// never fill a socket buffer; a pooler would watch for EPOLLOUT instead.
func (l *epollRelay) writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := l.write(fd, b)
		if err == syscall.EAGAIN {
			if err := syscall.SetNonblock(fd, false); err != nil {
				return err
			}
			n, err = syscall.Write(fd, b)
			if serr := syscall.SetNonblock(fd, true); err == nil {
				err = serr
			}
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (l *epollRelay) closePair(a, b int) {
	for _, fd := range []int{a, b} {
		syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_DEL, fd, nil)
		syscall.Close(fd)
		delete(l.peer, fd)
	}
}

func (l *epollRelay) read(fd int, b []byte) (int, error) {
	if !l.raw {
		return syscall.Read(fd, b)
	}
	return rawIO(syscall.SYS_READ, fd, b)
}

func (l *epollRelay) write(fd int, b []byte) (int, error) {
	if !l.raw {
		return syscall.Write(fd, b)
	}
	return rawIO(syscall.SYS_WRITE, fd, b)
}

// rawIO is read(2) or write(2) as a RawSyscall: on a non-blocking
// descriptor it cannot block, so the runtime need not know it is in the
// kernel.
func rawIO(trap uintptr, fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
