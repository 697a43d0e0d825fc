//go:build linux

package drivers

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestNode runs node/matrix.js with node-postgres (named queries, pg-cursor)
// from node/node_modules, installed by scripts/test-deps.sh.
func TestNode(t *testing.T) {
	t.Parallel()
	node := needTool(t, "node")
	needFile(t, filepath.Join("node", "node_modules", "pg", "package.json"), "node-postgres (integration/drivers/node/node_modules/pg)")
	needFile(t, filepath.Join("node", "node_modules", "pg-cursor", "package.json"), "pg-cursor (integration/drivers/node/node_modules/pg-cursor)")
	runBoth(t, "node-postgres", func(t *testing.T, tg target) []string {
		cmd := exec.Command(node, "matrix.js")
		cmd.Dir = "node"
		cmd.Env = tg.env()
		return runProgram(t, cmd, 2*time.Minute)
	})
}
