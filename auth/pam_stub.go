//go:build !pam || !cgo

package auth

import (
	"context"
	"errors"
)

// PAMSupported says whether this build can run auth_type = pam: only a
// build with -tags pam (and cgo) links libpam; see pam.go.
const PAMSupported = false

// ErrPAMUnsupported is what the default build says about auth_type = pam.
var ErrPAMUnsupported = errors.New("auth_type = pam needs a pgturnstile built with -tags pam (cgo and libpam0g-dev); this build has no PAM support")

// PAMChecker checks passwords with PAM; in this build it refuses all.
type PAMChecker struct {
	RemoteHost string // the client's address, PAM_RHOST
}

// CheckPassword implements PasswordChecker.
func (p *PAMChecker) CheckPassword(context.Context, string, string) error {
	return ErrPAMUnsupported
}
