package pooler

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/listener"
)

// unixOnlyService is a Service whose only listener is the Unix socket in
// dir, on port.
func unixOnlyService(t *testing.T, dir string, port int) *Service {
	t.Helper()
	cfg := parseTestConfig(t, "[databases]\n[pgbouncer]\nauth_type = any\nlisten_addr =\n"+
		"listen_port = "+strconv.Itoa(port)+"\nunix_socket_dir = "+dir+"\n")
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// A second pooler on a Unix-socket-only config refuses to start while the
// first listens, as PgBouncer ("unix socket is in use, cannot continue"),
// and leaves the first one's socket in place: it stays reachable.
func TestUnixSocketLiveRefused(t *testing.T) {
	dir := t.TempDir()
	first := unixOnlyService(t, dir, 6543)
	if err := first.Listen(); err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second := unixOnlyService(t, dir, 6543)
	err := second.Listen()
	if !errors.Is(err, listener.ErrUnixSocketInUse) || err.Error() != "unix socket is in use, cannot continue" {
		t.Fatalf("second Listen: %v, want %q", err, listener.ErrUnixSocketInUse)
	}
	c, err := net.Dial("unix", listener.UnixSocketPath(dir, 6543))
	if err != nil {
		t.Fatalf("the first pooler's socket is gone after the refused start: %v", err)
	}
	c.Close()
}

// A socket file nobody listens on (its process died without unlinking it)
// is removed and bound again.
func TestUnixSocketStaleRemoved(t *testing.T) {
	dir := t.TempDir()
	path := listener.UnixSocketPath(dir, 6544)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	svc := unixOnlyService(t, dir, 6544)
	if err := svc.Listen(); err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer svc.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("new socket: %v", err)
	}
	c.Close()
}

// A plain file where the socket would be is not a socket of ours to
// remove: the bind fails and the file stays.
func TestUnixSocketNotASocketKept(t *testing.T) {
	dir := t.TempDir()
	path := listener.UnixSocketPath(dir, 6545)
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unixOnlyService(t, dir, 6545).Listen(); err == nil {
		t.Fatal("Listen over a regular file succeeded")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "x" {
		t.Fatalf("regular file changed: %q %v", b, err)
	}
}
