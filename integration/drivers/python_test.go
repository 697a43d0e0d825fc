//go:build linux

package drivers

import (
	"os/exec"
	"testing"
	"time"
)

// pythonPath is Debian's interpreter, the one python3-psycopg installs
// into (a python3 earlier on PATH, e.g. pyenv's, does not have it).
const pythonPath = "/usr/bin/python3"

// TestPsycopg runs python/matrix.py with psycopg 3 (prepare_threshold=0,
// pipeline mode, COPY, a server-side cursor).
func TestPsycopg(t *testing.T) {
	t.Parallel()
	py := needTool(t, pythonPath)
	if out, err := exec.Command(py, "-c", "import psycopg").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import psycopg (%v: %s) — install the driver matrix's dependencies with scripts/test-deps.sh", py, err, out)
	}
	runBoth(t, "psycopg", func(t *testing.T, tg target) []string {
		cmd := exec.Command(py, "python/matrix.py")
		cmd.Env = append(tg.env(), "PYTHONDONTWRITEBYTECODE=1")
		return runProgram(t, cmd, 2*time.Minute)
	})
}
