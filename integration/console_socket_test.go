package integration

import (
	"strconv"
	"strings"
	"testing"
)

// The pooler's own OS user logs in to the console as "pgbouncer" over the
// Unix socket without a password, as PgBouncer allows; over TCP the same
// name is "not allowed".
func TestConsoleUnixSocketLogin(t *testing.T) {
	needPG(t)
	sock := t.TempDir()
	p := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock}, ""), testUserlist)
	out, stderr, err := psql(t, "", "-X", "-tA", "-h", sock, "-p", strconv.Itoa(p.Port), "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW VERSION")
	if err != nil || !strings.HasPrefix(out, "PgBouncer ") {
		t.Fatalf("socket login: %q %v %s", out, err, stderr)
	}
	_, stderr, err = psql(t, "", "-X", "-tA", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW VERSION")
	if err == nil || !strings.Contains(stderr, "not allowed") {
		t.Fatalf("TCP login as pgbouncer: err=%v stderr=%q, want FATAL not allowed", err, stderr)
	}
}
