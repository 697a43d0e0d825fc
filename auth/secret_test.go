package auth

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// Secrets produced by PostgreSQL 15 (CREATE ROLE ... PASSWORD, then
// SELECT rolpassword FROM pg_authid).
const (
	pgSCRAMSecret = "SCRAM-SHA-256$4096:YH9a/cReC0Ndh3LTGO9feg==$cQhdKI6V6R0xOxQb2sozRqZIpfCD+ACVp3ohOr9bYTM=:7/TQmQBNJybhsWv+R0XHMFJfrlmzJuYpK9bHBU1Tx8c=" // password 'secret'
	pgMD5Secret   = "md56eae1dc8dd3400ca137cce38cc2ad48f"                                                                                                   // user u4, password 'secret'
	// Passwords SASLprep changes: E'I\u00ADX\u00A0\uFB01' -> "IX fi";
	// E'p\u00E4ss\u2003w\u2126rd' -> "p\u00E4ss w\u03A9rd".
	pgSCRAMSaslprep1 = "SCRAM-SHA-256$4096:H8GRaTHjvPVFgluStykQtA==$7ws23yuklufy1vyjA97uwJbRVvqoy4/zi8jGLm/tcpI=:kp+CMjuksgjzodS5Lfw3LUmhalIO8jj6YSLpdU0iomA="
	pgSCRAMSaslprep2 = "SCRAM-SHA-256$4096:EbxjVvRBbF53dNtztGg4Rg==$KM+Mpcmsneknbhuru1HRdZ/YOYlrdIirNLywsKSo3xY=:IIzVPJZg5w1R2N6chuMYhOssb8rtJ6QE0oqzleKZGgE="
)

func TestParseSecret(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	key := b64(bytes.Repeat([]byte{7}, 32))
	tests := []struct {
		in      string
		kind    SecretKind
		wantErr string
	}{
		{pgMD5Secret, SecretMD5, ""},
		{"md5" + strings.Repeat("a", 32), SecretMD5, ""},
		{"md5" + strings.Repeat("A", 32), SecretPlain, ""}, // PostgreSQL: lowercase hex only
		{"md5" + strings.Repeat("a", 31), SecretPlain, ""},
		{"md5" + strings.Repeat("a", 33), SecretPlain, ""},
		{"md5" + strings.Repeat("g", 32), SecretPlain, ""},
		{"", SecretPlain, ""},
		{"secret", SecretPlain, ""},
		{"scram-sha-256$4096:abc", SecretPlain, ""}, // prefix is case-sensitive
		{pgSCRAMSecret, SecretSCRAM, ""},
		{"SCRAM-SHA-256$1:" + b64([]byte("s")) + "$" + key + ":" + key, SecretSCRAM, ""},
		{"SCRAM-SHA-256$", 0, "missing"},
		{"SCRAM-SHA-256$4096:c2FsdA==", 0, "missing"},
		{"SCRAM-SHA-256$4096c2FsdA==$" + key + ":" + key, 0, "missing"},
		{"SCRAM-SHA-256$4096:c2FsdA==$" + key + key, 0, "missing"},
		{"SCRAM-SHA-256$0:c2FsdA==$" + key + ":" + key, 0, "iteration"},
		{"SCRAM-SHA-256$-1:c2FsdA==$" + key + ":" + key, 0, "iteration"},
		{"SCRAM-SHA-256$+5:c2FsdA==$" + key + ":" + key, 0, "iteration"},
		{"SCRAM-SHA-256$x:c2FsdA==$" + key + ":" + key, 0, "iteration"},
		{"SCRAM-SHA-256$99999999999:c2FsdA==$" + key + ":" + key, 0, "iteration"},
		{"SCRAM-SHA-256$4096:$" + key + ":" + key, 0, "salt"},
		{"SCRAM-SHA-256$4096:c2FsdA=$" + key + ":" + key, 0, "salt"},
		{"SCRAM-SHA-256$4096:c2FsdA==$" + b64([]byte("short")) + ":" + key, 0, "StoredKey"},
		{"SCRAM-SHA-256$4096:c2FsdA==$" + key + ":" + key + "x", 0, "ServerKey"},
		{"SCRAM-SHA-256$4096:c2FsdA==$" + key + ":" + key + "$", 0, "ServerKey"},
	}
	for _, tt := range tests {
		got, err := ParseSecret(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSecret(%q) error = %v, want containing %q", tt.in, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), tt.in[len(scramPrefix):]) && len(tt.in) > len(scramPrefix) {
				t.Errorf("error %q echoes the secret", err)
			}
			continue
		}
		if err != nil || got.Kind != tt.kind {
			t.Errorf("ParseSecret(%q) = %v, %v; want kind %v", tt.in, got.Kind, err, tt.kind)
			continue
		}
		switch got.Kind {
		case SecretPlain:
			if got.Plain != tt.in {
				t.Errorf("Plain = %q", got.Plain)
			}
		case SecretMD5:
			if got.MD5 != tt.in {
				t.Errorf("MD5 = %q", got.MD5)
			}
		case SecretSCRAM:
			if back := FormatSCRAMSecret(got.Iterations, got.Salt, got.StoredKey, got.ServerKey); back != tt.in {
				t.Errorf("round trip = %q, want %q", back, tt.in)
			}
		}
	}
}

func TestSecretStringHidesPassword(t *testing.T) {
	s := Secret{Kind: SecretPlain, Plain: "hunter2"}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(f, s); strings.Contains(out, "hunter2") {
			t.Errorf("%s prints the password: %s", f, out)
		}
	}
}

func TestMD5SecretMatchesPostgres(t *testing.T) {
	if got := MD5Secret("u4", "secret"); got != pgMD5Secret {
		t.Errorf("MD5Secret = %s, want %s", got, pgMD5Secret)
	}
}

func TestSCRAMSecret(t *testing.T) {
	s1 := mustParse(t, SCRAMSecret("pencil", 0))
	s2 := mustParse(t, SCRAMSecret("pencil", 5000))
	if s1.Iterations != DefaultSCRAMIterations || s2.Iterations != 5000 || len(s1.Salt) != 16 {
		t.Errorf("iterations %d/%d salt %d bytes", s1.Iterations, s2.Iterations, len(s1.Salt))
	}
	if bytes.Equal(s1.Salt, s2.Salt) {
		t.Errorf("salt not random")
	}
	if !checkPlainPassword("u", []byte("pencil"), s1) || checkPlainPassword("u", []byte("Pencil"), s1) {
		t.Errorf("SCRAMSecret does not verify its own password")
	}
}

// TestPostgresSecrets checks cleartext and SCRAM logins against secrets
// PostgreSQL produced, including passwords SASLprep rewrites.
func TestPostgresSecrets(t *testing.T) {
	tests := []struct {
		secret, typed, normalised string
	}{
		{pgSCRAMSecret, "secret", "secret"},
		{pgSCRAMSaslprep1, "I\u00ADX\u00A0\uFB01", "IX fi"},
		{pgSCRAMSaslprep2, "p\u00E4ss\u2003w\u2126rd", "p\u00E4ss w\u03A9rd"},
	}
	for _, tt := range tests {
		sec := mustParse(t, tt.secret)
		if got := saslPrep(tt.typed); got != tt.normalised {
			t.Errorf("saslPrep(%q) = %q, want %q", tt.typed, got, tt.normalised)
		}
		// plain method: the pooler derives keys from the typed password.
		if !checkPlainPassword("u", []byte(tt.typed), sec) {
			t.Errorf("cleartext %q rejected by PostgreSQL secret", tt.typed)
		}
		if checkPlainPassword("u", []byte(tt.typed+"x"), sec) {
			t.Errorf("wrong cleartext accepted")
		}
		// SCRAM: the test client does no SASLprep, so hand it the
		// normalised form, as libpq would compute it.
		c := &testClient{user: "u", password: tt.normalised}
		res, err := Authenticate(c, MethodSCRAM, "u", sec)
		if err != nil || !c.serverOK || len(res.ClientKey) != 32 {
			t.Errorf("SCRAM with %q: err %v, server verified %v", tt.typed, err, c.serverOK)
		}
		// And a plain secret holding the typed password serves SCRAM too.
		c = &testClient{user: "u", password: tt.normalised}
		if _, err := Authenticate(c, MethodSCRAM, "u", &Secret{Kind: SecretPlain, Plain: tt.typed}); err != nil {
			t.Errorf("SCRAM against plain %q: %v", tt.typed, err)
		}
	}
}

func TestSASLPrep(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain ascii \x01", "plain ascii \x01"},       // ASCII is never touched
		{"\xff\xfe", "\xff\xfe"},                       // invalid UTF-8: raw
		{"\u00AD", "\u00AD"},                           // maps to empty: raw
		{"a\u0007\u00E9", "a\u0007\u00E9"},             // prohibited control: raw
		{"a\uE000\u00E9", "a\uE000\u00E9"},             // private use: raw
		{"\u2168", "IX"},                               // NFKC
		{"\u05D0\u05D1", "\u05D0\u05D1"},               // RTL only: fine
		{"\u05D0a\u05D1\u00E9", "\u05D0a\u05D1\u00E9"}, // RTL mixed with L: raw
		{"\u00E9\u0301", "\u00E9\u0301"},               // already NFKC (two marks)
		{"e\u0301", "\u00E9"},                          // composed
	}
	for _, tt := range tests {
		if got := saslPrep(tt.in); got != tt.want {
			t.Errorf("saslPrep(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRFC7677Vector reproduces the SCRAM-SHA-256 example of RFC 7677
// section 3 byte for byte.
func TestRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	k := deriveSCRAMKeys("pencil", salt, 4096)
	secret := mustParse(t, FormatSCRAMSecret(4096, salt, k.stored, k.server))

	old := scramServerNonce
	scramServerNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	t.Cleanup(func() { scramServerNonce = old })

	c := &testClient{user: "user", password: "pencil", clientNonce: "rOprNGfwEbeRWgbNEkqO"}
	res, err := Authenticate(c, MethodSCRAM, "user", secret)
	if err != nil {
		t.Fatal(err)
	}
	const (
		wantServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
		wantClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
		wantServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	)
	if c.serverFirst != wantServerFirst {
		t.Errorf("server-first = %q\nwant %q", c.serverFirst, wantServerFirst)
	}
	if c.clientFinal != wantClientFinal {
		t.Errorf("client-final = %q\nwant %q", c.clientFinal, wantClientFinal)
	}
	if c.serverFinal != wantServerFinal {
		t.Errorf("server-final = %q\nwant %q", c.serverFinal, wantServerFinal)
	}
	if !bytes.Equal(res.ClientKey, k.client) || !bytes.Equal(res.ServerKey, k.server) {
		t.Errorf("recovered keys differ from derived ones")
	}
}
