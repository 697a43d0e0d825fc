package auth

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

func mustParse(t testing.TB, s string) *Secret {
	t.Helper()
	sec, err := ParseSecret(s)
	if err != nil {
		t.Fatalf("ParseSecret: %v", err)
	}
	return &sec
}

func msgNames(msgs []pgproto3.BackendMessage) string {
	var names []string
	for _, m := range msgs {
		names = append(names, strings.TrimPrefix(fmt.Sprintf("%T", m), "*pgproto3."))
	}
	return strings.Join(names, ",")
}

// wantAuthError checks err is an *Error with the given SQLSTATE and message.
func wantAuthError(t *testing.T, err error, sqlstate, message string) *Error {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v (%T), want *auth.Error %s %q", err, err, sqlstate, message)
	}
	if ae.SQLState != sqlstate || ae.Message != message {
		t.Fatalf("error = %s %q (detail %q), want %s %q", ae.SQLState, ae.Message, ae.Detail, sqlstate, message)
	}
	return ae
}

const (
	cleartext = "AuthenticationCleartextPassword"
	md5Req    = "AuthenticationMD5Password"
	saslOnly  = "AuthenticationSASL,AuthenticationSASLContinue"
	saslAll   = "AuthenticationSASL,AuthenticationSASLContinue,AuthenticationSASLFinal"
)

func TestAuthenticateMatrix(t *testing.T) {
	const user, password = "alice", "s3cret"
	secrets := map[string]*Secret{
		"plain":   {Kind: SecretPlain, Plain: password},
		"md5":     mustParse(t, MD5Secret(user, password)),
		"scram":   mustParse(t, SCRAMSecret(password, 4096)),
		"unknown": nil,
	}
	type want struct {
		msgs     string // message types the server sent
		sqlstate string // "" = success
		message  string
	}
	okWith := func(msgs string) want { return want{msgs: msgs} }
	pwFail := func(msgs string) want { return want{msgs, SQLStateInvalidPassword, MsgPasswordFailed} }
	saslFail := func(msgs string) want { return want{msgs, SQLStateInvalidPassword, MsgSASLFailed} }

	tests := []struct {
		method       Method
		secret       string
		right, wrong want
	}{
		{MethodTrust, "plain", okWith(""), okWith("")},
		{MethodTrust, "scram", okWith(""), okWith("")},
		{MethodTrust, "unknown", okWith(""), okWith("")},
		{MethodAny, "md5", okWith(""), okWith("")},
		{MethodAny, "unknown", okWith(""), okWith("")},

		{MethodPlain, "plain", okWith(cleartext), pwFail(cleartext)},
		{MethodPlain, "md5", okWith(cleartext), pwFail(cleartext)},
		{MethodPlain, "scram", okWith(cleartext), pwFail(cleartext)},
		{MethodPlain, "unknown", pwFail(cleartext), pwFail(cleartext)},

		{MethodMD5, "plain", okWith(md5Req), pwFail(md5Req)},
		{MethodMD5, "md5", okWith(md5Req), pwFail(md5Req)},
		{MethodMD5, "scram", okWith(saslAll), saslFail(saslOnly)}, // PgBouncer switches to SCRAM
		{MethodMD5, "unknown", pwFail(md5Req), pwFail(md5Req)},

		{MethodSCRAM, "plain", okWith(saslAll), saslFail(saslOnly)},
		{MethodSCRAM, "scram", okWith(saslAll), saslFail(saslOnly)},
		{MethodSCRAM, "md5", saslFail(saslOnly), saslFail(saslOnly)}, // "user has MD5 secret"
		{MethodSCRAM, "unknown", saslFail(saslOnly), saslFail(saslOnly)},
	}
	for _, tt := range tests {
		for _, right := range []bool{true, false} {
			w, pw := tt.right, password
			if !right {
				w, pw = tt.wrong, "wrong"
			}
			name := fmt.Sprintf("%s/%s/right=%v", tt.method, tt.secret, right)
			t.Run(name, func(t *testing.T) {
				secret := secrets[tt.secret]
				c := &testClient{user: user, password: pw}
				res, err := Authenticate(c, tt.method, user, secret)
				if got := msgNames(c.sent); got != w.msgs {
					t.Errorf("server sent %q, want %q", got, w.msgs)
				}
				if w.sqlstate == "" {
					if err != nil {
						t.Fatalf("Authenticate: %v", err)
					}
				} else {
					ae := wantAuthError(t, err, w.sqlstate, w.message)
					if strings.Contains(ae.Error(), password) {
						t.Errorf("error %q contains the password", ae.Error())
					}
					if secret == nil && ae.Detail != "no such user" {
						t.Errorf("detail = %q, want %q", ae.Detail, "no such user")
					}
				}
				if len(c.queue) != 0 {
					t.Errorf("server left %d client messages unread", len(c.queue))
				}
				scramOK := w.sqlstate == "" && strings.HasPrefix(w.msgs, "AuthenticationSASL")
				if scramOK && !c.serverOK {
					t.Errorf("client could not verify server signature %q", c.serverFinal)
				}
				// Keys only come back from SCRAM against a stored SCRAM secret.
				if scramOK && tt.secret == "scram" {
					stored := sha256.Sum256(res.ClientKey)
					if !bytes.Equal(stored[:], secret.StoredKey) || !bytes.Equal(res.ServerKey, secret.ServerKey) {
						t.Errorf("Result keys do not match the secret")
					}
				} else if res.ClientKey != nil || res.ServerKey != nil {
					t.Errorf("Result = %x/%x, want empty", res.ClientKey, res.ServerKey)
				}
			})
		}
	}
}

func TestSCRAMWithMD5SecretDetail(t *testing.T) {
	c := &testClient{user: "bob", password: "pw"}
	_, err := Authenticate(c, MethodSCRAM, "bob", mustParse(t, MD5Secret("bob", "pw")))
	ae := wantAuthError(t, err, SQLStateInvalidPassword, MsgSASLFailed)
	if ae.Detail != "SCRAM authentication failed: user has MD5 secret" {
		t.Errorf("detail = %q", ae.Detail)
	}
}

func TestMockSCRAMSaltStablePerUser(t *testing.T) {
	salt := func(user string) string {
		c := &testClient{user: user, password: "x"}
		_, _ = Authenticate(c, MethodSCRAM, user, nil)
		for _, a := range strings.Split(c.serverFirst, ",") {
			if strings.HasPrefix(a, "s=") {
				return a
			}
		}
		t.Fatalf("no salt in %q", c.serverFirst)
		return ""
	}
	if a, b := salt("ghost"), salt("ghost"); a != b {
		t.Errorf("mock salt changed between attempts: %s vs %s", a, b)
	}
	if a, b := salt("ghost"), salt("phantom"); a == b {
		t.Errorf("two unknown users share mock salt %s", a)
	}
	if !strings.Contains(salt("ghost"), "==") || len(salt("ghost")) != len("s=")+24 {
		t.Errorf("mock salt %q is not 16 bytes like a real one", salt("ghost"))
	}
}

func TestEmptyPasswords(t *testing.T) {
	// An empty password from the client is refused before any secret check.
	_, err := Authenticate(&testClient{user: "u", password: ""}, MethodPlain, "u", &Secret{Kind: SecretPlain, Plain: ""})
	wantAuthError(t, err, SQLStateProtocolViolation, MsgEmptyPassword)
	// An empty stored password never matches, whatever the client sends.
	for _, m := range []Method{MethodPlain, MethodMD5} {
		_, err := Authenticate(&testClient{user: "u", password: "anything"}, m, "u", &Secret{Kind: SecretPlain, Plain: ""})
		wantAuthError(t, err, SQLStateInvalidPassword, MsgPasswordFailed)
	}
	_, err = Authenticate(&testClient{user: "u", password: ""}, MethodSCRAM, "u", &Secret{Kind: SecretPlain, Plain: ""})
	wantAuthError(t, err, SQLStateInvalidPassword, MsgSASLFailed)
}

// scriptConn replays fixed client messages, for malformed input.
type scriptConn struct {
	msgs [][]byte
	sent []pgproto3.BackendMessage
}

func (s *scriptConn) Send(m pgproto3.BackendMessage) error { s.sent = append(s.sent, m); return nil }
func (s *scriptConn) ReadPassword() ([]byte, error) {
	if len(s.msgs) == 0 {
		return nil, errNoMessage
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

func TestMalformedPasswordPacket(t *testing.T) {
	for _, body := range [][]byte{nil, []byte("abc"), []byte("a\x00b\x00"), []byte("a\x00b")} {
		for _, m := range []Method{MethodPlain, MethodMD5} {
			_, err := Authenticate(&scriptConn{msgs: [][]byte{body}}, m, "u", &Secret{Kind: SecretPlain, Plain: "abc"})
			wantAuthError(t, err, SQLStateProtocolViolation, MsgMalformedPassword)
		}
	}
	_, err := Authenticate(&scriptConn{msgs: [][]byte{append(bytes.Repeat([]byte("a"), MaxPasswordPacket), 0)}}, MethodPlain, "u", &Secret{Kind: SecretPlain, Plain: "abc"})
	wantAuthError(t, err, SQLStateProtocolViolation, MsgMalformedPassword)
}

func TestConnErrorsPassThrough(t *testing.T) {
	for _, m := range []Method{MethodPlain, MethodMD5, MethodSCRAM} {
		_, err := Authenticate(&scriptConn{}, m, "u", &Secret{Kind: SecretPlain, Plain: "abc"})
		if !errors.Is(err, errNoMessage) {
			t.Errorf("%s: error = %v, want the Conn's error", m, err)
		}
	}
}

func sasl(mech string, data string) []byte {
	b := append([]byte(mech), 0, 0, 0, 0, 0)
	b[len(mech)+1] = byte(len(data) >> 24)
	b[len(mech)+2] = byte(len(data) >> 16)
	b[len(mech)+3] = byte(len(data) >> 8)
	b[len(mech)+4] = byte(len(data))
	return append(b, data...)
}

func TestMalformedSASLInitialResponse(t *testing.T) {
	secret := &Secret{Kind: SecretPlain, Plain: "pw"}
	tests := []struct {
		name     string
		body     []byte
		sqlstate string
		message  string
	}{
		{"wrong mechanism", sasl("SCRAM-SHA-1", "n,,n=,r=abc"), SQLStateProtocolViolation, MsgInvalidMechanism},
		{"PLUS not offered", sasl("SCRAM-SHA-256-PLUS", "p=tls-server-end-point,,n=,r=abc"), SQLStateProtocolViolation, MsgInvalidMechanism},
		{"password message instead", []byte("pw\x00"), SQLStateProtocolViolation, MsgInvalidMechanism},
		{"no NUL", []byte("SCRAM-SHA-256"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"no length", []byte("SCRAM-SHA-256\x00\x00\x00"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"length -1", []byte("SCRAM-SHA-256\x00\xff\xff\xff\xff"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"length too long", []byte("SCRAM-SHA-256\x00\x00\x00\x00\x10n,,n=,r=abc"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"length too short", []byte("SCRAM-SHA-256\x00\x00\x00\x00\x01n,,n=,r=abc"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"channel binding p=", sasl("SCRAM-SHA-256", "p=tls-server-end-point,,n=,r=abc"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"bad flag", sasl("SCRAM-SHA-256", "x,,n=,r=abc"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"authzid", sasl("SCRAM-SHA-256", "n,a=admin,n=,r=abc"), SQLStateFeatureUnsupported, "client uses authorization identity, but it is not supported"},
		{"missing comma", sasl("SCRAM-SHA-256", "n,n=,r=abc"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"mandatory ext", sasl("SCRAM-SHA-256", "n,,m=x,n=,r=abc"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"no nonce", sasl("SCRAM-SHA-256", "n,,n="), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"empty nonce", sasl("SCRAM-SHA-256", "n,,n=,r="), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"unprintable nonce", sasl("SCRAM-SHA-256", "n,,n=,r=ab\x7fc"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"space in nonce", sasl("SCRAM-SHA-256", "n,,n=,r=ab c"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"nonce before user", sasl("SCRAM-SHA-256", "n,,r=abc,n="), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"bad extension", sasl("SCRAM-SHA-256", "n,,n=,r=abc,zz"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"NUL inside", sasl("SCRAM-SHA-256", "n,,n=\x00,r=abc"), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"too long", sasl("SCRAM-SHA-256", "n,,n=,r="+strings.Repeat("a", maxSCRAMMessage)), SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"empty", sasl("SCRAM-SHA-256", ""), SQLStateProtocolViolation, MsgMalformedSCRAM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &scriptConn{msgs: [][]byte{tt.body}}
			_, err := Authenticate(c, MethodSCRAM, "u", secret)
			wantAuthError(t, err, tt.sqlstate, tt.message)
			if got := msgNames(c.sent); got != "AuthenticationSASL" {
				t.Errorf("sent %q", got)
			}
		})
	}
}

func TestMalformedSASLResponse(t *testing.T) {
	secret := mustParse(t, SCRAMSecret("pw", 4096))
	tests := []struct {
		name     string
		mutate   func(string) string
		sqlstate string
		message  string
	}{
		{"missing proof", func(s string) string { return s[:strings.Index(s, ",p=")] }, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"short proof", func(s string) string { return s[:strings.Index(s, ",p=")] + ",p=AAAA" }, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"proof not base64", func(s string) string { return s[:strings.Index(s, ",p=")] + ",p=!!!!" }, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"proof not last", func(s string) string { return s + ",x=1" }, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"no c=", func(s string) string { return strings.TrimPrefix(s, "c=biws,") }, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"swapped", func(s string) string {
			p := strings.Split(s, ",")
			return p[1] + "," + p[0] + "," + p[2]
		}, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"NUL", func(s string) string { return s + "\x00" }, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"empty", func(string) string { return "" }, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"too long", func(s string) string {
			return strings.Replace(s, ",p=", ",x="+strings.Repeat("a", maxSCRAMMessage)+",p=", 1)
		}, SQLStateProtocolViolation, MsgMalformedSCRAM},
		{"channel binding y", func(s string) string { return strings.Replace(s, "c=biws", "c=eSws", 1) }, SQLStateProtocolViolation, MsgChannelBinding},
		{"channel binding junk", func(s string) string { return strings.Replace(s, "c=biws", "c=xyz", 1) }, SQLStateProtocolViolation, MsgChannelBinding},
		{"nonce mismatch", func(s string) string { return strings.Replace(s, ",r=", ",r=X", 1) }, SQLStateInvalidPassword, MsgSASLFailed},
		{"extension ignored but proof now wrong", func(s string) string { return strings.Replace(s, ",p=", ",x=1,p=", 1) }, SQLStateInvalidPassword, MsgSASLFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &testClient{user: "u", password: "pw", mutateFinal: func(b []byte) []byte { return []byte(tt.mutate(string(b))) }}
			_, err := Authenticate(c, MethodSCRAM, "u", secret)
			wantAuthError(t, err, tt.sqlstate, tt.message)
		})
	}
}

func TestSCRAMGS2HeaderY(t *testing.T) {
	// A client that supports channel binding but was not offered -PLUS says
	// "y,,", then c=eSws.
	c := &testClient{user: "u", password: "pw", gs2Header: "y,,"}
	if _, err := Authenticate(c, MethodSCRAM, "u", mustParse(t, SCRAMSecret("pw", 4096))); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.clientFinal, "c=eSws,") || !c.serverOK {
		t.Errorf("client-final %q, server verified %v", c.clientFinal, c.serverOK)
	}
}

func TestUnsupportedMethod(t *testing.T) {
	_, err := Authenticate(&scriptConn{}, Method(99), "u", nil)
	wantAuthError(t, err, SQLStateFeatureUnsupported, "unsupported authentication method")
}

func TestErrorTexts(t *testing.T) {
	// Pinned: clients, runbooks and PgBouncer's own tests match these.
	pinned := map[string]string{
		MsgPasswordFailed:   "password authentication failed",
		MsgSASLFailed:       "SASL authentication failed",
		MsgEmptyPassword:    "empty password returned by client",
		MsgInvalidMechanism: "client selected an invalid SASL authentication mechanism",
		MsgMalformedSCRAM:   "malformed SCRAM message",
		MsgChannelBinding:   "SCRAM channel binding check failed",
	}
	for got, want := range pinned {
		if got != want {
			t.Errorf("message %q, want %q", got, want)
		}
	}
	e := &Error{SQLState: "28P01", Message: "m", Detail: "d"}
	if e.Error() != "m (d)" {
		t.Errorf("Error() = %q", e.Error())
	}
	if (&Error{Message: "m"}).Error() != "m" {
		t.Errorf("Error() without detail")
	}
}

func TestParseMethod(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Method
	}{
		{"trust", MethodTrust}, {"any", MethodAny}, {"plain", MethodPlain},
		{"md5", MethodMD5}, {"scram-sha-256", MethodSCRAM}, {"SCRAM-SHA-256", MethodSCRAM},
		{"ldap", MethodLDAP}, {"pam", MethodPAM},
	} {
		got, err := ParseMethod(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseMethod(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if got.String() != strings.ToLower(tt.in) {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	for _, in := range []string{"cert", "hba"} {
		if _, err := ParseMethod(in); err == nil || !strings.Contains(err.Error(), "not supported yet") {
			t.Errorf("ParseMethod(%q) error = %v, want not supported yet", in, err)
		}
	}
	for _, in := range []string{"", "password", "md5 ", "gss"} {
		if _, err := ParseMethod(in); err == nil || !strings.Contains(err.Error(), "invalid auth_type") {
			t.Errorf("ParseMethod(%q) error = %v, want invalid", in, err)
		}
	}
	if Method(0).String() != "Method(0)" {
		t.Errorf("Method(0).String() = %q", Method(0).String())
	}
}
