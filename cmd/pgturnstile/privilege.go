package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"syscall"
)

// errRunAsRoot is PgBouncer's refusal to run as root without a user to
// switch to.
var errRunAsRoot = errors.New("PgBouncer should not run as root")

// target is the OS user named by -u or the user setting.
type target struct {
	name     string
	uid, gid int
}

// lookupTarget resolves the user to switch to (-u wins over the user
// setting, as in PgBouncer); nil when neither names one.
func lookupTarget(flagUser, iniUser string) (*target, error) {
	name := flagUser
	if name == "" {
		name = iniUser
	}
	if name == "" {
		return nil, nil
	}
	if runtime.GOOS == "windows" {
		return nil, errors.New("option --user (-u) is not supported on this platform")
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("could not find user '%s' to switch to", name)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("could not find user '%s' to switch to", name)
	}
	return &target{name: name, uid: uid, gid: gid}, nil
}

// checkRoot is PgBouncer's "disallow running as root", decided before the
// listeners open: root may start only with a user to switch to that is not
// root itself (PgBouncer switches, then finds itself still root).
func checkRoot(t *target) error {
	if os.Getuid() != 0 {
		return nil
	}
	if t == nil || t.uid == 0 {
		return errRunAsRoot
	}
	return nil
}

// errnoText is strerror's text for an errno ("Operation not permitted"),
// which PgBouncer's messages carry; Go's texts are lower-case.
func errnoText(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		if s := en.Error(); s != "" && s[0] >= 'a' && s[0] <= 'z' {
			return string(s[0]-'a'+'A') + s[1:]
		}
		return en.Error()
	}
	return err.Error()
}

// chownNewLogfile gives a logfile this process created as root to the user
// it is about to become, so that reopening it (SIGHUP, RELOAD) still works
// after the switch; PgBouncer opens its logfile at the first line, by then
// as that user. A file that was there before keeps its owner.
func chownNewLogfile(path string, created bool, t *target) {
	if path == "" || !created {
		return
	}
	os.Chown(path, t.uid, t.gid)
}
