//go:build linux

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// capDACOverride is CAP_DAC_OVERRIDE (linux/capability.h).
const capDACOverride = 1

// poolerProcAttr is how the harness starts the pooler. The pooler refuses
// to run as root (as PgBouncer), and the tests run as root in CI, so there
// it runs as the OS user PostgreSQL runs as, keeping CAP_DAC_OVERRIDE so
// that it still reads and writes the files the tests create as root (0600
// configs and userlists, TLS keys, temp dirs, rewritten before a RELOAD).
// The capability takes effect only once the binary runs, so dir (its
// working directory, a t.TempDir() whose parent is root's 0700) is made
// reachable first. The guards' own tests (guards_test.go) start it as
// root on purpose.
func poolerProcAttr(dir string) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 && pg != nil && pg.cred != nil {
		a.Credential = pg.cred
		a.AmbientCaps = []uintptr{capDACOverride}
		if dir != "" {
			os.Chmod(filepath.Dir(dir), 0o711)
		}
	}
	return a
}

// psqlAsPooler is psql run as the pooler's OS user: the console lets that
// user in as "pgbouncer" over the Unix socket without a password.
func psqlAsPooler(t testing.TB, password string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return psqlWith(t, func(cmd *exec.Cmd) {
		a := poolerProcAttr("")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.Credential, AmbientCaps: a.AmbientCaps}
	}, password, args...)
}
