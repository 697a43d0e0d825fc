//go:build linux

package netpoll

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// tcpPair is a connected pair of loopback TCP sockets.
func tcpPair(t *testing.T) (a, b *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// control runs fn on c's descriptor.
func control(t *testing.T, c syscall.Conn, fn func(fd uintptr)) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(fn); err != nil {
		t.Fatal(err)
	}
}

func TestReadWritePeek(t *testing.T) {
	a, b := tcpPair(t)
	buf := make([]byte, 16)
	var one [1]byte
	control(t, b, func(fd uintptr) {
		if n, again, err := Read(fd, buf); n != 0 || !again || err != nil {
			t.Errorf("Read on an empty socket = %d, %v, %v; want 0, again", n, again, err)
		}
		if PeekClosed(fd, &one) {
			t.Error("PeekClosed on a silent peer = true")
		}
	})
	control(t, a, func(fd uintptr) {
		if n, again, err := Write(fd, []byte("hello")); n != 5 || again || err != nil {
			t.Errorf("Write = %d, %v, %v; want 5", n, again, err)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	got := false
	for !got && time.Now().Before(deadline) {
		control(t, b, func(fd uintptr) { got = PeekClosed(fd, &one) })
		if !got {
			time.Sleep(time.Millisecond)
		}
	}
	if !got {
		t.Fatal("PeekClosed never saw the data")
	}
	control(t, b, func(fd uintptr) {
		n, again, err := Read(fd, buf)
		if string(buf[:n]) != "hello" || again || err != nil {
			t.Errorf("Read after the peek = %q, %v, %v; want hello (the peek consumes nothing)", buf[:n], again, err)
		}
	})
	a.Close()
	for got = false; !got && time.Now().Before(deadline); {
		control(t, b, func(fd uintptr) { got = PeekClosed(fd, &one) })
		if !got {
			time.Sleep(time.Millisecond)
		}
	}
	if !got {
		t.Fatal("PeekClosed never saw the peer's close")
	}
}

func TestReadWriteAllocs(t *testing.T) {
	a, b := tcpPair(t)
	msg := []byte("x")
	buf := make([]byte, 16)
	var one [1]byte
	ra, _ := a.SyscallConn()
	rb, _ := b.SyscallConn()
	var fa, fb uintptr
	ra.Control(func(fd uintptr) { fa = fd })
	rb.Control(func(fd uintptr) { fb = fd })
	allocs := testing.AllocsPerRun(100, func() {
		Write(fa, msg)
		PeekClosed(fb, &one)
		Read(fb, buf)
	})
	if allocs != 0 {
		t.Errorf("Write+PeekClosed+Read allocate %v times; want 0", allocs)
	}
}

func TestPoller(t *testing.T) {
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	a, b := tcpPair(t)
	var fd int
	control(t, b, func(sysfd uintptr) {
		fd, err = DupCloexec(int(sysfd))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := p.Add(fd); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	fds := make([]int32, 4)
	n, err := p.Wait(fds)
	if err != nil || n != 1 || fds[0] != int32(fd) {
		t.Fatalf("Wait = %v, %v (fds %v); want the one descriptor %d", n, err, fds[:n], fd)
	}
	p.Del(fd)
	if err := p.Add(fd); err != nil {
		t.Errorf("Add after Del: %v", err)
	}
}

func TestPeerUID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", path)
		if err == nil {
			time.Sleep(100 * time.Millisecond)
			c.Close()
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uid, ok := PeerUID(c.(*net.UnixConn))
	if !ok || uid != os.Getuid() {
		t.Errorf("PeerUID = %d, %v; want %d, true", uid, ok, os.Getuid())
	}
}
