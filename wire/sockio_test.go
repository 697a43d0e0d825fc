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
