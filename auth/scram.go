package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgproto3"
)

// The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL runs
// it (https://www.postgresql.org/docs/current/sasl-authentication.html):
//
//	S: AuthenticationSASL          ["SCRAM-SHA-256"]
//	C: SASLInitialResponse         "SCRAM-SHA-256", "n,,n=,r=<cnonce>"
//	S: AuthenticationSASLContinue  "r=<cnonce><snonce>,s=<salt>,i=<iter>"
//	C: SASLResponse                "c=biws,r=<cnonce><snonce>,p=<proof>"
//	S: AuthenticationSASLFinal     "v=<server signature>"
//
// PostgreSQL ignores the SCRAM user name (n=) and uses the startup packet's;
// so do we. Channel binding (SCRAM-SHA-256-PLUS) needs TLS and is not
// offered yet: a client that asks for it with "p=" is refused, one that
// could but did not ("y,,") is accepted.

const scramMechanism = "SCRAM-SHA-256"

// maxSCRAMMessage bounds a client SCRAM message. Real ones are under 200
// bytes (libpq: 24-byte nonce, 44-byte proof); PostgreSQL bounds the whole
// packet, we bound what we parse.
const maxSCRAMMessage = 2048

// MsgChannelBinding is sent when client-final's c= does not repeat the
// client-first GS2 header (PostgreSQL's text).
const MsgChannelBinding = "SCRAM channel binding check failed"

// scramNonceLen is PostgreSQL's SCRAM_RAW_NONCE_LEN.
const scramNonceLen = 18

// scramServerNonce returns the server's half of the nonce. Tests replace it
// to reproduce the RFC 7677 vector.
var scramServerNonce = func() string {
	b := make([]byte, scramNonceLen)
	randRead(b)
	return base64.StdEncoding.EncodeToString(b)
}

// mockKey makes mock SCRAM salts stable per user name for this process, so
// that asking twice for an unknown user yields the same salt, as it would
// for a real one (PostgreSQL's scram_mock_salt: a hash of the user name and
// its secret mock_auth_nonce).
var mockKey = func() []byte {
	b := make([]byte, 32)
	randRead(b)
	return b
}()

// userSalt is the salt this process shows for user wherever it has no
// stored SCRAM salt: for a user it does not know, one whose secret cannot
// do SCRAM, and one with a plain password (the ad-hoc verifier). The same
// name always gets the same salt, so two attempts tell an unknown user from
// a plain-password user no better than from a stored SCRAM secret.
func userSalt(user string) []byte {
	m := hmac.New(sha256.New, mockKey)
	m.Write([]byte("salt\x00" + user))
	return m.Sum(nil)[:scramSaltLen]
}

// scramVerifier is what the server side needs from a secret.
type scramVerifier struct {
	salt       []byte
	iterations int
	storedKey  []byte
	serverKey  []byte
	reusable   bool   // keys are the stored secret's: worth returning for pass-through
	doomed     string // non-empty: fail at the end whatever the proof; the reason to log
}

// mockVerifier stands in for a user that cannot pass SCRAM: the same salt
// derivation and iteration count as a real ad-hoc verifier, keys nobody
// knows, and a failure at the end like a wrong password's.
func mockVerifier(user, reason string) scramVerifier {
	m := hmac.New(sha256.New, mockKey)
	m.Write([]byte("keys\x00" + user))
	k := m.Sum(nil)
	return scramVerifier{salt: userSalt(user), iterations: builtIterations(), storedKey: k, serverKey: k, doomed: reason}
}

// adHocKeys caches the keys derived from plain passwords (PgBouncer 1.25
// caches its ad-hoc verifiers too): a PBKDF2 per login is both slow and a
// timing tell that the user exists. Entries are keyed by a MAC of user and
// password, so a changed password misses; the map is bounded by
// maxAdHocKeys and emptied when full (it only holds users who have a
// plain password, and those are configured, not chosen by clients).
var adHocKeys = struct {
	sync.Mutex
	m map[[sha256.Size]byte]scramKeys
}{m: map[[sha256.Size]byte]scramKeys{}}

const maxAdHocKeys = 10000

func adHocVerifier(user, password string) scramVerifier {
	salt := userSalt(user)
	iter := builtIterations()
	m := hmac.New(sha256.New, mockKey)
	// The count is in the key: keys derived under another scram_iterations
	// are not this verifier's.
	m.Write([]byte("adhoc\x00" + strconv.Itoa(iter) + "\x00" + user + "\x00" + password))
	var id [sha256.Size]byte
	m.Sum(id[:0])
	adHocKeys.Lock()
	k, ok := adHocKeys.m[id]
	adHocKeys.Unlock()
	if !ok {
		k = deriveSCRAMKeys(password, salt, iter)
		adHocKeys.Lock()
		if len(adHocKeys.m) >= maxAdHocKeys {
			clear(adHocKeys.m)
		}
		adHocKeys.m[id] = k
		adHocKeys.Unlock()
	}
	return scramVerifier{salt: salt, iterations: iter, storedKey: k.stored, serverKey: k.server}
}

func verifierFor(user string, secret *Secret) scramVerifier {
	switch {
	case secret == nil:
		return mockVerifier(user, "no such user")
	case secret.Kind == SecretSCRAM:
		return scramVerifier{salt: secret.Salt, iterations: secret.Iterations, storedKey: secret.StoredKey, serverKey: secret.ServerKey, reusable: true}
	case secret.Kind == SecretPlain && secret.Plain != "":
		// An ad-hoc verifier, as PgBouncer builds; its keys are useless
		// for pass-through (the server's salt differs).
		return adHocVerifier(user, secret.Plain)
	case secret.Kind == SecretPlain:
		return mockVerifier(user, "empty stored password")
	case secret.Kind == SecretMD5:
		// PgBouncer fails right after client-first; we finish a mock
		// exchange so that this user looks like any other wrong password.
		return mockVerifier(user, "SCRAM authentication failed: user has MD5 secret")
	}
	return mockVerifier(user, "unknown secret kind")
}

func authSCRAM(c Conn, user string, secret *Secret) (Result, error) {
	if err := c.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}}); err != nil {
		return Result{}, err
	}
	body, err := c.ReadPassword()
	if err != nil {
		return Result{}, err
	}
	data, err := parseSASLInitialResponse(body)
	if err != nil {
		return Result{}, err
	}
	first, err := parseClientFirst(data)
	if err != nil {
		return Result{}, err
	}

	v := verifierFor(user, secret)
	nonce := first.nonce + scramServerNonce()
	serverFirst := "r=" + nonce + ",s=" + base64.StdEncoding.EncodeToString(v.salt) + ",i=" + strconv.Itoa(v.iterations)
	if err := c.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)}); err != nil {
		return Result{}, err
	}

	body, err = c.ReadPassword()
	if err != nil {
		return Result{}, err
	}
	final, err := parseClientFinal(body)
	if err != nil {
		return Result{}, err
	}
	if final.channelBinding != base64.StdEncoding.EncodeToString([]byte(first.gs2Header)) {
		return Result{}, &Error{SQLState: SQLStateProtocolViolation, Message: MsgChannelBinding, Detail: "c= does not match the GS2 header"}
	}
	if final.nonce != nonce {
		return Result{}, errSASL("invalid SCRAM response (nonce does not match)")
	}

	authMessage := first.bare + "," + serverFirst + "," + final.withoutProof
	clientKey := hmacSHA256(v.storedKey, authMessage)  // ClientSignature
	subtle.XORBytes(clientKey, clientKey, final.proof) // ClientKey = ClientProof XOR ClientSignature
	stored := sha256.Sum256(clientKey)
	proofOK := subtle.ConstantTimeCompare(stored[:], v.storedKey) == 1
	if v.doomed != "" {
		return Result{}, errSASL(v.doomed)
	}
	if !proofOK {
		return Result{}, errSASL("wrong password for " + secret.Kind.String() + " secret")
	}

	serverFinal := "v=" + base64.StdEncoding.EncodeToString(hmacSHA256(v.serverKey, authMessage))
	if err := c.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(serverFinal)}); err != nil {
		return Result{}, err
	}
	if !v.reusable {
		return Result{}, nil
	}
	return Result{ClientKey: clientKey, ServerKey: bytes.Clone(v.serverKey)}, nil
}

// parseSASLInitialResponse checks the mechanism and returns the
// client-first-message: body is mechanism NUL, int32 length, data.
func parseSASLInitialResponse(body []byte) ([]byte, error) {
	i := bytes.IndexByte(body, 0)
	if i < 0 {
		return nil, errMalformedSCRAM("SASLInitialResponse without mechanism name")
	}
	if string(body[:i]) != scramMechanism {
		return nil, &Error{SQLState: SQLStateProtocolViolation, Message: MsgInvalidMechanism}
	}
	rest := body[i+1:]
	if len(rest) < 4 {
		return nil, errMalformedSCRAM("SASLInitialResponse without data length")
	}
	n := int32(binary.BigEndian.Uint32(rest))
	data := rest[4:]
	if n < 0 {
		return nil, errMalformedSCRAM("SASLInitialResponse without client-first-message")
	}
	if int64(n) != int64(len(data)) {
		return nil, errMalformedSCRAM("SASLInitialResponse data length does not match the packet")
	}
	return data, nil
}

type clientFirst struct {
	gs2Header string // "n,," or "y,,"; repeated base64-encoded in client-final's c=
	bare      string // client-first-message-bare, part of AuthMessage
	nonce     string // c-nonce
}

// parseClientFirst parses a client-first-message (RFC 5802 section 7):
//
//	gs2-cbind-flag "," [ authzid ] "," [reserved-mext ","] username "," nonce ["," extensions]
func parseClientFirst(data []byte) (clientFirst, error) {
	if len(data) > maxSCRAMMessage {
		return clientFirst{}, errMalformedSCRAM("client-first-message longer than %d bytes", maxSCRAMMessage)
	}
	s := string(data)
	if strings.IndexByte(s, 0) >= 0 {
		return clientFirst{}, errMalformedSCRAM("NUL in client-first-message")
	}
	switch {
	case strings.HasPrefix(s, "n,"), strings.HasPrefix(s, "y,"):
	case strings.HasPrefix(s, "p="):
		return clientFirst{}, errMalformedSCRAM("client requires channel binding (p=), but SCRAM-SHA-256-PLUS was not offered")
	default:
		return clientFirst{}, errMalformedSCRAM("unexpected channel-binding flag")
	}
	if strings.HasPrefix(s[2:], "a=") {
		return clientFirst{}, &Error{SQLState: SQLStateFeatureUnsupported, Message: "client uses authorization identity, but it is not supported"}
	}
	if len(s) < 3 || s[2] != ',' {
		return clientFirst{}, errMalformedSCRAM("expected ',' after channel-binding flag")
	}
	cf := clientFirst{gs2Header: s[:3], bare: s[3:]}

	attrs := strings.Split(cf.bare, ",")
	if attrs[0] != "" && attrs[0][0] == 'm' {
		return clientFirst{}, errMalformedSCRAM("client requires an unsupported SCRAM extension")
	}
	if len(attrs) < 2 {
		return clientFirst{}, errMalformedSCRAM("client-first-message needs n= and r=")
	}
	if _, ok := attrValue(attrs[0], 'n'); !ok {
		return clientFirst{}, errMalformedSCRAM("expected n= attribute")
	}
	nonce, ok := attrValue(attrs[1], 'r')
	if !ok {
		return clientFirst{}, errMalformedSCRAM("expected r= attribute")
	}
	if nonce == "" || !printable(nonce) {
		return clientFirst{}, errMalformedSCRAM("client nonce is empty or not printable")
	}
	cf.nonce = nonce
	for _, a := range attrs[2:] {
		if !isAttr(a) {
			return clientFirst{}, errMalformedSCRAM("malformed extension attribute")
		}
	}
	return cf, nil
}

type clientFinal struct {
	channelBinding string // c= value as sent (base64)
	nonce          string
	proof          []byte
	withoutProof   string // client-final-message-without-proof, part of AuthMessage
}

// parseClientFinal parses a client-final-message (RFC 5802 section 7):
//
//	channel-binding "," nonce ["," extensions] "," proof
func parseClientFinal(data []byte) (clientFinal, error) {
	if len(data) > maxSCRAMMessage {
		return clientFinal{}, errMalformedSCRAM("client-final-message longer than %d bytes", maxSCRAMMessage)
	}
	s := string(data)
	if strings.IndexByte(s, 0) >= 0 {
		return clientFinal{}, errMalformedSCRAM("NUL in client-final-message")
	}
	attrs := strings.Split(s, ",")
	if len(attrs) < 3 {
		return clientFinal{}, errMalformedSCRAM("client-final-message needs c=, r= and p=")
	}
	var cf clientFinal
	var ok bool
	if cf.channelBinding, ok = attrValue(attrs[0], 'c'); !ok {
		return clientFinal{}, errMalformedSCRAM("expected c= attribute")
	}
	if cf.nonce, ok = attrValue(attrs[1], 'r'); !ok {
		return clientFinal{}, errMalformedSCRAM("expected r= attribute")
	}
	for _, a := range attrs[2 : len(attrs)-1] {
		if !isAttr(a) {
			return clientFinal{}, errMalformedSCRAM("malformed extension attribute")
		}
	}
	last := attrs[len(attrs)-1]
	proofB64, ok := attrValue(last, 'p')
	if !ok {
		return clientFinal{}, errMalformedSCRAM("expected p= as the last attribute")
	}
	proof, err := base64.StdEncoding.Strict().DecodeString(proofB64)
	if err != nil || len(proof) != scramKeyLen {
		return clientFinal{}, errMalformedSCRAM("client proof is not 32 bytes of base64")
	}
	cf.proof = proof
	cf.withoutProof = s[:len(s)-len(last)-1]
	return cf, nil
}

// attrValue returns the value of a "<name>=<value>" attribute.
func attrValue(a string, name byte) (string, bool) {
	if len(a) < 2 || a[0] != name || a[1] != '=' {
		return "", false
	}
	return a[2:], true
}

// isAttr reports whether a is "<letter>=<value>" (RFC 5802 attr-val).
func isAttr(a string) bool {
	return len(a) >= 2 && ('a' <= a[0] && a[0] <= 'z' || 'A' <= a[0] && a[0] <= 'Z') && a[1] == '='
}

// printable is RFC 5802's printable: %x21-2B / %x2D-7E (no comma).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7E || s[i] == ',' {
			return false
		}
	}
	return true
}
