//go:build linux

package netpoll

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestWatchStaysRegistered: a Watch's socket stays registered,
// edge-triggered, on the poller of its wait. A handler that read part of
// what it waits for hears of the rest with no re-arming; a wait started
// again on the same poller adds nothing (no epoll_ctl); data that comes
// while no wait is under way takes the registration out, and the next
// wait adds it again and hears of that data at once; a wait on another
// poller moves the registration there, and the old poller's set no
// longer reports the socket.
func TestWatchStaysRegistered(t *testing.T) {
	c, _ := acceptPair(t)
	// The watched socket is one of package net's, as a server's is.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rc, err := srv.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	other, err := startPoller(99) // a second poller for the move
	if err != nil {
		t.Fatal(err)
	}

	got := make(chan string, 8)
	buf := make([]byte, 64)
	// The handler reads until the socket has no more, as an
	// edge-triggered loop must.
	onSocket := func(ev uint32) {
		s := ""
		for {
			n := 0
			rc.Read(func(fd uintptr) bool { n, _ = syscall.Read(int(fd), buf); return true })
			if n <= 0 {
				break
			}
			s += string(buf[:n])
			if n < len(buf) {
				break
			}
		}
		got <- s
	}
	w := NewWatch(&onSocket)
	// The Conn's handler starts and stops the Watch on the poller's
	// goroutine, as a loop does, and says how many registrations it has
	// made and where the socket is registered.
	adds := make(chan int, 8)
	onConn := func(ev uint32) {
		if ev != EvPost {
			return
		}
		if w.Watching() {
			w.Stop()
			got <- "stopped"
			return
		}
		if err := w.Start(c, rc); err != nil {
			got <- err.Error()
			return
		}
		if w.home.Load() != c.p.Load() {
			got <- "registered elsewhere"
			return
		}
		adds <- w.adds
		got <- "started"
	}
	c.SetHandler(&onConn)
	defer c.SetHandler(nil)

	expect := func(want string) {
		t.Helper()
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("got %q, want %q", s, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q (an edge missed?)", want)
		}
	}
	expectAdds := func(want int) {
		t.Helper()
		if n := <-adds; n != want {
			t.Fatalf("%d registrations made, want %d", n, want)
		}
	}
	write := func(s string) {
		t.Helper()
		if _, err := peer.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	c.Post()
	expect("started")
	expectAdds(1)
	write("ab")
	expect("ab")
	write("cd") // the next edge, with nothing re-armed
	expect("cd")
	c.Post()
	expect("stopped")
	c.Post()
	expect("started") // registered still: no epoll_ctl
	expectAdds(1)
	write("ef")
	expect("ef")
	c.Post()
	expect("stopped")
	write("gh") // no wait: a stray event takes the registration out
	waitFor(t, func() bool { return w.home.Load() == nil })
	c.Post()
	expect("started")
	expectAdds(2)
	expect("gh") // readable at Start: reported at once
	c.Post()
	expect("stopped")

	// A wait on another poller: the client moves there first (between
	// requests, as Rebalance moves it), and the registration follows.
	home := c.p.Load()
	if !c.move(home, other) {
		t.Fatal("the client did not move")
	}
	c.Post()
	expect("started")
	expectAdds(3)
	write("ij")
	expect("ij")
	c.Post()
	expect("stopped")
	// The first poller's set no longer holds the socket: its table entry
	// would take an event of it for a stray one.
	fd := -1
	rc.Control(func(f uintptr) { fd = int(f) })
	if e := home.ctl(syscall.EPOLL_CTL_DEL, fd, 0, 0); e != syscall.ENOENT {
		t.Fatalf("the old poller's set still held the socket (DEL: %v)", e)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}
