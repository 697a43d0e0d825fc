//go:build linux

package benchenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileKB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(path, []byte("Name:\tpgturnstile\nVmHWM:\t   13824 kB\nVmRSS:\t   12000 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if kb, err := FileKB(path, "VmRSS"); err != nil || kb != 12000 {
		t.Errorf("VmRSS = %d, %v; want 12000", kb, err)
	}
	if kb, err := FileKB(path, "VmHWM"); err != nil || kb != 13824 {
		t.Errorf("VmHWM = %d, %v; want 13824", kb, err)
	}
	if _, err := FileKB(path, "VmSwap"); err == nil || !strings.Contains(err.Error(), "no VmSwap in "+path) {
		t.Errorf("missing field: %v", err)
	}
	if kb, err := StatusKB(os.Getpid(), "VmRSS"); err != nil || kb <= 0 {
		t.Errorf("our own VmRSS = %d, %v", kb, err)
	}
}

// TestPoolerINIHead: the head both tools' ini start with, byte for byte,
// so that the rest each adds lands in [pgbouncer].
func TestPoolerINIHead(t *testing.T) {
	e := &Env{PGPort: 5432}
	got := e.PoolerINIHead("bench", 6432, "/tmp/x/userlist.txt")
	want := `[databases]
bench = host=127.0.0.1 port=5432 dbname=bench

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 6432
unix_socket_dir =
auth_type = scram-sha-256
auth_file = /tmp/x/userlist.txt
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
