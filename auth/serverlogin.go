package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pgturnstile/pgturnstile/wire"
)

// ServerCredentials are what the pooler logs in to Postgres with: a
// cleartext password, or a stored secret. An MD5 secret answers MD5
// challenges directly (md5(secret + salt)); a SCRAM secret needs the
// client's ClientKey, recovered when the client itself logged in with SCRAM
// against the same secret (SCRAM pass-through).
type ServerCredentials struct {
	User      string
	Password  string  // cleartext, or ""
	Secret    *Secret // used when Password is ""
	ClientKey []byte  // SCRAM pass-through, with a SCRAM Secret
}

// ServerLogin is what the server told us during login.
type ServerLogin struct {
	PID       uint32
	CancelKey []byte
	Params    map[string]string
}

// ServerError is an ErrorResponse the server sent during login; the pooler
// forwards it to waiting clients as is.
type ServerError struct{ Fields wire.ErrorFields }

func (e *ServerError) Error() string { return e.Fields.Message }

// LoginToServer sends the startup packet and completes authentication and
// the welcome, up to the first ReadyForQuery. r and w must be the reader and
// writer the connection keeps using afterwards.
func LoginToServer(r *wire.Reader, w *wire.Writer, params []wire.Param, cred ServerCredentials) (*ServerLogin, error) {
	if err := w.Write(wire.AppendStartup(nil, params)); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	res := &ServerLogin{Params: map[string]string{}}
	var sc *scramClient
	scramDone := false
	for {
		typ, _, err := r.Next()
		if err != nil {
			return nil, err
		}
		body, err := r.Body()
		if errors.Is(err, wire.ErrMessageTooLarge) {
			// The server's fault, not the client's max_packet_size: no
			// login message of a real server is near the buffer's size.
			return nil, fmt.Errorf("server sent a %d-byte %q message during login, more than the pooler takes", r.BodyLen(), typ)
		}
		if err != nil {
			return nil, err
		}
		switch typ {
		case wire.MsgErrorResponse:
			f, _ := wire.ParseErrorResponse(body)
			return nil, &ServerError{Fields: f}
		case wire.MsgAuthentication:
			if len(body) < 4 {
				return nil, errors.New("server sent a malformed authentication request")
			}
			code := binary.BigEndian.Uint32(body)
			var reply []byte
			switch code {
			case 0: // AuthenticationOk
				if sc != nil && !scramDone {
					// SCRAM is mutual: a server that skips its
					// signature has not shown it knows the secret.
					return nil, errors.New("server ended SCRAM authentication without a valid signature")
				}
				continue
			case 3: // cleartext
				pw := cred.Password
				if pw == "" && cred.Secret != nil && cred.Secret.Kind == SecretPlain {
					pw = cred.Secret.Plain // a plain password in auth_file
				}
				if pw == "" {
					return nil, wrongPasswordType("cannot do plain-text authentication: wrong password type")
				}
				reply = passwordMessage(pw)
			case 5: // MD5
				if len(body) != 8 {
					return nil, errors.New("server sent a malformed MD5 request")
				}
				inner, err := md5Inner(cred)
				if err != nil {
					return nil, err
				}
				h := md5.Sum(append([]byte(inner), body[4:8]...))
				reply = passwordMessage("md5" + hex.EncodeToString(h[:]))
			case 10: // SASL
				if !bytes.Contains(body[4:], []byte("SCRAM-SHA-256\x00")) {
					return nil, errors.New("server offers no supported SASL mechanism")
				}
				sc, err = newSCRAMClient(cred)
				if err != nil {
					return nil, err
				}
				first := sc.clientFirst()
				reply = appendSASLInitial(nil, "SCRAM-SHA-256", first)
			case 11: // SASL continue
				if sc == nil {
					return nil, errors.New("server sent SASLContinue before SASL")
				}
				final, err := sc.clientFinal(string(body[4:]))
				if err != nil {
					return nil, err
				}
				reply = appendPasswordBytes(nil, []byte(final))
			case 12: // SASL final
				if sc == nil || sc.authMessage == "" || !sc.verifyServerFinal(string(body[4:])) {
					return nil, errors.New("server's SCRAM signature is invalid")
				}
				scramDone = true
				continue
			default:
				return nil, fmt.Errorf("server asked for an unsupported authentication method (code %d)", code)
			}
			if err := w.Write(reply); err != nil {
				return nil, err
			}
			if err := w.Flush(); err != nil {
				return nil, err
			}
		case wire.MsgParameterStatus:
			n, v, err := wire.ParseParameterStatus(body)
			if err == nil {
				res.Params[string(n)] = string(v)
			}
		case wire.MsgBackendKeyData:
			if len(body) < 8 {
				return nil, errors.New("server sent a malformed BackendKeyData")
			}
			res.PID = binary.BigEndian.Uint32(body)
			res.CancelKey = bytes.Clone(body[4:])
		case wire.MsgReadyForQuery:
			return res, nil
		case wire.MsgNegotiateProtocol, wire.MsgNoticeResponse:
			// We ask for 3.0 with no options; notices during login are
			// not for any client.
		default:
			return nil, fmt.Errorf("server sent unexpected message %q during login", typ)
		}
	}
}

func md5Inner(cred ServerCredentials) (string, error) {
	switch {
	case cred.Password != "":
		return MD5Secret(cred.User, cred.Password)[3:], nil
	case cred.Secret != nil && cred.Secret.Kind == SecretMD5:
		return cred.Secret.MD5[3:], nil
	case cred.Secret != nil && cred.Secret.Kind == SecretPlain:
		return MD5Secret(cred.User, cred.Secret.Plain)[3:], nil
	}
	return "", wrongPasswordType("cannot do MD5 authentication: wrong password type")
}

// ErrWrongPasswordType: the server asked for an authentication the
// password or secret the pooler has for the user cannot answer (an MD5
// secret against SCRAM, a SCRAM secret with no client keys, a hash against
// cleartext). PgBouncer's words; errors.Is finds it in the login errors.
var ErrWrongPasswordType = errors.New("wrong password type")

// wrongPasswordType is a login error that is ErrWrongPasswordType, with
// PgBouncer's longer text for the log.
type wrongPasswordType string

func (e wrongPasswordType) Error() string        { return string(e) }
func (e wrongPasswordType) Is(target error) bool { return target == ErrWrongPasswordType }

func passwordMessage(pw string) []byte {
	return appendPasswordBytes(nil, append([]byte(pw), 0))
}

func appendPasswordBytes(dst, payload []byte) []byte {
	dst = append(dst, wire.MsgPassword, 0, 0, 0, 0)
	start := len(dst) - 5
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-1))
	return dst
}

func appendSASLInitial(dst []byte, mech, data string) []byte {
	payload := append([]byte(mech), 0)
	payload = binary.BigEndian.AppendUint32(payload, uint32(len(data)))
	payload = append(payload, data...)
	return appendPasswordBytes(dst, payload)
}

// maxServerSCRAMIterations bounds the PBKDF2 work a server's
// server-first-message can make the pooler do when it logs in with a
// password: 256 times PostgreSQL's default, about 0.2 s of one core. A
// hostile or misconfigured server asking for more (PostgreSQL accepts up to
// INT_MAX, minutes of CPU) fails the login at once instead of stalling it
// past server_connect_timeout, which a socket deadline cannot enforce on a
// computation. SCRAM pass-through derives nothing and is not bounded by it.
const maxServerSCRAMIterations = 1 << 20

// scramClient is the client side of SCRAM-SHA-256 (RFC 5802/7677) without
// channel binding.
type scramClient struct {
	password  string
	secret    *Secret
	clientKey []byte

	nonce       string
	firstBare   string
	authMessage string
	serverKey   []byte
}

func newSCRAMClient(cred ServerCredentials) (*scramClient, error) {
	c := &scramClient{password: cred.Password}
	if c.password == "" && cred.Secret != nil && cred.Secret.Kind == SecretPlain {
		c.password = cred.Secret.Plain
	}
	if c.password == "" {
		if cred.Secret == nil || cred.Secret.Kind != SecretSCRAM {
			return nil, wrongPasswordType("cannot do SCRAM authentication: wrong password type")
		}
		if len(cred.ClientKey) == 0 {
			return nil, wrongPasswordType("cannot do SCRAM authentication: password is SCRAM secret but client authentication did not provide SCRAM keys")
		}
		c.secret, c.clientKey = cred.Secret, cred.ClientKey
	}
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	c.nonce = base64.StdEncoding.EncodeToString(b[:])
	return c, nil
}

func (c *scramClient) clientFirst() string {
	c.firstBare = "n=,r=" + c.nonce
	return "n,," + c.firstBare
}

func (c *scramClient) clientFinal(serverFirst string) (string, error) {
	var nonce, salt string
	iter := 0
	for _, a := range strings.Split(serverFirst, ",") {
		if len(a) < 2 || a[1] != '=' {
			continue
		}
		switch a[0] {
		case 'r':
			nonce = a[2:]
		case 's':
			salt = a[2:]
		case 'i':
			iter, _ = strconv.Atoi(a[2:])
		}
	}
	if !strings.HasPrefix(nonce, c.nonce) || len(nonce) == len(c.nonce) || iter <= 0 || iter > maxSCRAMIterations || !printable(nonce) {
		return "", errors.New("server sent an invalid SCRAM server-first message")
	}
	if c.secret == nil && iter > maxServerSCRAMIterations {
		// The pooler would derive the keys itself: PBKDF2 work chosen by
		// the server, on a login goroutine no deadline can interrupt.
		return "", fmt.Errorf("server's SCRAM iteration count %d exceeds the pooler's limit of %d", iter, maxServerSCRAMIterations)
	}
	saltBytes, err := base64.StdEncoding.DecodeString(salt)
	if err != nil {
		return "", errors.New("server sent an invalid SCRAM salt")
	}
	var clientKey, storedKey []byte
	if c.secret != nil {
		if !bytes.Equal(saltBytes, c.secret.Salt) || iter != c.secret.Iterations {
			return "", errors.New("cannot do SCRAM authentication: the server's SCRAM secret differs from the pooler's (salt or iterations)")
		}
		clientKey, storedKey, c.serverKey = c.clientKey, c.secret.StoredKey, c.secret.ServerKey
	} else {
		k := deriveSCRAMKeys(c.password, saltBytes, iter)
		clientKey, storedKey, c.serverKey = k.client, k.stored, k.server
	}
	withoutProof := "c=biws,r=" + nonce
	c.authMessage = c.firstBare + "," + serverFirst + "," + withoutProof
	sig := hmacSHA256(storedKey, c.authMessage)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
}

func (c *scramClient) verifyServerFinal(msg string) bool {
	v, ok := strings.CutPrefix(msg, "v=")
	if !ok {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, c.serverKey)
	m.Write([]byte(c.authMessage))
	return subtle.ConstantTimeCompare(got, m.Sum(nil)) == 1
}
