//go:build linux

package listener

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestClearUnixSocket: a live socket is refused with PgBouncer's words and
// left; a stale one (its process gone) is removed; no file is no error.
func TestClearUnixSocket(t *testing.T) {
	dir := t.TempDir()
	path := UnixSocketPath(dir, 6432)
	if path != dir+"/.s.PGSQL.6432" {
		t.Fatalf("UnixSocketPath = %q", path)
	}
	if err := ClearUnixSocket(path); err != nil {
		t.Fatalf("no socket yet: %v", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := ClearUnixSocket(path); !errors.Is(err, ErrUnixSocketInUse) {
		t.Fatalf("live socket: %v, want %v", err, ErrUnixSocketInUse)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the closed listener's file: %v", err)
	}
	if err := ClearUnixSocket(path); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the stale socket is still there: %v", err)
	}
}

// TestAcceptDeadlineAndClose: a deadline set with SetDeadline reaches the
// accept loop's acceptor (a timeout), clearing it lets a connection in,
// and Close ends the loop.
func TestAcceptDeadlineAndClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accept, stop := StartAccept(ln)
	defer stop()
	SetDeadline(ln, time.Unix(1, 0))
	var ne net.Error
	if _, err := accept(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("accept past the deadline: %v, want a timeout", err)
	}
	SetDeadline(ln, time.Time{})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	if got.RemoteAddr().String() != c.LocalAddr().String() {
		t.Errorf("accepted %v, dialled from %v", got.RemoteAddr(), c.LocalAddr())
	}
	got.Close()
	if err := Close(ln); err != nil {
		t.Fatal(err)
	}
	if _, err := accept(); err == nil {
		t.Error("accept after Close succeeded")
	}
}
