//go:build pam && cgo

package auth

// Runs only in the PAM build: go test -tags pam ./auth -run PAM
// (needs libpam0g-dev; scripts/test-deps.sh installs it). The PAM
// configuration is a temporary directory read with pam_start_confdir, its
// "pgbouncer" service checking the password with pam_exec and a script.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPAMChecker(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "check.sh")
	// pam_exec expose_authtok writes the password to stdin (NUL-ended).
	if err := os.WriteFile(script, []byte(`#!/bin/sh
pw=$(tr -d '\000')
[ "$PAM_USER" = alice ] && [ "$pw" = "s3cret" ] && [ "$PAM_RHOST" = 10.1.2.3 ]
`), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := "auth required pam_exec.so quiet expose_authtok " + script + "\n" +
		"account required pam_permit.so\n"
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	old := pamConfDir
	pamConfDir = dir
	defer func() { pamConfDir = old }()

	p := &PAMChecker{RemoteHost: "10.1.2.3"}
	if err := p.CheckPassword(context.Background(), "alice", "s3cret"); err != nil {
		t.Fatalf("right password: %v", err)
	}
	for _, tc := range []struct{ user, pw, host string }{
		{"alice", "wrong", "10.1.2.3"},
		{"bob", "s3cret", "10.1.2.3"},
		{"alice", "s3cret", "10.9.9.9"},
	} {
		err := (&PAMChecker{RemoteHost: tc.host}).CheckPassword(context.Background(), tc.user, tc.pw)
		if err == nil || !strings.HasPrefix(err.Error(), "pam_authenticate() failed: ") {
			t.Errorf("%+v: got %v, want pam_authenticate() failed", tc, err)
		}
	}
	// A service whose account step refuses.
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer"), []byte("auth required pam_permit.so\naccount required pam_deny.so\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckPassword(context.Background(), "alice", "s3cret"); err == nil || !strings.HasPrefix(err.Error(), "pam_acct_mgmt() failed: ") {
		t.Errorf("account refused: %v", err)
	}
}
