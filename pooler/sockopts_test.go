//go:build linux

package pooler

import (
	"context"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/sockopt"
)

// getsockopt reads an int option from a connection or listener.
func getsockopt(t *testing.T, sc syscall.Conn, level, opt int) int {
	t.Helper()
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) })
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// recordDials is an Option that keeps every connection the service dials
// to Postgres, so a test can read its options from the pooler's side.
func recordDials(mu *sync.Mutex, conns *[]net.Conn) Option {
	return func(s *Service) {
		dial := s.dial // the service's own: the socket options are its
		s.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := dial(ctx, network, address)
			if err == nil {
				mu.Lock()
				*conns = append(*conns, c)
				mu.Unlock()
			}
			return c, err
		}
	}
}

// sockoptsRig starts a pooler with settings, logs a client in, runs a
// query (so a server is dialled) and returns the pooler's side of both.
func sockoptsRig(t *testing.T, settings string) (tp *testPooler, client, server sockopt.TCPSocket) {
	t.Helper()
	fake := startFakePostgres(t)
	var mu sync.Mutex
	var dials []net.Conn
	tp = startTestPooler(t, fake, map[string]string{"cs": ""}, settings, recordDials(&mu, &dials))
	t.Cleanup(func() { tp.shutdown(t, fake) })
	conn, c := dialStateClient(t, tp)
	t.Cleanup(func() { conn.Close() })
	stateQuery(t, conn, "SELECT 1", 'I')
	mu.Lock()
	defer mu.Unlock()
	if len(dials) == 0 {
		t.Fatal("no server was dialled")
	}
	cl, ok := sockopt.TCP(c.conn)
	if !ok {
		t.Fatalf("the client's connection is a %T", c.conn)
	}
	if _, raw := c.conn.(*netpoll.Conn); netpoll.CanAccept && !raw {
		t.Errorf("the client's connection is a %T; want netpoll's (accepted without net)", c.conn)
	}
	return tp, cl, dials[0].(*net.TCPConn)
}

// The tcp_* settings are on the pooler's side of both the client's and
// the server's connection, as PgBouncer's tune_socket sets them, and the
// listener has listen_backlog and TCP_DEFER_ACCEPT.
func TestSocketOptionsSet(t *testing.T) {
	tp, cl, sv := sockoptsRig(t, "tcp_keepalive = 1\ntcp_keepidle = 17\ntcp_keepintvl = 7\ntcp_keepcnt = 4\n"+
		"tcp_user_timeout = 12345\ntcp_socket_buffer = 65536\nlisten_backlog = 17\ntcp_defer_accept = 1\n")
	for side, c := range map[string]sockopt.TCPSocket{"client": cl, "server": sv} {
		for _, o := range []struct {
			name         string
			level, opt   int
			want         int
			atLeastTwice bool
		}{
			{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1, false},
			{"TCP_KEEPIDLE", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 17, false},
			{"TCP_KEEPINTVL", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 7, false},
			{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 4, false},
			{"TCP_USER_TIMEOUT", unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, 12345, false},
			// Linux doubles the buffer sizes it is given.
			{"SO_SNDBUF", unix.SOL_SOCKET, unix.SO_SNDBUF, 2 * 65536, true},
			{"SO_RCVBUF", unix.SOL_SOCKET, unix.SO_RCVBUF, 2 * 65536, true},
		} {
			if got := getsockopt(t, c, o.level, o.opt); got != o.want {
				t.Errorf("%s side %s = %d, want %d", side, o.name, got, o.want)
			}
		}
	}
	ln := tp.svc.listeners[0].(*net.TCPListener)
	if got := getsockopt(t, ln, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT); got == 0 {
		t.Errorf("listener TCP_DEFER_ACCEPT = 0, want on")
	}
	// For a listening socket, TCP_INFO's tcpi_sacked is its backlog.
	rc, _ := ln.SyscallConn()
	var info *unix.TCPInfo
	var ierr error
	rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if ierr != nil {
		t.Fatal(ierr)
	}
	if info.Sacked != 17 {
		t.Errorf("listener backlog = %d, want listen_backlog 17", info.Sacked)
	}
}

// With tcp_keepalive = 1 and nothing else set, the OS defaults stay (not
// Go's 15 s); tcp_keepalive = 0 turns keepalive off; tcp_defer_accept = 0
// leaves the listener without TCP_DEFER_ACCEPT; RELOAD/SET turning it on
// sets it on the listener open.
func TestSocketOptionsDefaults(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_keepalive_time")
	if err != nil {
		t.Skip(err)
	}
	osIdle, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Run("keepalive", func(t *testing.T) {
		_, cl, sv := sockoptsRig(t, "tcp_defer_accept = 0\n")
		for side, c := range map[string]sockopt.TCPSocket{"client": cl, "server": sv} {
			if got := getsockopt(t, c, unix.SOL_SOCKET, unix.SO_KEEPALIVE); got != 1 {
				t.Errorf("%s side SO_KEEPALIVE = %d, want 1", side, got)
			}
			if got := getsockopt(t, c, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE); got != osIdle {
				t.Errorf("%s side TCP_KEEPIDLE = %d, want the OS default %d", side, got, osIdle)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		tp, cl, sv := sockoptsRig(t, "tcp_keepalive = 0\ntcp_defer_accept = 0\n")
		for side, c := range map[string]sockopt.TCPSocket{"client": cl, "server": sv} {
			if got := getsockopt(t, c, unix.SOL_SOCKET, unix.SO_KEEPALIVE); got != 0 {
				t.Errorf("tcp_keepalive = 0: %s side SO_KEEPALIVE = %d, want 0", side, got)
			}
		}
		ln := tp.svc.listeners[0].(*net.TCPListener)
		if got := getsockopt(t, ln, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT); got != 0 {
			t.Errorf("tcp_defer_accept = 0: listener TCP_DEFER_ACCEPT = %d", got)
		}
		cfg := *tp.svc.config()
		cfg.Settings.TCPDeferAccept = 1
		if err := tp.svc.Apply(&cfg, false); err != nil {
			t.Fatal(err)
		}
		if got := getsockopt(t, ln, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT); got == 0 {
			t.Errorf("tcp_defer_accept turned on: listener TCP_DEFER_ACCEPT still 0")
		}
		// tcp_socket_buffer set by RELOAD/SET goes on the listener, for
		// the connections it accepts from then on.
		cfg.Settings.TCPSocketBuffer = 65536
		if err := tp.svc.Apply(&cfg, false); err != nil {
			t.Fatal(err)
		}
		if got := getsockopt(t, ln, unix.SOL_SOCKET, unix.SO_RCVBUF); got != 2*65536 {
			t.Errorf("tcp_socket_buffer set to 65536: listener SO_RCVBUF = %d, want %d", got, 2*65536)
		}
	})
}

// A connection from an inherited listener (online restart, systemd), on
// which Go sets its own keepalive, gets the OS defaults back.
func TestSocketOptionsInheritedListener(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_keepalive_intvl")
	if err != nil {
		t.Skip(err)
	}
	osIntvl, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": ""}, "tcp_socket_buffer = 65536\n", WithListeners([]net.Listener{ln}))
	defer tp.shutdown(t, fake)
	conn, c := dialStateClient(t, tp)
	defer conn.Close()
	if got := getsockopt(t, c.conn.(syscall.Conn), unix.IPPROTO_TCP, unix.TCP_KEEPINTVL); got != osIntvl {
		t.Errorf("TCP_KEEPINTVL = %d, want the OS default %d", got, osIntvl)
	}
	// tcp_socket_buffer goes on an inherited listener too, as PgBouncer
	// tunes a socket systemd hands it.
	if got := getsockopt(t, c.conn.(syscall.Conn), unix.SOL_SOCKET, unix.SO_RCVBUF); got != 2*65536 {
		t.Errorf("SO_RCVBUF = %d, want %d", got, 2*65536)
	}
}

// A connection whose options cannot be set is dropped with PgBouncer's
// warning: TCP_KEEPIDLE above Linux's 32767 is refused by the kernel.
func TestSocketOptionsRefusedDropped(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"cs": ""}, "tcp_keepidle = 40000\n")
	defer tp.shutdown(t, fake)
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write(startupPacket(0, [][2]string{{"user", "cs"}, {"database", "cs"}}))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection was served")
	}
	if !regexp.MustCompile(`socket_set_keepalive\(\d+\) failed: Invalid argument`).MatchString(tp.log.tail()) {
		t.Errorf("log:\n%s", tp.log.tail())
	}
}

// rcvWscale is the window scale a connection's receiving side offered in
// its handshake: the high nibble of the byte after tcpi_options in Linux's
// struct tcp_info (tcpi_snd_wscale:4, tcpi_rcv_wscale:4), which
// x/sys/unix's TCPInfo leaves as padding.
func rcvWscale(t *testing.T, c syscall.Conn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var raw [232]byte
	var gerr error
	rc.Control(func(fd uintptr) {
		l := uint32(len(raw))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
			uintptr(unsafe.Pointer(&raw[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e != 0 {
			gerr = e
		}
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	return int(raw[6] >> 4)
}

// tcp_socket_buffer is in place before the handshake, as PgBouncer sets it
// (on the listener, on a server socket before connect): the window scale
// both of the pooler's sides offered is the one for the small buffer, not
// the default one. Set after the handshake (as it once was), a base backup
// relayed with 4096-byte buffers stalled (TestReplicationThroughPooler).
func TestSocketBufferBeforeHandshake(t *testing.T) {
	// Each rig in a subtest of its own: a rig's shutdown checks that no
	// pooler goroutine is left, the other rig's included.
	type scales struct{ client, server, rcvbuf int }
	measure := func(settings string) (m scales) {
		t.Run(settings, func(t *testing.T) {
			_, cl, sv := sockoptsRig(t, settings)
			m = scales{rcvWscale(t, cl), rcvWscale(t, sv), getsockopt(t, cl, unix.SOL_SOCKET, unix.SO_RCVBUF)}
		})
		return m
	}
	d := measure("tcp_socket_buffer = 0\n")
	s := measure("tcp_socket_buffer = 4096\n")
	t.Logf("window scale offered by the pooler: client side %d by default, %d with tcp_socket_buffer = 4096; server side %d, %d",
		d.client, s.client, d.server, s.server)
	if s.client >= d.client || s.server >= d.server {
		t.Errorf("window scales with tcp_socket_buffer = 4096: client side %d, server side %d; want less than the default's %d and %d: the buffers were set after the handshake",
			s.client, s.server, d.client, d.server)
	}
	if s.rcvbuf != 2*4096 {
		t.Errorf("client side SO_RCVBUF = %d, want %d (Linux doubles it)", s.rcvbuf, 2*4096)
	}
}
