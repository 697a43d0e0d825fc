package auth

// Methods whose password is checked by an outside service (LDAP, PAM):
// the client sends it in clear, the service says yes or no, and the
// pooler keeps the password for the server login, as PgBouncer does (its
// LDAP and PAM users get the password they logged in with).

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// PasswordChecker checks a user's cleartext password with an outside
// service. A non-nil error is a refusal; its text says why, for the log.
type PasswordChecker interface {
	CheckPassword(ctx context.Context, user, password string) error
}

// Messages a client gets when the service refuses it (PgBouncer's).
const (
	MsgLDAPFailed = "LDAP authentication failed"
	MsgPAMFailed  = "PAM authentication failed"
)

// AuthenticateExternal asks the client for its password in clear, has chk
// check it, and on success returns it as a plain secret for the server
// login. A refusal is an *Error with failMsg (08P01, as PgBouncer sends
// it) and the checker's reason as Detail.
func AuthenticateExternal(ctx context.Context, c Conn, user string, chk PasswordChecker, failMsg string) (*Secret, error) {
	if err := c.Send(&pgproto3.AuthenticationCleartextPassword{}); err != nil {
		return nil, err
	}
	pw, err := readPasswordString(c)
	if err != nil {
		return nil, err
	}
	password := string(pw)
	if err := chk.CheckPassword(ctx, user, password); err != nil {
		return nil, &Error{SQLState: SQLStateProtocolViolation, Message: failMsg, Detail: err.Error()}
	}
	return &Secret{Kind: SecretPlain, Plain: password}, nil
}

// CheckExternal refuses, at start and at RELOAD, an auth_type that would
// refuse every login: ldap without valid auth_ldap_options (ldapOptions),
// pam in a build without PAM.
func CheckExternal(authType, ldapOptions string) error {
	switch authType {
	case "ldap":
		if ldapOptions == "" {
			return errors.New("auth_type=ldap needs auth_ldap_options")
		}
		if _, err := ParseLDAPOptions(ldapOptions); err != nil {
			return fmt.Errorf("auth_ldap_options: %v", err)
		}
	case "pam":
		if !PAMSupported {
			return ErrPAMUnsupported
		}
	}
	return nil
}
