package parking

import (
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// pair is a connected pair of Unix sockets: the parked side's descriptor
// (Detach'ed, its conn closed) and the peer that writes to it.
func pair(t *testing.T) (fd int, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err = net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fd, ok := Detach(conn)
	if !ok {
		t.Fatal("Detach failed")
	}
	return fd, peer
}

// A parked connection wakes once when its peer writes, is held instead
// while hold says so until Rewatch, can be taken without waking, and
// Stop wakes whatever is still parked and ends the lot's goroutine.
func TestLot(t *testing.T) {
	if !netpoll.CanPark {
		t.Skip("no epoll set on this system")
	}
	woke := make(chan string, 4)
	var holding atomic.Bool
	var l Lot[string]
	if err := l.Start(func(fd int, v string) {
		go func() {
			if c, err := Attach(fd, true); err == nil { // Unix sockets: never adopted
				c.Close()
			}
			woke <- v
		}()
	}, holding.Load); err != nil {
		t.Fatal(err)
	}
	fdA, peerA := pair(t)
	fdB, _ := pair(t)
	fdC, _ := pair(t)
	for fd, v := range map[int]string{fdA: "a", fdB: "b", fdC: "c"} {
		if err := l.Park(fd, v); err != nil {
			t.Fatal(err)
		}
	}
	if l.Len() != 3 || l.Parked()[int32(fdA)] != "a" {
		t.Fatalf("parked: %v", l.Parked())
	}
	peerA.Write([]byte("x"))
	if v := <-woke; v != "a" {
		t.Fatalf("woke %q, want a", v)
	}
	if fd, ok := l.Take("b"); !ok || fd != fdB {
		t.Fatalf("Take(b) = %d %v", fd, ok)
	}
	if _, ok := l.Take("b"); ok {
		t.Fatal("b taken twice")
	}
	// Held while hold says so: its bytes wake it only after Rewatch.
	fdD, peerD := pair(t)
	holding.Store(true)
	if err := l.Park(fdD, "d"); err != nil {
		t.Fatal(err)
	}
	peerD.Write([]byte("x"))
	select {
	case v := <-woke:
		t.Fatalf("%q woke while held", v)
	case <-time.After(50 * time.Millisecond):
	}
	holding.Store(false)
	l.Rewatch()
	if v := <-woke; v != "d" {
		t.Fatalf("woke %q after Rewatch, want d", v)
	}
	if !lotRunning() {
		t.Fatal("the lot's goroutine is not running")
	}
	l.Stop()
	select {
	case v := <-woke:
		if v != "c" {
			t.Fatalf("Stop woke %q, want c", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not wake c")
	}
	if l.Len() != 0 || lotRunning() {
		t.Fatalf("after Stop: %d parked, goroutine running %v", l.Len(), lotRunning())
	}
	if err := l.Park(fdB, "b"); err == nil {
		t.Fatal("parked after Stop")
	}
}

// lotRunning reports whether a Lot's goroutine (run) is running; the
// pooler's park tests look for it the same way.
func lotRunning() bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if strings.HasPrefix(line, "github.com/pgturnstile/pgturnstile/internal/parking.(*Lot[") && strings.Contains(line, "]).run(") {
			return true
		}
	}
	return false
}

// ClosedConn fails as a closed conn does.
func TestClosedConn(t *testing.T) {
	var c net.Conn = ClosedConn{}
	if _, err := c.Read(nil); err != net.ErrClosed {
		t.Errorf("Read: %v", err)
	}
	if c.RemoteAddr().String() != "parked" {
		t.Errorf("RemoteAddr: %v", c.RemoteAddr())
	}
}

// Attach with loop makes a parked TCP connection a netpoll Conn (on the
// event loop's pollers) where the system has them, and without loop a
// net.Conn of package net; either way the bytes flow both ways.
func TestAttachTCP(t *testing.T) {
	for _, loop := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peer, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		fd, ok := Detach(conn)
		conn.Close()
		if !ok {
			t.Fatal("Detach failed")
		}
		back, err := Attach(fd, loop)
		if err != nil {
			t.Fatal(err)
		}
		_, adopted := back.(*netpoll.Conn)
		if want := loop && netpoll.CanLoop; adopted != want {
			t.Errorf("loop %v: a %T, want a netpoll Conn: %v", loop, back, want)
		}
		if _, err := peer.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		back.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(back, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("loop %v: read %q, %v", loop, buf, err)
		}
		if _, err := back.Write([]byte("pong")); err != nil {
			t.Fatal(err)
		}
		peer.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "pong" {
			t.Fatalf("loop %v: peer read %q, %v", loop, buf, err)
		}
		back.Close()
		peer.Close()
	}
}
