//go:build linux

package sockopt

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pgturnstile/pgturnstile/config"
)

func getInt(t *testing.T, c syscall.Conn, level, opt int) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), level, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// TestTuneSetsPgBouncersOptions: Tune puts tcp_keepalive, tcp_keepidle,
// tcp_keepintvl, tcp_keepcnt and tcp_user_timeout on a TCP connection
// (read back with getsockopt); ListenTCP with so_reuseport sets
// SO_REUSEPORT on the listener.
func TestTuneSetsPgBouncersOptions(t *testing.T) {
	ln, err := ListenTCP(true, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := getInt(t, ln.(*net.TCPListener), unix.SOL_SOCKET, unix.SO_REUSEPORT); got != 1 {
		t.Errorf("SO_REUSEPORT = %d, want 1", got)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sock, ok := TCP(c)
	if !ok {
		t.Fatal("a TCP connection is not a TCPSocket")
	}
	st := &config.Settings{TCPKeepalive: true, TCPKeepIdle: 17, TCPKeepIntvl: 5, TCPKeepCnt: 3, TCPUserTimeout: 4200}
	if err := Tune(sock, st, false); err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		name       string
		level, opt int
		want       int
	}{
		{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 17},
		{"TCP_KEEPINTVL", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 5},
		{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 3},
		{"TCP_USER_TIMEOUT", unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, 4200},
	} {
		if got := getInt(t, sock, o.level, o.opt); got != o.want {
			t.Errorf("%s = %d, want %d", o.name, got, o.want)
		}
	}
	if _, ok := TCP(nil); ok {
		t.Error("nil is a TCPSocket")
	}
}

// TestChownUnixSocketMode: unix_socket_mode lands on the file, setgid
// included; an abstract socket is left alone.
func TestChownUnixSocketMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".s.PGSQL.1")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ChownUnixSocket(path, 0o2770, ""); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o770 || fi.Mode()&os.ModeSetgid == 0 {
		t.Errorf("mode %v, want setgid and 0770", fi.Mode())
	}
	if err := ChownUnixSocket("@abstract", 0o777, "no-such-group"); err != nil {
		t.Errorf("abstract socket: %v", err)
	}
	if err := ChownUnixSocket(path, 0o777, "no-such-group-here"); err == nil {
		t.Error("an unknown unix_socket_group was accepted")
	}
}
