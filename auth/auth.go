package auth

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Conn is the part of the client connection auth needs.
type Conn interface {
	// Send writes one backend message (AuthenticationMD5Password,
	// AuthenticationSASL, AuthenticationSASLContinue,
	// AuthenticationSASLFinal, AuthenticationCleartextPassword) and flushes
	// it.
	Send(msg pgproto3.BackendMessage) error
	// ReadPassword reads the next frontend message; it must be of type 'p'
	// (PasswordMessage / SASLInitialResponse / SASLResponse all share 'p');
	// returns its body, valid until the next call. The implementation
	// returns an error for any other message type.
	ReadPassword() ([]byte, error)
}

// Result carries what a later login to PostgreSQL may reuse. ClientKey and
// ServerKey are set only after a SCRAM exchange against a stored SCRAM
// secret (SCRAM pass-through: the pooler answers the server's SCRAM
// challenge with them, which works when the server holds the same secret).
type Result struct {
	ClientKey, ServerKey []byte
}

// MaxPasswordPacket bounds a PasswordMessage body we accept: PgBouncer's
// password buffer on master (65531 bytes) plus the terminating NUL. A
// Conn reads a password message up to this size (or its own, smaller,
// max_packet_size), however small its read buffer.
const MaxPasswordPacket = 65536

// randRead fills b with random bytes. Tests replace it to reproduce protocol
// vectors. crypto/rand.Read never fails since Go 1.24.
var randRead = func(b []byte) { _, _ = rand.Read(b) }

// Authenticate runs the client authentication exchange for method m.
//
// secret is nil when the user is unknown: then, like PgBouncer, it still
// runs a mock exchange of the method and fails with the same error a wrong
// password gets, so a client cannot probe which users exist (Detail says
// "no such user" for the log).
//
// It does not send AuthenticationOk; the caller does after a nil error.
// Errors are *Error for anything the client should be told (send it as FATAL
// ErrorResponse); any other error comes from c and means the connection is
// broken.
func Authenticate(c Conn, m Method, user string, secret *Secret) (Result, error) {
	switch m {
	case MethodTrust, MethodAny:
		return Result{}, nil
	case MethodPlain:
		return Result{}, authPlain(c, user, secret)
	case MethodMD5:
		// PgBouncer: an md5 auth_type with a SCRAM secret cannot do MD5
		// (the secret does not give md5(password+user)), so it does SCRAM.
		if secret != nil && secret.Kind == SecretSCRAM {
			return authSCRAM(c, user, secret)
		}
		return Result{}, authMD5(c, user, secret)
	case MethodSCRAM:
		return authSCRAM(c, user, secret)
	}
	return Result{}, &Error{SQLState: SQLStateFeatureUnsupported, Message: "unsupported authentication method", Detail: m.String()}
}

// readPasswordString reads a PasswordMessage and returns the password
// without its terminating NUL. The body must be exactly one C string.
func readPasswordString(c Conn) ([]byte, error) {
	body, err := c.ReadPassword()
	if err != nil {
		return nil, err
	}
	if len(body) > MaxPasswordPacket {
		return nil, &Error{SQLState: SQLStateProtocolViolation, Message: MsgMalformedPassword, Detail: "password packet too long"}
	}
	i := bytes.IndexByte(body, 0)
	if i < 0 || i != len(body)-1 {
		return nil, &Error{SQLState: SQLStateProtocolViolation, Message: MsgMalformedPassword, Detail: "password packet is not one NUL-terminated string"}
	}
	if i == 0 {
		// PgBouncer and PostgreSQL (recv_password_packet) refuse this
		// before looking at the user.
		return nil, &Error{SQLState: SQLStateProtocolViolation, Message: MsgEmptyPassword}
	}
	return body[:i], nil
}

func authPlain(c Conn, user string, secret *Secret) error {
	if err := c.Send(&pgproto3.AuthenticationCleartextPassword{}); err != nil {
		return err
	}
	pw, err := readPasswordString(c)
	if err != nil {
		return err
	}
	if secret == nil {
		return errPassword("no such user")
	}
	if !checkPlainPassword(user, pw, secret) {
		return errPassword("wrong password for " + secret.Kind.String() + " secret")
	}
	return nil
}

// checkPlainPassword checks a cleartext password against any kind of
// secret, in constant time with respect to the password's content.
func checkPlainPassword(user string, pw []byte, secret *Secret) bool {
	switch secret.Kind {
	case SecretPlain:
		// An empty stored password never matches (PgBouncer).
		return secret.Plain != "" && subtle.ConstantTimeCompare(pw, []byte(secret.Plain)) == 1
	case SecretMD5:
		return subtle.ConstantTimeCompare([]byte(MD5Secret(user, string(pw))), []byte(secret.MD5)) == 1
	case SecretSCRAM:
		k := deriveSCRAMKeys(string(pw), secret.Salt, secret.Iterations)
		// Evaluate both compares; no early exit.
		okStored := subtle.ConstantTimeCompare(k.stored, secret.StoredKey)
		okServer := subtle.ConstantTimeCompare(k.server, secret.ServerKey)
		return okStored&okServer == 1
	}
	return false
}

func authMD5(c Conn, user string, secret *Secret) error {
	var salt [4]byte
	randRead(salt[:])
	if err := c.Send(&pgproto3.AuthenticationMD5Password{Salt: salt}); err != nil {
		return err
	}
	got, err := readPasswordString(c)
	if err != nil {
		return err
	}
	var stored string // "md5" + hex(md5(password+user))
	switch {
	case secret == nil:
		return errPassword("no such user")
	case secret.Kind == SecretPlain:
		if secret.Plain == "" {
			return errPassword("empty stored password")
		}
		stored = MD5Secret(user, secret.Plain)
	case secret.Kind == SecretMD5:
		stored = secret.MD5
	default:
		// SCRAM secrets were routed to SCRAM by Authenticate.
		return errPassword(fmt.Sprintf("BUG: md5 exchange with %s secret", secret.Kind))
	}
	if subtle.ConstantTimeCompare(got, []byte(md5Response(stored[3:], salt))) != 1 {
		return errPassword("wrong password for " + secret.Kind.String() + " secret")
	}
	return nil
}

// md5Response is what a client answers to AuthenticationMD5Password:
// "md5" + hex(md5(hex(md5(password+user)) + salt)).
func md5Response(innerHex string, salt [4]byte) string {
	h := md5.New()
	h.Write([]byte(innerHex))
	h.Write(salt[:])
	return "md5" + hex.EncodeToString(h.Sum(nil))
}
