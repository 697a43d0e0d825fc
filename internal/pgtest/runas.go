//go:build linux

package pgtest

import (
	"os"
	"path/filepath"
	"syscall"
)

// capDACOverride is CAP_DAC_OVERRIDE (linux/capability.h).
const capDACOverride = 1

// PoolerProcAttr is how the test harnesses start the pooler: in its own
// process group, killed with the test binary. The pooler refuses to run
// as root (as PgBouncer), and the tests run as root in CI, so there it
// runs as cred (the OS user PostgreSQL runs as, Data.Cred), keeping
// CAP_DAC_OVERRIDE so that it still reads and writes the files the tests
// create as root (0600 configs and userlists, TLS keys, temp dirs,
// rewritten before a RELOAD). The capability takes effect only once the
// binary runs, so dir (its working directory, a t.TempDir() whose parent
// is root's 0700) is made reachable first. Not root, or with cred nil, the
// pooler runs as we do.
func PoolerProcAttr(cred *syscall.Credential, dir string) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 && cred != nil {
		a.Credential = cred
		a.AmbientCaps = []uintptr{capDACOverride}
		if dir != "" {
			os.Chmod(filepath.Dir(dir), 0o711)
		}
	}
	return a
}
