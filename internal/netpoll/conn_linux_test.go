//go:build linux

package netpoll

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// acceptPair returns a Conn accepted by an Acceptor and the client end.
func acceptPair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	return acceptPairOn(t, "127.0.0.1:0")
}

func acceptPairOn(t *testing.T, listen string) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := NewAcceptor(ln)
	if !ok {
		t.Fatal("NewAcceptor failed on a TCP listener")
	}
	t.Cleanup(func() { ln.Close(); a.Close() })
	dialed := make(chan net.Conn, 1)
	go func() {
		port := ln.Addr().(*net.TCPAddr).Port
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Error(err)
			close(dialed)
			return
		}
		dialed <- c
	}()
	c, err := a.Accept()
	if err != nil {
		t.Fatal(err)
	}
	peer := <-dialed
	if peer == nil {
		t.FailNow()
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

func TestAcceptedConnAddressesAndEcho(t *testing.T) {
	// On a wildcard listener the own address is looked up (getsockname);
	// on a specific one it is the listener's.
	for _, listen := range []string{"0.0.0.0:0", "127.0.0.1:0"} {
		c, peer := acceptPairOn(t, listen)
		if got, want := c.RemoteAddr().String(), peer.LocalAddr().String(); got != want {
			t.Errorf("listening on %s: RemoteAddr %s, the peer is %s", listen, got, want)
		}
		if got, want := c.LocalAddr().String(), peer.RemoteAddr().String(); got != want {
			t.Errorf("listening on %s: LocalAddr %s, the peer dialled %s", listen, got, want)
		}
	}
	c, peer := acceptPair(t)
	// Round trips of growing size: each Read after a short one waits for
	// readiness first (drained), which must not lose a wake-up.
	buf := make([]byte, 64<<10)
	for i := 1; i <= 300; i++ {
		msg := bytes.Repeat([]byte{byte(i)}, i*37)
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 0, len(msg))
		for len(got) < len(msg) {
			n, err := c.Read(buf[:min(len(buf), len(msg)-len(got)+7)])
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			got = append(got, buf[:n]...)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("round %d: read %d bytes that differ from the %d sent", i, len(got), len(msg))
		}
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("round %d: echo: %v", i, err)
		}
	}
	peer.Close()
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d, %v; want 0, EOF", n, err)
	}
}

func TestLargeWriteWaitsForRoom(t *testing.T) {
	c, peer := acceptPair(t)
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	n, err := c.Write(data)
	if err != nil || n != len(data) {
		t.Fatalf("Write: %d, %v; want %d, nil", n, err, len(data))
	}
	c.Close()
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(data))
	}
}

func TestReadDeadline(t *testing.T) {
	c, peer := acceptPair(t)
	buf := make([]byte, 16)
	c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	_, err := c.Read(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past its deadline: %v; want a timeout", err)
	}
	// An expired deadline fails a read even with bytes waiting, as net's.
	peer.Write([]byte("x"))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with the deadline still passed: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "x" {
		t.Fatalf("Read after clearing the deadline: %q, %v", buf[:n], err)
	}
	// A deadline moved to now ends a Read waiting in another goroutine.
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.SetReadDeadline(time.Now())
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read interrupted by SetReadDeadline(now): %v", err)
	}
	// A later deadline moved before it fires does not fire.
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	c.SetReadDeadline(time.Now().Add(time.Hour))
	go func() {
		time.Sleep(60 * time.Millisecond)
		peer.Write([]byte("y"))
	}()
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "y" {
		t.Fatalf("Read under a deadline moved later: %q, %v", buf[:n], err)
	}
}

func TestCloseEndsWaitingRead(t *testing.T) {
	c, _ := acceptPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read ended by Close: %v; want net.ErrClosed", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	rc, _ := c.SyscallConn()
	if err := rc.Control(func(uintptr) {}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Control after Close: %v", err)
	}
}

func TestRawConnReadWaitsForReadiness(t *testing.T) {
	c, peer := acceptPair(t)
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		peer.Write([]byte("hello"))
	}()
	var got []byte
	calls := 0
	buf := make([]byte, 16)
	err = rc.Read(func(fd uintptr) bool {
		calls++
		n, again, err := Read(fd, buf)
		if again {
			return false
		}
		if err == nil {
			got = append(got, buf[:n]...)
		}
		return true
	})
	if err != nil || string(got) != "hello" {
		t.Fatalf("RawConn.Read: %q, %v", got, err)
	}
	if calls < 2 {
		t.Fatalf("f was called %d times; the first call had nothing to read", calls)
	}
}

func TestAcceptorDeadlineAndClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, ok := NewAcceptor(ln)
	if !ok {
		t.Fatal("NewAcceptor failed")
	}
	a.SetDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := a.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Accept past the deadline: %v", err)
	}
	a.SetDeadline(time.Time{})
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			c.Write([]byte("z"))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	c, err := a.Accept()
	if err != nil {
		t.Fatalf("Accept after clearing the deadline: %v", err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'z' {
		t.Fatalf("read %q, %v", b, err)
	}
	c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := a.Accept()
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	a.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept ended by Close: %v; want net.ErrClosed", err)
	}
}

func TestNewAcceptorOnlyTCP(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", dir+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, ok := NewAcceptor(ln); ok {
		t.Fatal("NewAcceptor accepted a Unix listener")
	}
}

// A descriptor number closed and reused by a new connection: the old
// Conn's late events and operations must not reach the new one.
func TestClosedConnDoesNotTouchReusedDescriptor(t *testing.T) {
	for range 50 {
		c1, p1 := acceptPair(t)
		fd := c1.fd
		c1.Close()
		p1.Write([]byte("late")) // the peer of a closed socket
		c2, p2 := acceptPair(t)
		if _, err := c1.Read(make([]byte, 4)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on the closed Conn: %v", err)
		}
		p2.Write([]byte("new"))
		b := make([]byte, 3)
		if _, err := io.ReadFull(c2, b); err != nil || string(b) != "new" {
			t.Fatalf("new Conn (fd %d, old %d): %q, %v", c2.fd, fd, b, err)
		}
	}
}

// The peer's last bytes and its close arrive together: the read that
// returns the bytes leaves the end of the stream for the next Read, which
// must see it (not wait for a readiness that came and went).
func TestEOFRightAfterTheLastBytes(t *testing.T) {
	for i := range 100 {
		c, peer := acceptPair(t)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		// A first exchange, so that the reads below start from a socket
		// Read has seen empty.
		peer.Write([]byte("ping"))
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("round %d: %q, %v", i, buf[:n], err)
		}
		peer.Write([]byte("abc"))
		peer.Close()
		var got []byte
		for {
			n, err := c.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("round %d: after %q: %v (want the bytes, then EOF)", i, got, err)
			}
		}
		if string(got) != "abc" {
			t.Fatalf("round %d: read %q before EOF; want abc", i, got)
		}
	}
}
