//go:build !unix

package main

import "errors"

// switchUser: PgBouncer's refusal of -u on Windows.
func switchUser(*target) error {
	return errors.New("option --user (-u) is not supported on this platform")
}
