//go:build linux

package pooler

import (
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/listener"
)

// unixSocketService is a Unix-socket-only Service in dir with extra
// [pgbouncer] settings.
func unixSocketService(t *testing.T, dir, extra string) *Service {
	t.Helper()
	cfg := parseTestConfig(t, "[databases]\n[pgbouncer]\nauth_type = any\nlisten_addr =\nlisten_port = 6544\nunix_socket_dir = "+dir+"\n"+extra)
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// unix_socket_mode and unix_socket_group (by name or number) are the
// socket file's, as PgBouncer's change_file_mode sets them; a group that
// does not exist stops the start with PgBouncer's message.
func TestUnixSocketModeAndGroup(t *testing.T) {
	// A group this process may give a file: any as root, else one of its own.
	gid := os.Getgid()
	if os.Getuid() == 0 {
		gid = 1
	} else if gs, _ := os.Getgroups(); len(gs) > 0 {
		gid = gs[len(gs)-1]
	}
	byName := strconv.Itoa(gid)
	if g, err := user.LookupGroupId(byName); err == nil {
		byName = g.Name
	}
	for _, group := range []string{byName, strconv.Itoa(gid)} {
		dir := t.TempDir()
		svc := unixSocketService(t, dir, "unix_socket_mode = 0640\nunix_socket_group = "+group+"\n")
		if err := svc.Listen(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(listener.UnixSocketPath(dir, 6544))
		svc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0640 {
			t.Errorf("unix_socket_group = %s: mode %o, want 0640", group, got)
		}
		if got := int(fi.Sys().(*syscall.Stat_t).Gid); got != gid {
			t.Errorf("unix_socket_group = %s: gid %d, want %d", group, got, gid)
		}
	}

	dir := t.TempDir()
	err := unixSocketService(t, dir, "unix_socket_group = no-such-group-pgt\n").Listen()
	if err == nil || err.Error() != "could not find group 'no-such-group-pgt': group: unknown group no-such-group-pgt" {
		t.Fatalf("unknown group: %v", err)
	}
}

// An abstract socket (unix_socket_dir = @name) has no file to chmod or
// chown: the settings are ignored there, as in PgBouncer.
func TestUnixSocketAbstractNoChmod(t *testing.T) {
	svc := unixSocketService(t, "@pgturnstile-test-"+strconv.Itoa(os.Getpid()), "unix_socket_mode = 0600\nunix_socket_group = no-such-group-pgt\n")
	if err := svc.Listen(); err != nil {
		t.Fatalf("abstract socket: %v", err)
	}
	svc.Close()
}
