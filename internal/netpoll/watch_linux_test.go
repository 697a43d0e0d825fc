//go:build linux

package netpoll

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestWatchOneShot: a Watch's registration is one-shot. A handler that
// read part of what it waits for and calls Rearm hears of the rest; a
// Watch stopped after its event and started again (EPOLL_CTL_MOD of the
// disarmed registration) hears the next data, and data already there at
// Start is reported at once.
func TestWatchOneShot(t *testing.T) {
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

	got := make(chan string, 8)
	buf := make([]byte, 64)
	read := func() string {
		n := 0
		rc.Read(func(fd uintptr) bool { n, _ = syscall.Read(int(fd), buf); return true })
		return string(buf[:max(n, 0)])
	}
	var w *Watch
	// The watch's handler: "ab" is the first part of a reply, read and
	// waited on again.
	onSocket := func(ev uint32) {
		s := read()
		if s == "ab" {
			w.Rearm()
		}
		got <- s
	}
	w = NewWatch(&onSocket)
	// The Conn's handler starts and stops the Watch on the poller's
	// goroutine, as a loop does.
	onConn := func(ev uint32) {
		if ev != EvPost {
			return
		}
		if w.Watching() {
			w.Stop(rc)
			got <- "stopped"
			return
		}
		if err := w.Start(c, rc); err != nil {
			got <- err.Error()
			return
		}
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
			t.Fatalf("no %q (a one-shot registration left disarmed?)", want)
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
	write("ab")
	expect("ab")
	write("cd") // heard only because the handler armed it again
	expect("cd")
	c.Post()
	expect("stopped")
	c.Post()
	expect("started") // the disarmed registration, armed by MOD
	write("ef")
	expect("ef")
	c.Post()
	expect("stopped")
	write("gh")
	time.Sleep(10 * time.Millisecond) // let "gh" arrive before Start
	c.Post()
	expect("started")
	expect("gh") // readable at Start: reported at once
	c.Post()
	expect("stopped")
}
