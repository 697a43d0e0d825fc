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

	"golang.org/x/sys/unix"
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
		s.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := serverDialer.DialContext(ctx, network, address)
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
func sockoptsRig(t *testing.T, settings string) (tp *testPooler, client, server *net.TCPConn) {
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
	return tp, c.conn.(*net.TCPConn), dials[0].(*net.TCPConn)
}

// The tcp_* settings are on the pooler's side of both the client's and
// the server's connection, as PgBouncer's tune_socket sets them, and the
// listener has listen_backlog and TCP_DEFER_ACCEPT.
func TestSocketOptionsSet(t *testing.T) {
	tp, cl, sv := sockoptsRig(t, "tcp_keepalive = 1\ntcp_keepidle = 17\ntcp_keepintvl = 7\ntcp_keepcnt = 4\n"+
		"tcp_user_timeout = 12345\nlisten_backlog = 17\ntcp_defer_accept = 1\n")
	for side, c := range map[string]*net.TCPConn{"client": cl, "server": sv} {
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
		for side, c := range map[string]*net.TCPConn{"client": cl, "server": sv} {
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
		for side, c := range map[string]*net.TCPConn{"client": cl, "server": sv} {
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
	tp := startTestPooler(t, fake, map[string]string{"cs": ""}, "", WithListeners([]net.Listener{ln}))
	defer tp.shutdown(t, fake)
	conn, c := dialStateClient(t, tp)
	defer conn.Close()
	if got := getsockopt(t, c.conn.(*net.TCPConn), unix.IPPROTO_TCP, unix.TCP_KEEPINTVL); got != osIntvl {
		t.Errorf("TCP_KEEPINTVL = %d, want the OS default %d", got, osIntvl)
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
