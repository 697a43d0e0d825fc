package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// checkPidfile is PgBouncer's check_pidfile, run before the listeners open:
// a pidfile naming a live process (or one it cannot judge: empty, no pid,
// a process it may not signal) means another instance runs, and we refuse
// to start; one naming a process that is gone is stale and removed
// ("stale pidfile, removing", logged by the caller when stale is true).
func checkPidfile(path string) (stale bool, err error) {
	if path == "" {
		return false, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("could not open pidfile '%s': %v", path, errnoText(err))
	}
	inUse := fmt.Errorf("pidfile '%s' exists, another instance running?", path)
	pid, ok := parsePid(b)
	if !ok {
		return false, inUse
	}
	if processMayExist(pid) {
		return false, inUse
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("could not remove stale pidfile: %v", errnoText(err))
	}
	return true, nil
}

// parsePid reads a pid as PgBouncer's atol does: leading digits, positive.
func parsePid(b []byte) (int, bool) {
	s := strings.TrimLeft(string(b), " \t\n")
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	pid, err := strconv.Atoi(s[:end])
	return pid, err == nil && pid > 0
}

// pidfile is the pidfile this process wrote, removed on exit.
type pidfile struct{ path string }

// writePidfile is PgBouncer's write_pidfile: after the listeners are open
// and the user switched, created exclusively (a pidfile that appeared since
// the check is another instance's, never overwritten), mode 0644.
func writePidfile(path string) (*pidfile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("could not open pidfile '%s': %v", path, errnoText(err))
	}
	_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("could not write pidfile '%s': %v", path, errnoText(err))
	}
	return &pidfile{path: path}, nil
}

// remove deletes the pidfile if it is still ours: one holding another pid
// (replaced by hand, or by an instance started after ours was deleted)
// belongs to that process and stays.
func (p *pidfile) remove() {
	if p == nil {
		return
	}
	b, err := os.ReadFile(p.path)
	if err != nil {
		return
	}
	if pid, ok := parsePid(b); ok && pid == os.Getpid() {
		os.Remove(p.path)
	}
}
