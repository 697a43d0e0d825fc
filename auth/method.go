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
)

var methodNames = [...]string{
	MethodTrust: "trust",
	MethodAny:   "any",
	MethodPlain: "plain",
	MethodMD5:   "md5",
	MethodSCRAM: "scram-sha-256",
}

// String returns the auth_type spelling.
func (m Method) String() string {
	if m >= MethodTrust && int(m) < len(methodNames) {
		return methodNames[m]
	}
	return "Method(" + strconv.Itoa(int(m)) + ")"
}

// ParseMethod parses an auth_type value, ignoring case as PgBouncer does. PgBouncer's other values are
// recognised but refused for now: "cert" and "hba" need TLS and the HBA file
// (the pooler resolves those to one of the methods above per connection),
// "pam" and "ldap" need external services.
func ParseMethod(authType string) (Method, error) {
	for m := MethodTrust; int(m) < len(methodNames); m++ {
		if strings.EqualFold(methodNames[m], authType) {
			return m, nil
		}
	}
	switch strings.ToLower(authType) {
	case "cert", "hba", "pam", "ldap":
		return 0, fmt.Errorf("auth_type %q is not supported yet", authType)
	}
	return 0, fmt.Errorf("invalid auth_type %q (want trust, any, plain, md5 or scram-sha-256)", authType)
}
