package auth

import (
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SecretKind says how a stored secret is encoded.
type SecretKind int

const (
	SecretPlain SecretKind = iota + 1 // the password itself
	SecretMD5                         // "md5" + hex(md5(password + user))
	SecretSCRAM                       // SCRAM-SHA-256 verifier (RFC 5803 / PostgreSQL format)
)

func (k SecretKind) String() string {
	switch k {
	case SecretPlain:
		return "plain"
	case SecretMD5:
		return "md5"
	case SecretSCRAM:
		return "scram-sha-256"
	}
	return "SecretKind(" + strconv.Itoa(int(k)) + ")"
}

// DefaultSCRAMIterations is PostgreSQL's and PgBouncer's default
// (scram_iterations / scram_iterations GUC).
const DefaultSCRAMIterations = 4096

// maxSCRAMIterations bounds the PBKDF2 work a stored secret can make us do
// per login. PostgreSQL accepts up to INT_MAX; secrets above this bound are
// certainly misconfigured and would make every login a CPU stall.
const maxSCRAMIterations = 1 << 24

// scramKeyLen is the SHA-256 output size; StoredKey and ServerKey have it.
const scramKeyLen = sha256.Size

const scramPrefix = "SCRAM-SHA-256$"

// Secret is a parsed userlist.txt / auth_query secret. Only the fields for
// Kind are set.
type Secret struct {
	Kind  SecretKind
	Plain string // SecretPlain only
	MD5   string // "md5" + 32 lowercase hex, SecretMD5 only

	// SecretSCRAM only.
	Iterations                 int
	Salt, StoredKey, ServerKey []byte
}

// String never shows the password or the keys, so a Secret can sit in a
// struct that gets logged.
func (s Secret) String() string { return "Secret(" + s.Kind.String() + ")" }

// GoString keeps %#v from printing the password too.
func (s Secret) GoString() string { return s.String() }

// ParseSecret classifies a userlist / auth_query secret the way PostgreSQL's
// get_password_type and PgBouncer do: "md5" followed by exactly 32 lowercase
// hex digits is an MD5 secret; "SCRAM-SHA-256$<iter>:<b64 salt>$<b64
// StoredKey>:<b64 ServerKey>" is a SCRAM secret; anything else is a plain
// password.
//
// Unlike PostgreSQL, a string that starts with "SCRAM-SHA-256$" but does not
// parse is an error rather than a plain password: a truncated or mangled
// verifier must not silently turn into a password equal to its own text.
// The error never contains the secret.
func ParseSecret(s string) (Secret, error) {
	if isMD5Secret(s) {
		return Secret{Kind: SecretMD5, MD5: s}, nil
	}
	if strings.HasPrefix(s, scramPrefix) {
		sec, err := parseSCRAMSecret(s[len(scramPrefix):])
		if err != nil {
			return Secret{}, fmt.Errorf("invalid SCRAM-SHA-256 secret: %w", err)
		}
		return sec, nil
	}
	return Secret{Kind: SecretPlain, Plain: s}, nil
}

func isMD5Secret(s string) bool {
	if len(s) != 3+2*md5.Size || !strings.HasPrefix(s, "md5") {
		return false
	}
	for i := 3; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseSCRAMSecret parses "<iter>:<salt>$<storedkey>:<serverkey>".
func parseSCRAMSecret(s string) (Secret, error) {
	iterSalt, keys, ok := strings.Cut(s, "$")
	if !ok {
		return Secret{}, errors.New(`missing "$" before keys`)
	}
	iterStr, saltB64, ok := strings.Cut(iterSalt, ":")
	if !ok {
		return Secret{}, errors.New(`missing ":" between iterations and salt`)
	}
	storedB64, serverB64, ok := strings.Cut(keys, ":")
	if !ok {
		return Secret{}, errors.New(`missing ":" between StoredKey and ServerKey`)
	}
	iter, err := strconv.Atoi(iterStr)
	if err != nil || iter < 1 || iter > maxSCRAMIterations || iterStr[0] == '+' {
		return Secret{}, fmt.Errorf("iteration count must be an integer in 1..%d", maxSCRAMIterations)
	}
	salt, err := base64.StdEncoding.Strict().DecodeString(saltB64)
	if err != nil || len(salt) == 0 {
		return Secret{}, errors.New("salt is not valid non-empty base64")
	}
	stored, err := base64.StdEncoding.Strict().DecodeString(storedB64)
	if err != nil || len(stored) != scramKeyLen {
		return Secret{}, errors.New("StoredKey is not 32 bytes of base64")
	}
	server, err := base64.StdEncoding.Strict().DecodeString(serverB64)
	if err != nil || len(server) != scramKeyLen {
		return Secret{}, errors.New("ServerKey is not 32 bytes of base64")
	}
	return Secret{Kind: SecretSCRAM, Iterations: iter, Salt: salt, StoredKey: stored, ServerKey: server}, nil
}

// MD5Secret returns the MD5 secret PostgreSQL stores for user and password:
// "md5" + hex(md5(password + user)).
func MD5Secret(user, password string) string {
	sum := md5.Sum([]byte(password + user))
	return "md5" + hex.EncodeToString(sum[:])
}

// SCRAMSecret builds the SCRAM-SHA-256 secret PostgreSQL would store for
// password, with a fresh 16-byte random salt (PostgreSQL's length) and the
// given iteration count (DefaultSCRAMIterations when iterations < 1). The
// password is SASLprep-normalised first, as PostgreSQL does.
func SCRAMSecret(password string, iterations int) string {
	if iterations < 1 {
		iterations = DefaultSCRAMIterations
	}
	salt := make([]byte, scramSaltLen)
	randRead(salt)
	k := deriveSCRAMKeys(password, salt, iterations)
	return FormatSCRAMSecret(iterations, salt, k.stored, k.server)
}

// FormatSCRAMSecret renders a SCRAM secret in PostgreSQL's text format.
func FormatSCRAMSecret(iterations int, salt, storedKey, serverKey []byte) string {
	b64 := base64.StdEncoding.EncodeToString
	return scramPrefix + strconv.Itoa(iterations) + ":" + b64(salt) + "$" + b64(storedKey) + ":" + b64(serverKey)
}

// scramSaltLen is PostgreSQL's SCRAM_DEFAULT_SALT_LEN.
const scramSaltLen = 16

type scramKeys struct {
	client, stored, server []byte
}

// deriveSCRAMKeys computes the RFC 5802 keys from a cleartext password:
// SaltedPassword = Hi(SASLprep(password), salt, i), ClientKey =
// HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey =
// HMAC(SaltedPassword, "Server Key").
func deriveSCRAMKeys(password string, salt []byte, iterations int) scramKeys {
	salted, err := pbkdf2.Key(sha256.New, saslPrep(password), salt, iterations, scramKeyLen)
	if err != nil {
		// Only reachable in FIPS-140-only mode with a password or salt too
		// short for it; fail closed with keys nothing can match.
		return scramKeys{client: make([]byte, scramKeyLen), stored: nil, server: nil}
	}
	clientKey := hmacSHA256(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return scramKeys{client: clientKey, stored: stored[:], server: hmacSHA256(salted, "Server Key")}
}

// hmacSHA256 is HMAC-SHA-256 (RFC 2104) of msg under key. Written out
// over sha256.Sum256 rather than with crypto/hmac, whose New allocates two
// hash states and their buffers each call: a SCRAM login makes two of
// these, and on a connection-per-transaction load they were a tenth of
// the login's allocations. TestHMACSHA256MatchesCryptoHMAC holds it to
// crypto/hmac's answers.
func hmacSHA256(key []byte, msg string) []byte {
	const block = 64 // SHA-256's block size
	var k [block]byte
	if len(key) > block {
		sum := sha256.Sum256(key)
		copy(k[:], sum[:])
	} else {
		copy(k[:], key)
	}
	var stack [512]byte // a SCRAM AuthMessage is a few hundred bytes
	var inner []byte
	if block+len(msg) <= len(stack) {
		inner = stack[:block+len(msg)]
	} else {
		inner = make([]byte, block+len(msg))
	}
	for i, b := range k {
		inner[i] = b ^ 0x36
	}
	copy(inner[block:], msg)
	ih := sha256.Sum256(inner)
	var outer [block + sha256.Size]byte
	for i, b := range k {
		outer[i] = b ^ 0x5c
	}
	copy(outer[block:], ih[:])
	sum := sha256.Sum256(outer[:])
	return sum[:]
}
