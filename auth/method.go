package auth

import (
	"fmt"
	"strconv"
	"strings"
)

// Method is a client authentication method (PgBouncer's auth_type).
type Method int

const (
	MethodTrust Method = iota + 1 // no password; the user must exist
	MethodAny                     // no password, any user name
	MethodPlain                   // AuthenticationCleartextPassword
	MethodMD5                     // MD5 challenge; SCRAM when the secret is SCRAM
	MethodSCRAM                   // SCRAM-SHA-256
	MethodLDAP                    // cleartext password checked by an LDAP bind (ldap.go)
	MethodPAM                     // cleartext password checked by PAM (pam.go, -tags pam)
)

var methodNames = [...]string{
	MethodTrust: "trust",
	MethodAny:   "any",
	MethodPlain: "plain",
	MethodMD5:   "md5",
	MethodSCRAM: "scram-sha-256",
	MethodLDAP:  "ldap",
	MethodPAM:   "pam",
}

// String returns the auth_type spelling.
func (m Method) String() string {
	if m >= MethodTrust && int(m) < len(methodNames) {
		return methodNames[m]
	}
	return "Method(" + strconv.Itoa(int(m)) + ")"
}

// ParseMethod parses an auth_type value, ignoring case as PgBouncer does.
// "cert" and "hba" are refused: the pooler resolves those to one of the
// methods above per connection. "ldap" and "pam" are not run by
// Authenticate but by AuthenticateExternal, with their options.
func ParseMethod(authType string) (Method, error) {
	for m := MethodTrust; int(m) < len(methodNames); m++ {
		if strings.EqualFold(methodNames[m], authType) {
			return m, nil
		}
	}
	switch strings.ToLower(authType) {
	case "cert", "hba":
		return 0, fmt.Errorf("auth_type %q is not supported yet", authType)
	}
	return 0, fmt.Errorf("invalid auth_type %q (want trust, any, plain, md5, scram-sha-256, ldap or pam)", authType)
}
