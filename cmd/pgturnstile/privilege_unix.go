//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// switchUser becomes t as PgBouncer's change_user does: the supplementary
// groups reduced to t's primary group (only root may, and only root needs
// to), then the gid, then the uid. Since Go 1.16 these apply to every
// thread of the process on Linux, so no goroutine keeps root. A non-root
// process naming itself succeeds; naming another user fails with EPERM,
// as in PgBouncer.
func switchUser(t *target) error {
	if os.Getuid() == 0 {
		if err := syscall.Setgroups([]int{t.gid}); err != nil {
			return fmt.Errorf("failed to reset groups: %v", errnoText(err))
		}
	}
	if err := syscall.Setgid(t.gid); err != nil {
		return fmt.Errorf("failed to assume identity of user '%s': %v", t.name, errnoText(err))
	}
	if err := syscall.Setuid(t.uid); err != nil {
		return fmt.Errorf("failed to assume identity of user '%s': %v", t.name, errnoText(err))
	}
	if os.Getuid() != t.uid || os.Geteuid() != t.uid {
		return errors.New("setuid() failed to work")
	}
	return nil
}
