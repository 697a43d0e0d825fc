//go:build linux

package netpoll

import (
	"errors"
	"fmt"
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

// ownFDs describes the poller's own descriptors as /proc names them
// ("anon_inode:[eventpoll]", "pipe:[inode]"); a closed one reads as "",
// and one whose number was reused since reads differently.
func ownFDs(p *Poller) [3]string {
	var links [3]string
	for i, fd := range [3]int{p.epfd, p.wakeR, p.wakeW} {
		links[i], _ = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	}
	return links
}

// checkClosed fails unless none of the poller's descriptors is open as it
// was (open describes them from before Close).
func checkClosed(t *testing.T, open [3]string, p *Poller) {
	t.Helper()
	for i, link := range ownFDs(p) {
		if open[i] == "" {
			t.Fatalf("descriptor %d of the poller was not open before Close", i)
		}
		if link == open[i] {
			t.Errorf("descriptor %d of the poller (%s) still open after Close", i, link)
		}
	}
}

func TestPollerCloseEndsWait(t *testing.T) {
	_, b := tcpPair(t)
	var fd int
	var err error
	control(t, b, func(sysfd uintptr) { fd, err = DupCloexec(int(sysfd)) })
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	open := ownFDs(p)
	if err := p.Add(fd); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := p.Wait(make([]int32, 4))
		waited <- err
	}()
	// Most likely blocked in epoll_wait by then; Close must end the Wait
	// whether it came before or during it (a Close that could not would
	// never return, and the test would time out).
	time.Sleep(50 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Wait after Close = %v; want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still blocked after Close returned")
	}
	checkClosed(t, open, p)
	if n, err := p.Wait(make([]int32, 4)); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Errorf("a later Wait = %d, %v; want net.ErrClosed", n, err)
	}
	if err := p.Add(fd); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Add after Close = %v; want net.ErrClosed", err)
	}
	p.Del(fd) // nothing, and no panic
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	// The watched descriptor is the caller's: Close leaves it open.
	if _, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err != nil {
		t.Errorf("the watched descriptor was closed: %v", err)
	}
}

func TestPollerCloseWithoutWait(t *testing.T) {
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	open := ownFDs(p)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkClosed(t, open, p)
}
