//go:build linux

package integration

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// poolerProcAttr is how the harness starts the pooler: not as root
// (pgtest.PoolerProcAttr). The guards' own tests (guards_test.go) start it
// as root on purpose.
func poolerProcAttr(dir string) *syscall.SysProcAttr {
	var cred *syscall.Credential
	if pg != nil {
		cred = pg.cred
	}
	return pgtest.PoolerProcAttr(cred, dir)
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
