//go:build linux

package main

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer echoes every connection and reports each one's end on closed.
func echoServer(t *testing.T) (addr string, closed chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	closed = make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				io.Copy(c, c)
				c.Close()
				closed <- struct{}{}
			}()
		}
	}()
	return ln.Addr().String(), closed
}

// TestRelays: both designs carry a short message and one larger than
// their buffer both ways, and close the server side when the client leaves.
func TestRelays(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, to string) string
	}{
		{"goroutines", func(t *testing.T, to string) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go relayGoroutines(ln, to)
			return ln.Addr().String()
		}},
		{"epoll", startEpoll(false)},
		{"epoll raw", startEpoll(true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, closed := echoServer(t)
			c, err := net.Dial("tcp", tc.start(t, to))
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			big := bytes.Repeat([]byte("0123456789abcdef"), 10<<10) // 160 KiB
			for _, msg := range [][]byte{[]byte("hello"), big} {
				go c.Write(msg)
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("%d bytes: %v", len(msg), err)
				}
				if !bytes.Equal(got, msg) {
					t.Fatalf("%d bytes came back changed", len(msg))
				}
			}
			c.Close()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the relay kept the server side open after the client left")
			}
		})
	}
}

func startEpoll(raw bool) func(t *testing.T, to string) string {
	return func(t *testing.T, to string) string {
		l, err := newEpollRelay("127.0.0.1:0", to, raw)
		if err != nil {
			t.Fatal(err)
		}
		go l.run()
		return l.addr.String()
	}
}
