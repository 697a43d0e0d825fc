//go:build linux

package drivers

import (
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// pgjdbcJar is where Debian's libpostgresql-jdbc-java puts pgjdbc.
const pgjdbcJar = "/usr/share/java/postgresql.jar"

// TestPgjdbc compiles java/Matrix.java against pgjdbc and runs it with
// prepareThreshold=1 (batches, CopyManager, setFetchSize with autocommit
// off). The JVM runs in UTC, so pgjdbc's TimeZone startup parameter is UTC.
func TestPgjdbc(t *testing.T) {
	t.Parallel()
	javac := needTool(t, "javac")
	java := needTool(t, "java")
	needFile(t, pgjdbcJar, "pgjdbc ("+pgjdbcJar+")")
	classes := t.TempDir()
	if out, err := exec.Command(javac, "-encoding", "UTF-8", "-cp", pgjdbcJar, "-d", classes, filepath.Join("java", "Matrix.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	runBoth(t, "pgjdbc", func(t *testing.T, tg target) []string {
		q := url.Values{
			"user":             {drvUser},
			"password":         {drvPassword},
			"sslmode":          {"disable"},
			"prepareThreshold": {"1"},
			"connectTimeout":   {"10"},
		}
		jdbcURL := fmt.Sprintf("jdbc:postgresql://127.0.0.1:%d/%s?%s", tg.port, tg.db, q.Encode())
		cmd := exec.Command(java, "-Duser.timezone=UTC", "-Dfile.encoding=UTF-8", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-cp", classes+":"+pgjdbcJar, "Matrix", jdbcURL)
		cmd.Env = tg.env()
		return runProgram(t, cmd, 2*time.Minute)
	})
}
