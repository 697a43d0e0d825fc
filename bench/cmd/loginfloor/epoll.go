//go:build linux

package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// The event-loop design (-mode epoll): one goroutine locked to its thread
// runs an epoll loop over raw non-blocking descriptors, as PgBouncer's
// libevent loop does, and each client is an explicit state machine: the
// startup packet, the two SCRAM messages, then queries. The SCRAM
// arithmetic is written out here (pgturnstile's auth package holds a
// goroutine's conversation, which a loop cannot). Measuring-stick
// simplifications: a write that would block drops the client (the
// messages are a few hundred bytes, so it never happens under pgbench),
// and a failed login just closes.

type loopState uint8

const (
	stStartup loopState = iota
	stSASLFirst
	stSASLFinal
	stReady
	stQuery   // a server runs the client's query
	stWaiting // queued for a server
)

type loopClient struct {
	fd    int
	state loopState
	in    []byte
	// SCRAM: the client-first-message-bare, the GS2 header, the full
	// nonce and the server-first-message.
	bare, gs2, nonce, serverFirst string
	query                         []byte // the Query waiting for a server
}

type loopServer struct {
	fd     int
	in     []byte
	client *loopClient // nil while free
}

type eventLoop struct {
	f       *floor
	lfd, ep int
	clients map[int]*loopClient
	servers map[int]*loopServer
	free    []*loopServer
	queue   []*loopClient
	buf     []byte
	out     []byte
}

// serveEpoll runs the loop on ln's descriptor; the servers are f's,
// taken out of net (their descriptors duplicated, non-blocking).
func (f *floor) serveEpoll(ln *net.TCPListener) error {
	runtime.LockOSThread()
	l := &eventLoop{f: f, clients: map[int]*loopClient{}, servers: map[int]*loopServer{}, buf: make([]byte, 16<<10)}
	var err error
	if l.lfd, err = dupNonblock(ln); err != nil {
		return err
	}
	if l.ep, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
		return err
	}
	if err := l.watch(l.lfd); err != nil {
		return err
	}
	for len(f.servers) > 0 {
		u := <-f.servers
		fd, err := dupNonblock(u.raw)
		if err != nil {
			return err
		}
		s := &loopServer{fd: fd}
		l.servers[fd] = s
		l.free = append(l.free, s)
		if err := l.watch(fd); err != nil {
			return err
		}
	}
	evs := make([]syscall.EpollEvent, 256)
	for {
		// Every system call of the loop is raw: one entered the ordinary
		// way wakes the runtime's sysmon thread, and a blocking one hands
		// the P off (see internal/netpoll). A raw epoll_wait holds the P
		// while it sleeps, so it wakes every 5 ms to let a garbage
		// collection stop the world.
		r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.ep), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 5, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		n := int(r)
		for _, ev := range evs[:n] {
			fd := int(ev.Fd)
			switch {
			case fd == l.lfd:
				l.acceptAll()
			case l.servers[fd] != nil:
				if err := l.serverReadable(l.servers[fd]); err != nil {
					return err
				}
			case l.clients[fd] != nil:
				l.clientReadable(l.clients[fd])
			}
		}
	}
}

// dupNonblock is a non-blocking duplicate of c's descriptor.
func dupNonblock(c syscall.Conn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = syscall.Dup(int(s)) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	syscall.CloseOnExec(fd)
	return fd, syscall.SetNonblock(fd, true)
}

func (l *eventLoop) watch(fd int) error {
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
	_, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_CTL, uintptr(l.ep), syscall.EPOLL_CTL_ADD, uintptr(fd), uintptr(unsafe.Pointer(&ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func rawClose(fd int) { syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0) }

func (l *eventLoop) acceptAll() {
	for {
		r, _, e := syscall.RawSyscall6(syscall.SYS_ACCEPT4, uintptr(l.lfd), 0, 0, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0, 0)
		if e != 0 {
			return // EAGAIN: all taken
		}
		fd := int(r)
		one := int32(1)
		syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, uintptr(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY, uintptr(unsafe.Pointer(&one)), 4, 0)
		if l.watch(fd) != nil {
			rawClose(fd)
			continue
		}
		l.clients[fd] = &loopClient{fd: fd}
	}
}

// fill reads what fd has into *in; false once the peer is gone.
func (l *eventLoop) fill(fd int, in *[]byte) bool {
	for {
		n, again, err := netpoll.Read(uintptr(fd), l.buf)
		if again {
			return true
		}
		if err != nil || n == 0 {
			return false
		}
		*in = append(*in, l.buf[:n]...)
		if n < len(l.buf) {
			return true
		}
	}
}

func (l *eventLoop) send(fd int, b []byte) bool {
	n, again, err := netpoll.Write(uintptr(fd), b)
	return err == nil && !again && n == len(b)
}

func (l *eventLoop) closeClient(c *loopClient) {
	delete(l.clients, c.fd)
	rawClose(c.fd) // also takes it out of the epoll set
	c.fd = -1
}

func (l *eventLoop) clientReadable(c *loopClient) {
	if !l.fill(c.fd, &c.in) {
		// A running query's server drops its reply (c.fd < 0).
		l.dropQueued(c)
		l.closeClient(c)
		return
	}
	for c.fd >= 0 {
		typ, msg, rest, ok := nextMessage(c.in, c.state == stStartup)
		if !ok {
			break
		}
		if !l.step(c, typ, msg) {
			l.dropQueued(c)
			l.closeClient(c)
			return
		}
		c.in = append(c.in[:0], rest...)
	}
}

// nextMessage cuts one message off in: a startup packet (no type byte)
// or a typed message; ok is false while it is incomplete.
func nextMessage(in []byte, startup bool) (typ byte, body, rest []byte, ok bool) {
	hdr := 5
	if startup {
		hdr = 4
	}
	if len(in) < hdr {
		return 0, nil, nil, false
	}
	n := int(binary.BigEndian.Uint32(in[hdr-4:hdr])) + hdr - 4
	if n < hdr || len(in) < n {
		return 0, nil, nil, false
	}
	if !startup {
		typ = in[0]
	}
	return typ, in[hdr:n], in[n:], true
}

// step handles one client message; false closes the client.
func (l *eventLoop) step(c *loopClient, typ byte, body []byte) bool {
	switch c.state {
	case stStartup:
		if len(body) < 4 {
			return false
		}
		switch binary.BigEndian.Uint32(body) {
		case 80877103: // SSLRequest
			return l.send(c.fd, []byte{'N'})
		case 196608:
		default:
			return false
		}
		if startupUser(body[4:]) != l.f.user {
			return false
		}
		c.state = stSASLFirst
		return l.send(c.fd, authMessage(nil, 10, []byte("SCRAM-SHA-256\x00\x00")))
	case stSASLFirst:
		if typ != 'p' {
			return false
		}
		return l.saslFirst(c, body)
	case stSASLFinal:
		if typ != 'p' {
			return false
		}
		return l.saslFinal(c, body)
	case stReady:
		switch typ {
		case 'X':
			return false
		case 'Q':
			c.query = append(c.query[:0], typ)
			c.query = binary.BigEndian.AppendUint32(c.query, uint32(len(body)+4))
			c.query = append(c.query, body...)
			if len(l.free) == 0 {
				c.state = stWaiting
				l.queue = append(l.queue, c)
				return true
			}
			s := l.free[len(l.free)-1]
			l.free = l.free[:len(l.free)-1]
			return l.run(c, s)
		}
	}
	return false
}

func (l *eventLoop) run(c *loopClient, s *loopServer) bool {
	c.state, s.client = stQuery, c
	// A server's socket is empty between queries, so a query's few
	// bytes fit; if not, the client goes and the server waits for the
	// next.
	if !l.send(s.fd, c.query) {
		s.client = nil
		l.free = append(l.free, s)
		return false
	}
	return true
}

func (l *eventLoop) dropQueued(c *loopClient) {
	for i, q := range l.queue {
		if q == c {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			return
		}
	}
}

// startupUser is the user parameter of a startup packet's parameters.
func startupUser(b []byte) string {
	for len(b) > 1 {
		k, rest, ok := bytes.Cut(b, []byte{0})
		if !ok {
			return ""
		}
		v, rest2, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			return ""
		}
		if string(k) == "user" {
			return string(v)
		}
		b = rest2
	}
	return ""
}

func authMessage(out []byte, code uint32, data []byte) []byte {
	out = append(out, 'R')
	out = binary.BigEndian.AppendUint32(out, uint32(8+len(data)))
	out = binary.BigEndian.AppendUint32(out, code)
	return append(out, data...)
}

func (l *eventLoop) saslFirst(c *loopClient, body []byte) bool {
	// SASLInitialResponse: mechanism, int32 length, client-first-message.
	mech, rest, ok := bytes.Cut(body, []byte{0})
	if !ok || string(mech) != "SCRAM-SHA-256" || len(rest) < 4 {
		return false
	}
	msg := string(rest[4:])
	// gs2-header "n,," then client-first-message-bare "n=…,r=nonce".
	i := len("n,,")
	if len(msg) < i || msg[:i] != "n,," {
		return false
	}
	c.gs2, c.bare = msg[:i], msg[i:]
	_, nonce, ok := bytes.Cut([]byte(c.bare), []byte(",r="))
	if !ok || len(nonce) == 0 {
		return false
	}
	var sn [18]byte
	rand.Read(sn[:])
	s := &l.f.secret
	c.nonce = string(nonce) + base64.StdEncoding.EncodeToString(sn[:])
	c.serverFirst = "r=" + c.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.Salt) + ",i=" + strconv.Itoa(s.Iterations)
	c.state = stSASLFinal
	return l.send(c.fd, authMessage(nil, 11, []byte(c.serverFirst)))
}

func (l *eventLoop) saslFinal(c *loopClient, body []byte) bool {
	// client-final-message "c=<b64 gs2>,r=<nonce>,p=<b64 proof>".
	msg := string(body)
	j := bytes.LastIndex(body, []byte(",p="))
	if j < 0 {
		return false
	}
	withoutProof := msg[:j]
	if withoutProof != "c="+base64.StdEncoding.EncodeToString([]byte(c.gs2))+",r="+c.nonce {
		return false
	}
	proof, err := base64.StdEncoding.DecodeString(msg[j+3:])
	if err != nil || len(proof) != sha256.Size {
		return false
	}
	s := &l.f.secret
	authMsg := c.bare + "," + c.serverFirst + "," + withoutProof
	clientKey := hmacSum(s.StoredKey, authMsg)
	subtle.XORBytes(clientKey, clientKey, proof)
	stored := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(stored[:], s.StoredKey) != 1 {
		return false
	}
	out := authMessage(l.out[:0], 12, []byte("v="+base64.StdEncoding.EncodeToString(hmacSum(s.ServerKey, authMsg))))
	out = append(out, l.f.welcome...)
	l.out = out
	c.state = stReady
	return l.send(c.fd, out)
}

func hmacSum(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// serverReadable collects a server's replies; at ReadyForQuery they go to
// the client in one write and the server to the next queued client. A
// server that closes ends the loop.
func (l *eventLoop) serverReadable(s *loopServer) error {
	if !l.fill(s.fd, &s.in) {
		return errors.New("a server closed")
	}
	c := s.client
	if c == nil {
		s.in = s.in[:0]
		return nil
	}
	done := false
	for rest := s.in; ; {
		typ, _, r, ok := nextMessage(rest, false)
		if !ok {
			break
		}
		rest = r
		if typ == 'Z' {
			done = len(rest) == 0
			break
		}
	}
	if !done {
		return nil
	}
	if c.fd >= 0 {
		if l.send(c.fd, s.in) {
			c.state = stReady
		} else {
			l.closeClient(c)
		}
	}
	s.in, s.client = s.in[:0], nil
	if len(l.queue) > 0 {
		next := l.queue[0]
		l.queue = l.queue[1:]
		if !l.run(next, s) {
			l.closeClient(next)
		}
		return nil
	}
	l.free = append(l.free, s)
	return nil
}
