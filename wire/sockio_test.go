//go:build linux

package wire

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// socketPair returns both ends of a connection over network ("tcp" or
// "unix").
func socketPair(t *testing.T, network string) (a, b net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- nil
			return
		}
		done <- c
	}()
	a, err = net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-done
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestSocketIOIsRawOnlyForPlainSockets(t *testing.T) {
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if got := SocketIO(p1); got != io.ReadWriter(p1) {
		t.Fatalf("net.Pipe: got %T, want the conn itself", got)
	}
	for _, network := range []string{"tcp", "unix"} {
		a, _ := socketPair(t, network)
		if _, ok := SocketIO(a).(*sockIO); !ok {
			t.Fatalf("%s: got %T, want *sockIO", network, SocketIO(a))
		}
	}
}

// TestSocketIOStream sends more than the socket buffers hold, so writes
// meet a full buffer (EAGAIN, wait, partial writes) and reads an empty one.
func TestSocketIOStream(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			a, b := socketPair(t, network)
			w, r := SocketIO(a), SocketIO(b)
			want := make([]byte, 8<<20)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			errc := make(chan error, 1)
			go func() {
				// Uneven chunk sizes, some larger than a socket buffer.
				for off := 0; off < len(want); {
					n := min(1+rng.IntN(3<<20), len(want)-off)
					if m, err := w.Write(want[off : off+n]); err != nil || m != n {
						errc <- errors.Join(err, errors.New("short write"))
						return
					}
					off += n
				}
				errc <- a.(interface{ CloseWrite() error }).CloseWrite()
			}()
			got, err := io.ReadAll(r) // ends at io.EOF from the half-close
			if err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("received %d bytes, want %d identical", len(got), len(want))
			}
			if n, err := r.Read(make([]byte, 10)); n != 0 || err != io.EOF {
				t.Fatalf("read after EOF = %d, %v; want 0, io.EOF", n, err)
			}
		})
	}
}

func TestSocketIOReadDeadline(t *testing.T) {
	a, _ := socketPair(t, "tcp")
	r := SocketIO(a)
	a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := r.Read(make([]byte, 10))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v; want os.ErrDeadlineExceeded", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v is not a net.Error timeout", err)
	}
	// Clearing the deadline makes the socket usable again.
	a.SetReadDeadline(time.Time{})
}

func TestSocketIOCloseWakesReader(t *testing.T) {
	a, _ := socketPair(t, "tcp")
	r := SocketIO(a)
	errc := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the read wait in the netpoller
	a.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed conn: %v; want net.ErrClosed", err)
	}
}

func TestSocketIOWriteToClosedPeer(t *testing.T) {
	a, b := socketPair(t, "tcp")
	w := SocketIO(a)
	b.Close()
	// The first writes may still be taken by the kernel; once the peer's
	// reset arrives a write must fail with an error, not hang or succeed.
	buf := make([]byte, 64<<10)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = w.Write(buf)
		time.Sleep(time.Millisecond)
	}
	if err == nil {
		t.Fatal("writes to a closed peer kept succeeding")
	}
}

func TestSocketIOAllocs(t *testing.T) {
	a, b := socketPair(t, "tcp")
	w, r := SocketIO(a), SocketIO(b)
	msg := []byte("0123456789")
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("write+read: %v allocs/op, want 0", allocs)
	}
}

// echoAfter answers every request read from conn with reply, after delay.
func echoAfter(conn net.Conn, reqLen int, reply []byte, delay time.Duration) {
	buf := make([]byte, reqLen)
	for {
		if _, err := io.ReadFull(conn, buf); err != nil {
			return
		}
		time.Sleep(delay)
		if _, err := conn.Write(reply); err != nil {
			return
		}
	}
}

// TestWriteAwaitReplySavesTheEmptyRead: a plain Write then Read of a reply
// that takes a moment finds an empty socket first; WriteAwaitReply then
// Read does not. (The counter is what tells them apart: both must work.)
func TestWriteAwaitReplySavesTheEmptyRead(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			a, b := socketPair(t, network)
			// 5 ms: long enough that a loaded machine still reads before
			// the reply in most rounds of the plain case.
			go echoAfter(b, 4, []byte("pong"), 5*time.Millisecond)
			s := SocketIO(a).(*sockIO)
			a.SetReadDeadline(time.Now().Add(20 * time.Second)) // a lost wake-up fails, not hangs
			const rounds = 50
			buf := make([]byte, 4)
			roundTrips := func(write func([]byte) (int, error)) int {
				before := s.emptyReads
				for i := range rounds {
					if n, err := write([]byte("ping")); n != 4 || err != nil {
						t.Fatalf("round %d: write = %d, %v", i, n, err)
					}
					if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "pong" {
						t.Fatalf("round %d: read %q, %v; want pong", i, buf, err)
					}
				}
				return s.emptyReads - before
			}
			if plain := roundTrips(s.Write); plain < rounds/2 {
				t.Fatalf("Write then Read: %d empty reads in %d rounds; the reply takes 5 ms, so most should be", plain, rounds)
			}
			if awaited := roundTrips(s.WriteAwaitReply); awaited > rounds/10 {
				t.Fatalf("WriteAwaitReply then Read: %d empty reads in %d rounds, want (almost) none", awaited, rounds)
			}
		})
	}
}

// TestWriteAwaitReplyFastPeer: a reply that arrives while the write is
// still returning must wake the wait (it would hang if the write came
// before net reset the socket's readiness).
func TestWriteAwaitReplyFastPeer(t *testing.T) {
	a, b := socketPair(t, "tcp")
	go echoAfter(b, 4, []byte("pong"), 0)
	s := SocketIO(a).(*sockIO)
	a.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 4)
	for i := range 2000 {
		if n, err := s.WriteAwaitReply([]byte("ping")); n != 4 || err != nil {
			t.Fatalf("round %d: write = %d, %v", i, n, err)
		}
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "pong" {
			t.Fatalf("round %d: read %q, %v; want pong", i, buf, err)
		}
	}
}

// TestWriteAwaitReplyDeadline: with no reply the wait ends at the read
// deadline; the write itself succeeded, and the next Read reports the
// timeout.
func TestWriteAwaitReplyDeadline(t *testing.T) {
	a, b := socketPair(t, "tcp")
	s := SocketIO(a).(*sockIO)
	a.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if n, err := s.WriteAwaitReply([]byte("ping")); n != 4 || err != nil {
		t.Fatalf("write = %d, %v; want 4, nil", n, err)
	}
	if _, err := s.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the wait: %v; want os.ErrDeadlineExceeded", err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "ping" {
		t.Fatalf("peer read %q, %v; want ping", got, err)
	}
	// An expired deadline before the call: the write still goes out.
	if n, err := s.WriteAwaitReply([]byte("more")); n != 4 || err != nil {
		t.Fatalf("write past the deadline = %d, %v; want 4, nil", n, err)
	}
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "more" {
		t.Fatalf("peer read %q, %v; want more", got, err)
	}
}

// TestWriteAwaitReplyFullBuffer: a request larger than the socket buffers
// is finished by an ordinary Write, in order, before the reply is awaited.
func TestWriteAwaitReplyFullBuffer(t *testing.T) {
	a, b := socketPair(t, "tcp")
	s := SocketIO(a).(*sockIO)
	want := make([]byte, 8<<20)
	rand.NewChaCha8([32]byte{3, 4}).Read(want)
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, len(want))
		if _, err := io.ReadFull(b, buf); err != nil {
			got <- nil
			return
		}
		b.Write([]byte("done"))
		got <- buf
	}()
	a.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, err := s.WriteAwaitReply(want); n != len(want) || err != nil {
		t.Fatalf("write = %d, %v; want %d, nil", n, err, len(want))
	}
	if !bytes.Equal(<-got, want) {
		t.Fatal("peer did not receive the request intact")
	}
	reply := make([]byte, 4)
	if _, err := io.ReadFull(s, reply); err != nil || string(reply) != "done" {
		t.Fatalf("reply %q, %v; want done", reply, err)
	}
}

func TestWriteAwaitReplyClosed(t *testing.T) {
	a, _ := socketPair(t, "tcp")
	s := SocketIO(a).(*sockIO)
	a.Close()
	if _, err := s.WriteAwaitReply([]byte("ping")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed conn: %v; want net.ErrClosed", err)
	}
}

func TestWriteAwaitReplyAllocs(t *testing.T) {
	a, b := socketPair(t, "tcp")
	go echoAfter(b, 4, []byte("pong"), 0)
	s := SocketIO(a).(*sockIO)
	w := NewWriter(s, 64)
	buf, ping := make([]byte, 4), []byte("ping")
	allocs := testing.AllocsPerRun(500, func() {
		w.Write(ping)
		if err := w.FlushAwaitReply(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("FlushAwaitReply+read: %v allocs/op, want 0", allocs)
	}
}
