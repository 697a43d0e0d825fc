package config

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// eventLoopChildEnv marks the test binary run again by
// TestEventLoopDefaultEnv, with EventLoopDefaultEnv set for its init.
const eventLoopChildEnv = "PGTURNSTILE_CONFIG_TEST_CHILD"

// TestEventLoopDefaultEnv: PGTURNSTILE_EVENT_LOOP_DEFAULT, read when the
// package starts, is event_loop's default (what make test's second pass
// runs under), and a file's event_loop line still wins. The variable is
// read by init, so each case runs in a child process that starts with it.
func TestEventLoopDefaultEnv(t *testing.T) {
	if os.Getenv(eventLoopChildEnv) == "1" {
		env := os.Getenv(EventLoopDefaultEnv)
		want := env == "1"
		if got := Default().Settings.EventLoop; got != want {
			t.Fatalf("%s=%q: default event_loop %v, want %v", EventLoopDefaultEnv, env, got, want)
		}
		for _, line := range []string{"0", "1"} {
			c, err := Parse("test.ini", []byte("[databases]\n[pgbouncer]\nevent_loop = "+line+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Settings.EventLoop; got != (line == "1") {
				t.Fatalf("%s=%q, event_loop = %s in the file: %v", EventLoopDefaultEnv, env, line, got)
			}
		}
		return
	}
	for _, env := range []string{"1", "0", "", "yes"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestEventLoopDefaultEnv$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), eventLoopChildEnv+"=1", EventLoopDefaultEnv+"="+env)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestEventLoopDefaultEnv") {
			t.Fatalf("%s=%q: %v\n%s", EventLoopDefaultEnv, env, err, out)
		}
	}
}
