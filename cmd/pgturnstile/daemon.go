package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/pgturnstile/pgturnstile/config"
)

// daemonEnv marks the detached child of -d and names the descriptor on
// which it tells the parent it is up.
const daemonEnv = "PGTURNSTILE_DAEMON_READY_FD"

// daemonChild reports whether this process is the child -d started.
func daemonChild() bool { return os.Getenv(daemonEnv) != "" }

// checkDaemonConfig is what -d needs: a pidfile (PgBouncer's go_daemon
// refuses without one, and init scripts find the process by it) and
// somewhere for the log to go, since stderr is /dev/null from then on
// (PgBouncer's documentation requires logfile or syslog).
func checkDaemonConfig(st *config.Settings) error {
	if errDaemonPlatform != nil {
		return errDaemonPlatform
	}
	if st.Pidfile == "" {
		return errors.New("daemon needs pidfile configured")
	}
	if st.Logfile == "" && !st.Syslog {
		return errors.New("daemon needs logfile or syslog configured")
	}
	return nil
}

// daemonize runs -d. PgBouncer forks; a Go process cannot fork safely
// (its other threads do not follow), so the same binary is started again
// with the same arguments, detached: a new session (no controlling
// terminal, no signals from the caller's), stdin, stdout and stderr on
// /dev/null. The parent waits until the child has opened its listeners and
// written the pidfile, then exits 0, so that a start-stop-daemon or script
// that reads the pidfile next finds it; if the child exits first, the
// parent exits 1 (its reasons are in the logfile or syslog). It returns
// the parent's exit code.
func daemonize(stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "pgturnstile: cannot daemonize: %v\n", err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "pgturnstile: cannot daemonize: %v\n", err)
		return 1
	}
	defer r.Close()
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), daemonEnv+"=3")
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child
	cmd.SysProcAttr = detached()
	err = cmd.Start()
	w.Close()
	if err != nil {
		fmt.Fprintf(stderr, "pgturnstile: cannot daemonize: %v\n", err)
		return 1
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	if line == "ready\n" {
		// The child goes on alone (init adopts it when we exit).
		cmd.Process.Release()
		return 0
	}
	cmd.Wait()
	fmt.Fprintf(stderr, "pgturnstile: the daemon exited during startup (%v); see its log\n", cmd.ProcessState)
	return 1
}

// daemonReady tells -d's waiting parent that this child is up; it does
// nothing in a process not started by daemonize.
func daemonReady() {
	if !daemonChild() {
		return
	}
	os.Unsetenv(daemonEnv)
	f := os.NewFile(3, "daemon-ready")
	f.WriteString("ready\n")
	f.Close()
}
