//go:build linux

package integration

import (
	"strconv"
	"strings"
	"testing"
)

// The pooler's own OS user logs in to the console as "pgbouncer" over the
// Unix socket without a password, as PgBouncer allows; over TCP the same
// name must authenticate like any other user.
func TestConsoleUnixSocketLogin(t *testing.T) {
	needPG(t)
	sock := t.TempDir()
	p := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock}, ""), testUserlist)
	out, stderr, err := psqlAsPooler(t, "", "-X", "-tA", "-h", sock, "-p", strconv.Itoa(p.Port), "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW VERSION")
	if err != nil || !strings.HasPrefix(out, "PgBouncer ") {
		t.Fatalf("socket login: %q %v %s", out, err, stderr)
	}
	// Over TCP the name is a user like any other, and one the userlist
	// does not have: it is asked for a password (the mock exchange, so
	// that nothing tells it the user does not exist) and refused like a
	// wrong password.
	_, stderr, err = psql(t, "", "-X", "-w", "-tA", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW VERSION")
	if err == nil || !strings.Contains(stderr, "no password supplied") {
		t.Fatalf("TCP login as pgbouncer without a password: err=%v stderr=%q, want a password request", err, stderr)
	}
	_, stderr, err = psql(t, "guess", "-X", "-tA", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW VERSION")
	if err == nil || !strings.Contains(stderr, "SASL authentication failed") {
		t.Fatalf("TCP login as pgbouncer with a password: err=%v stderr=%q, want FATAL SASL authentication failed", err, stderr)
	}
}
