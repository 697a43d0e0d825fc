//go:build linux

package main

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

// listenFDs reads LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES as
// sd_listen_fds(3) does, and unsets all three whatever they said, so that
// no child takes the sockets for its own.
func TestListenFDsEnv(t *testing.T) {
	me := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		pid, fds, names string
		wantN           int
		wantNames       []string
	}{
		{pid: me, fds: "2", names: "pg:pgunix", wantN: 2, wantNames: []string{"pg", "pgunix"}},
		{pid: me, fds: "2", wantN: 2},
		{pid: me, fds: "2", names: "one", wantN: 2}, // names that do not match: ignored
		{pid: "1", fds: "2"},                        // meant for another process
		{pid: "", fds: "2"},
		{pid: me, fds: "x"},
		{pid: me, fds: "0"},
		{pid: me, fds: "-1"},
	} {
		t.Setenv("LISTEN_PID", c.pid)
		t.Setenv("LISTEN_FDS", c.fds)
		t.Setenv("LISTEN_FDNAMES", c.names)
		n, names := listenFDs(os.Getpid())
		if n != c.wantN || strings.Join(names, ":") != strings.Join(c.wantNames, ":") || (names == nil) != (c.wantNames == nil) {
			t.Errorf("LISTEN_PID=%q LISTEN_FDS=%q LISTEN_FDNAMES=%q: %d %q, want %d %q", c.pid, c.fds, c.names, n, names, c.wantN, c.wantNames)
		}
		for _, k := range listenEnv {
			if v, ok := os.LookupEnv(k); ok {
				t.Errorf("%s=%q still set", k, v)
			}
		}
	}
}

// passFDs moves the files' descriptors to start, start+1, … as systemd
// lays them out from 3 (3 itself is the test process's own). Those numbers
// must be free: the test would otherwise close what it does not own.
func passFDs(t *testing.T, start int, files ...*os.File) {
	t.Helper()
	for i, f := range files {
		if _, err := fcntlGetFD(start + i); !errors.Is(err, syscall.EBADF) {
			t.Fatalf("fd %d is in use", start+i)
		}
		if err := syscall.Dup3(int(f.Fd()), start+i, syscall.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// A TCP and a Unix listening socket passed by the service manager become
// listeners that accept on them; the passed descriptors are closed (the
// listeners hold close-on-exec duplicates), and closing the Unix listener
// leaves its socket file to the service manager that made it.
func TestTakeListenFDs(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	path := filepath.Join(t.TempDir(), ".s.PGSQL.6432")
	unix, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	unix.(*net.UnixListener).SetUnlinkOnClose(false)
	defer unix.Close()
	tf, _ := tcp.(*net.TCPListener).File()
	uf, _ := unix.(*net.UnixListener).File()
	const start = 200
	passFDs(t, start, tf, uf)

	lns, err := takeListenFDs(start, 2, []string{"pg", "pgunix"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lns) != 2 || lns[0].Addr().String() != tcp.Addr().String() || lns[1].Addr().String() != path {
		t.Fatalf("listeners %v, want %s and %s", lns, tcp.Addr(), path)
	}
	for i := 0; i < 2; i++ {
		if _, err := fcntlGetFD(start + i); !errors.Is(err, syscall.EBADF) {
			t.Errorf("fd %d still open after takeListenFDs (%v)", start+i, err)
		}
	}
	for i, network := range []string{"tcp", "unix"} {
		done := make(chan error, 1)
		go func() {
			c, err := lns[i].Accept()
			if err == nil {
				c.Close()
			}
			done <- err
		}()
		c, err := net.Dial(network, lns[i].Addr().String())
		if err != nil {
			t.Fatalf("dial %s: %v", network, err)
		}
		c.Close()
		if err := <-done; err != nil {
			t.Fatalf("accept on the passed %s socket: %v", network, err)
		}
	}
	for _, ln := range lns {
		ln.Close()
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("closing the passed Unix socket removed %s (%v)", path, err)
	}
}

func fcntlGetFD(fd int) (uintptr, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	if e != 0 {
		return 0, e
	}
	return r, nil
}

// What is not a listening TCP or Unix stream socket is refused with a
// reason, naming the descriptor, and nothing taken before it stays open.
func TestTakeListenFDsRefuses(t *testing.T) {
	regular, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	uf, _ := udp.(*net.UDPConn).File()
	// A TCP socket that was never listen(2)ed.
	sock, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	plain := os.NewFile(uintptr(sock), "plain")
	for _, c := range []struct {
		file *os.File
		want string
	}{
		{regular, "socket passed from service manager (fd 211): not a socket"},
		{uf, "socket passed from service manager (fd 211): not a stream socket"},
		{plain, "socket passed from service manager (fd 211): not a listening socket"},
		{nil, "socket passed from service manager (fd 211): bad file descriptor"},
	} {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tf, _ := tcp.(*net.TCPListener).File()
		tcp.Close()
		if c.file != nil {
			passFDs(t, 210, tf, c.file)
		} else {
			passFDs(t, 210, tf)
		}
		lns, err := takeListenFDs(210, 2, nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("takeListenFDs: %v %v, want error %q", lns, err, c.want)
		}
		// fd 210 was taken, then closed again with its listener.
		if _, err := fcntlGetFD(210); !errors.Is(err, syscall.EBADF) {
			t.Errorf("fd 210 still open after the refusal (%v)", err)
			syscall.Close(210)
		}
		if c.file != nil {
			syscall.Close(211)
		}
	}
}

// Passed sockets are served instead of listen_addr and unix_socket_dir,
// which PgBouncer's warnings name, each descriptor logged in its words; a
// unix_socket_dir left at its default /tmp is not warned about.
func TestActivatedListenersLog(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	const start = 220
	for _, c := range []struct {
		dir  string
		warn bool
	}{{"/tmp", false}, {"/var/run/postgresql", true}} {
		tf, _ := tcp.(*net.TCPListener).File()
		passFDs(t, start, tf)
		t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
		t.Setenv("LISTEN_FDS", "1")
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		st := &config.Settings{ListenAddr: "*", UnixSocketDir: c.dir}
		lns, err := takeActivationFrom(start).listeners(st, log, false)
		if err != nil || len(lns) != 1 || lns[0].Addr().String() != tcp.Addr().String() {
			t.Fatalf("listeners: %v %v", lns, err)
		}
		lns[0].Close()
		out := buf.String()
		for _, want := range []string{
			`level=WARN msg="sockets passed from service manager, cf_listen_addr ignored"`,
			`level=INFO msg="socket passed from service manager (fd 220)"`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("unix_socket_dir %s: log has no %s:\n%s", c.dir, want, out)
			}
		}
		if got := strings.Contains(out, "sockets passed from service manager, cf_unix_socket_dir ignored"); got != c.warn {
			t.Errorf("unix_socket_dir %s: cf_unix_socket_dir warning %v, want %v:\n%s", c.dir, got, c.warn, out)
		}
	}
	// -d: the daemon binds its own, as PgBouncer's; nothing is served,
	// and the passed socket is closed (the daemon does not inherit it).
	tf, _ := tcp.(*net.TCPListener).File()
	passFDs(t, start, tf)
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	t.Setenv("LISTEN_FDS", "1")
	var buf bytes.Buffer
	act := takeActivationFrom(start)
	if _, ok := os.LookupEnv("LISTEN_FDS"); ok {
		t.Error("LISTEN_FDS still set")
	}
	lns, err := act.listeners(&config.Settings{ListenAddr: "*"}, slog.New(slog.NewTextHandler(&buf, nil)), true)
	if lns != nil || err != nil || buf.Len() != 0 {
		t.Errorf("with -d: %v %v, log %q; want nothing served", lns, err, buf.String())
	}
	for _, ln := range act.lns {
		if _, err := ln.Accept(); err == nil || !errors.Is(err, net.ErrClosed) {
			t.Errorf("with -d: the passed socket still accepts (%v)", err)
		}
	}
	if len(act.lns) != 1 {
		t.Errorf("with -d: took %d sockets, want 1 (then closed)", len(act.lns))
	}
}

// A passed descriptor that is refused is FATAL after PgBouncer's warnings,
// with no socket logged as taken.
func TestActivatedListenersRefused(t *testing.T) {
	regular, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	const start = 230
	passFDs(t, start, regular)
	defer syscall.Close(start)
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	t.Setenv("LISTEN_FDS", "1")
	var buf bytes.Buffer
	lns, err := takeActivationFrom(start).listeners(&config.Settings{ListenAddr: "*"}, slog.New(slog.NewTextHandler(&buf, nil)), false)
	if lns != nil || err == nil || err.Error() != "socket passed from service manager (fd 230): not a socket" {
		t.Errorf("a regular file passed: %v %v", lns, err)
	}
	if out := buf.String(); !strings.Contains(out, "cf_listen_addr ignored") || strings.Contains(out, "(fd 230)") {
		t.Errorf("log:\n%s", out)
	}
}
