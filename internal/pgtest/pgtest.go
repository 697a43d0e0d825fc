//go:build linux

// Package pgtest holds what the integration test packages share: a
// throwaway PostgreSQL 15 data directory initialised as the postgres OS
// user (PostgreSQL refuses root), free ports below the ephemeral range,
// and the pooler binary built once per test run. Only tests import it.
package pgtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// BinDir is where the machine image (Debian's postgresql-15) installs the
// server binaries.
const BinDir = "/usr/lib/postgresql/15/bin"

// Dirs is a new cluster's layout under one temporary root.
type Dirs struct {
	Root, Data, Socket, Log string
	// Cred runs PostgreSQL as the postgres OS user when the tests run as
	// root; nil otherwise.
	Cred *syscall.Credential
}

// InitDB creates a temporary root (prefix names it), the data and socket
// directories owned by the user that will run PostgreSQL, and runs initdb
// with trust for local and authHost for host connections.
func InitDB(prefix, authHost string) (*Dirs, error) {
	if _, err := os.Stat(filepath.Join(BinDir, "postgres")); err != nil {
		return nil, fmt.Errorf("PostgreSQL 15 binaries not found in %s (install postgresql-15): %w", BinDir, err)
	}
	root, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	d := &Dirs{Root: root, Data: filepath.Join(root, "data"), Socket: filepath.Join(root, "sock"), Log: filepath.Join(root, "postgres.log")}
	// The postgres OS user must be able to traverse the root.
	if err := os.Chmod(root, 0o755); err != nil {
		return d, err
	}
	for _, dir := range []string{d.Data, d.Socket} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return d, err
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return d, fmt.Errorf("running as root needs a postgres OS user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		d.Cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		for _, dir := range []string{d.Data, d.Socket} {
			if err := os.Chown(dir, uid, gid); err != nil {
				return d, err
			}
		}
	}
	initdb := exec.Command(filepath.Join(BinDir, "initdb"),
		"-D", d.Data, "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync",
		"--auth-local=trust", "--auth-host="+authHost)
	initdb.Dir = root
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: d.Cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return d, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return d, nil
}

// FreePort returns a TCP port below 32768 (outside Linux's default
// ephemeral range, so an outgoing connection cannot take it) that is free
// right now.
func FreePort() (int, error) {
	for i := 0; i < 200; i++ {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("no free port found in 20000-31999")
}

// TailFile returns the last lines of a file, for failure messages.
func TailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// BuildPooler builds ./cmd/pgturnstile of the module at root into out, with
// the race detector when PGTURNSTILE_RACE is set; PGTURNSTILE_BIN names a
// prebuilt binary instead.
func BuildPooler(root, out string) (string, error) {
	if p := os.Getenv("PGTURNSTILE_BIN"); p != "" {
		return filepath.Abs(p)
	}
	args := []string{"build", "-o", out}
	if os.Getenv("PGTURNSTILE_RACE") != "" {
		args = append(args, "-race")
	}
	cmd := exec.Command(GoTool(), append(args, "./cmd/pgturnstile")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/pgturnstile: %v\n%s", err, b)
	}
	return out, nil
}

// GoTool is the go command for building test binaries.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go" // where the machine image installs Go
}

// Guard makes a TestMain clean up whatever way it ends: on SIGINT, SIGTERM
// or SIGHUP it runs cleanup and exits 2; the function it returns, deferred
// with the TestMain's exit code, turns a panic into code 2 and runs cleanup,
// telling it whether the run failed. name prefixes the messages.
func Guard(name string, cleanup func(failed bool)) func(code *int) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "%s: %v: stopping PostgreSQL and poolers\n", name, s)
		cleanup(true)
		os.Exit(2)
	}()
	return func(code *int) {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "%s: panic: %v\n", name, r)
			*code = 2
		}
		cleanup(*code != 0)
	}
}
