//go:build pam && cgo

package auth

// auth_type = pam, as PgBouncer does it (src/pam.c): the client's
// cleartext password answers the PAM conversation of service "pgbouncer"
// (/etc/pam.d/pgbouncer), with PAM_RHOST the client's address; then
// pam_authenticate and pam_acct_mgmt must both succeed.
//
// Only a build with -tags pam has this file: it needs cgo and libpam
// (Debian: libpam0g-dev), which the default, static build must not. The
// conversation function is C, so no Go callback crosses cgo; each check
// runs on its own goroutine's thread, with no state shared between
// checks (PgBouncer runs them one at a time on one thread).

/*
#cgo LDFLAGS: -lpam
#include <security/pam_appl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int pgt_pam_conv(int n, const struct pam_message **msg, struct pam_response **resp, void *appdata) {
	if (n < 1 || n > PAM_MAX_NUM_MSG || msg == NULL || appdata == NULL)
		return PAM_CONV_ERR;
	struct pam_response *r = calloc(n, sizeof *r);
	if (r == NULL)
		return PAM_BUF_ERR;
	for (int i = 0; i < n; i++) {
		if (msg[i]->msg_style != PAM_PROMPT_ECHO_OFF)
			continue;
		r[i].resp = strdup((const char *)appdata);
		if (r[i].resp == NULL) {
			for (int j = 0; j < i; j++)
				free(r[j].resp);
			free(r);
			return PAM_CONV_ERR;
		}
	}
	*resp = r;
	return PAM_SUCCESS;
}

// pgt_pam_check returns PAM_SUCCESS or writes which call failed and why
// into errbuf.
static int pgt_pam_check(const char *confdir, const char *service, const char *user, const char *password,
			 const char *rhost, char *errbuf, size_t errlen) {
	struct pam_conv conv = { pgt_pam_conv, (void *)password };
	pam_handle_t *h = NULL;
	int rc;
	if (confdir != NULL)
		rc = pam_start_confdir(service, user, &conv, confdir, &h);
	else
		rc = pam_start(service, user, &conv, &h);
	if (rc != PAM_SUCCESS) {
		snprintf(errbuf, errlen, "pam_start() failed: %s", pam_strerror(h, rc));
		if (h != NULL)
			pam_end(h, rc);
		return rc;
	}
	rc = pam_set_item(h, PAM_RHOST, rhost);
	if (rc != PAM_SUCCESS) {
		snprintf(errbuf, errlen, "pam_set_item(): can't set PAM_RHOST to '%s'", rhost);
		pam_end(h, rc);
		return rc;
	}
	rc = pam_authenticate(h, PAM_SILENT);
	if (rc != PAM_SUCCESS) {
		snprintf(errbuf, errlen, "pam_authenticate() failed: %s", pam_strerror(h, rc));
		pam_end(h, rc);
		return rc;
	}
	rc = pam_acct_mgmt(h, PAM_SILENT);
	if (rc != PAM_SUCCESS) {
		snprintf(errbuf, errlen, "pam_acct_mgmt() failed: %s", pam_strerror(h, rc));
		pam_end(h, rc);
		return rc;
	}
	pam_end(h, rc);
	return PAM_SUCCESS;
}
*/
import "C"

import (
	"context"
	"errors"
	"strings"
	"unsafe"
)

// PAMSupported says whether this build can run auth_type = pam.
const PAMSupported = true

// ErrPAMUnsupported is not returned by this build.
var ErrPAMUnsupported = errors.New("PAM is supported by this build")

// pamService is PgBouncer's PGBOUNCER_PAM_SERVICE: existing
// /etc/pam.d/pgbouncer files keep working.
const pamService = "pgbouncer"

// pamConfDir, when set, is read instead of /etc/pam.d (tests only).
var pamConfDir string

// PAMChecker checks passwords with PAM.
type PAMChecker struct {
	RemoteHost string // the client's address, PAM_RHOST
}

// CheckPassword implements PasswordChecker.
func (p *PAMChecker) CheckPassword(_ context.Context, user, password string) error {
	if strings.IndexByte(user, 0) >= 0 || strings.IndexByte(password, 0) >= 0 {
		return errors.New("NUL byte in user name or password")
	}
	cs := func(s string) *C.char { return C.CString(s) }
	service, cuser, cpw, rhost := cs(pamService), cs(user), cs(password), cs(p.RemoteHost)
	defer func() {
		C.free(unsafe.Pointer(service))
		C.free(unsafe.Pointer(cuser))
		// The password copy is wiped before it is freed.
		C.memset(unsafe.Pointer(cpw), 0, C.size_t(len(password)))
		C.free(unsafe.Pointer(cpw))
		C.free(unsafe.Pointer(rhost))
	}()
	var confdir *C.char
	if pamConfDir != "" {
		confdir = cs(pamConfDir)
		defer C.free(unsafe.Pointer(confdir))
	}
	var buf [256]C.char
	if rc := C.pgt_pam_check(confdir, service, cuser, cpw, rhost, &buf[0], C.size_t(len(buf))); rc != C.PAM_SUCCESS {
		return errors.New(C.GoString(&buf[0]))
	}
	return nil
}
