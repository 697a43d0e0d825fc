//go:build unix

package netpoll

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestPeekByte: the byte waited for is returned and stays for the next
// read; a peer that closed gives io.EOF; a read deadline bounds the wait.
func TestPeekByte(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := PeekByte(s.(*net.TCPConn)); err == nil {
		t.Fatal("PeekByte with nothing sent returned before its deadline")
	}
	s.SetReadDeadline(time.Time{})
	if _, err := c.Write([]byte{0x16, 'x'}); err != nil {
		t.Fatal(err)
	}
	b, err := PeekByte(s.(*net.TCPConn))
	if err != nil || b != 0x16 {
		t.Fatalf("PeekByte = %#x, %v; want 0x16", b, err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(s, buf); err != nil || buf[0] != 0x16 || buf[1] != 'x' {
		t.Fatalf("read after the peek = %q, %v; want the bytes sent", buf, err)
	}
	c.Close()
	if _, err := PeekByte(s.(*net.TCPConn)); err != io.EOF {
		t.Fatalf("PeekByte after the peer closed: %v, want io.EOF", err)
	}
}
