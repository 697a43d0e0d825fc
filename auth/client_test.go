package auth

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// testClient plays a PostgreSQL client against Authenticate through the
// Conn interface. Its SCRAM side is an independent RFC 5802 implementation
// (it uses crypto/* directly, not this package's helpers), so a shared bug
// cannot make both sides agree. It does no SASLprep: give it passwords that
// are already normalised, or the raw-bytes case.
type testClient struct {
	user, password string

	// SCRAM knobs; zero values behave like libpq.
	mechanism   string // default SCRAM-SHA-256
	clientNonce string // default fixed printable nonce
	gs2Header   string // default "n,,"
	// mutate hooks let a test corrupt a message just before it is sent.
	mutateFirst func([]byte) []byte // SASLInitialResponse body
	mutateFinal func([]byte) []byte // SASLResponse body

	// Recorded exchange.
	sent        []pgproto3.BackendMessage
	serverFirst string
	clientFinal string
	serverFinal string
	serverOK    bool // server signature verified

	queue      [][]byte
	clientBare string
	saltedPw   []byte
	authMsg    string
}

var errNoMessage = errors.New("test client: nothing to send (server read without asking)")

func (c *testClient) Send(msg pgproto3.BackendMessage) error {
	c.sent = append(c.sent, msg)
	switch m := msg.(type) {
	case *pgproto3.AuthenticationCleartextPassword:
		c.queue = append(c.queue, cstring(c.password))
	case *pgproto3.AuthenticationMD5Password:
		inner := md5.Sum([]byte(c.password + c.user))
		outer := md5.Sum(append([]byte(hex.EncodeToString(inner[:])), m.Salt[:]...))
		c.queue = append(c.queue, cstring("md5"+hex.EncodeToString(outer[:])))
	case *pgproto3.AuthenticationSASL:
		c.queue = append(c.queue, c.first())
	case *pgproto3.AuthenticationSASLContinue:
		final, err := c.final(string(m.Data))
		if err != nil {
			return err
		}
		c.queue = append(c.queue, final)
	case *pgproto3.AuthenticationSASLFinal:
		c.serverFinal = string(m.Data)
		if c.saltedPw != nil {
			sk := hmacOf(c.saltedPw, "Server Key")
			c.serverOK = c.serverFinal == "v="+base64.StdEncoding.EncodeToString(hmacOf(sk, c.authMsg))
		}
	default:
		return fmt.Errorf("test client: unexpected %T", msg)
	}
	return nil
}

func (c *testClient) ReadPassword() ([]byte, error) {
	if len(c.queue) == 0 {
		return nil, errNoMessage
	}
	b := c.queue[0]
	c.queue = c.queue[1:]
	return b, nil
}

func (c *testClient) first() []byte {
	mech := c.mechanism
	if mech == "" {
		mech = "SCRAM-SHA-256"
	}
	nonce := c.clientNonce
	if nonce == "" {
		nonce = "fyko+d2lbbFgONRv9qkxdawL"
	}
	gs2 := c.gs2Header
	if gs2 == "" {
		gs2 = "n,,"
	}
	c.gs2Header = gs2
	c.clientNonce = nonce
	c.clientBare = "n=" + c.user + ",r=" + nonce
	data := gs2 + c.clientBare
	body := append(cstring(mech), binary.BigEndian.AppendUint32(nil, uint32(len(data)))...)
	body = append(body, data...)
	if c.mutateFirst != nil {
		body = c.mutateFirst(body)
	}
	return body
}

func (c *testClient) final(serverFirst string) ([]byte, error) {
	c.serverFirst = serverFirst
	var nonce, saltB64, iterStr string
	for _, a := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		case strings.HasPrefix(a, "s="):
			saltB64 = a[2:]
		case strings.HasPrefix(a, "i="):
			iterStr = a[2:]
		}
	}
	if !strings.HasPrefix(nonce, c.clientNonce) || len(nonce) == len(c.clientNonce) {
		return nil, fmt.Errorf("test client: bad server nonce %q", nonce)
	}
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	if err != nil {
		return nil, err
	}
	var iter int
	if _, err := fmt.Sscan(iterStr, &iter); err != nil {
		return nil, err
	}
	c.saltedPw, err = pbkdf2.Key(sha256.New, c.password, salt, iter, 32)
	if err != nil {
		return nil, err
	}
	clientKey := hmacOf(c.saltedPw, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(c.gs2Header)) + ",r=" + nonce
	c.authMsg = c.clientBare + "," + serverFirst + "," + withoutProof
	sig := hmacOf(storedKey[:], c.authMsg)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	msg := []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))
	if c.mutateFinal != nil {
		msg = c.mutateFinal(msg)
	}
	c.clientFinal = string(msg)
	return msg, nil
}

func hmacOf(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func cstring(s string) []byte { return append([]byte(s), 0) }
