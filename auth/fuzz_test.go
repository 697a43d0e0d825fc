package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func FuzzSCRAMClientFirst(f *testing.F) {
	for _, s := range []string{
		"n,,n=,r=fyko+d2lbbFgONRv9qkxdawL",
		"y,,n=user,r=rOprNGfwEbeRWgbNEkqO",
		"n,,n=user,r=abc,x=ext",
		"p=tls-server-end-point,,n=,r=abc",
		"n,a=admin,n=,r=abc",
		"n,,m=x,n=,r=abc",
		"n,,n=,r=",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := parseClientFirst(data)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || ae.SQLState == "" || ae.Message == "" {
				t.Fatalf("error %v is not a complete *Error", err)
			}
			return
		}
		if cf.gs2Header != "n,," && cf.gs2Header != "y,," {
			t.Fatalf("gs2 header %q", cf.gs2Header)
		}
		if cf.gs2Header+cf.bare != string(data) {
			t.Fatalf("header+bare %q != input %q", cf.gs2Header+cf.bare, data)
		}
		if cf.nonce == "" || !printable(cf.nonce) || !strings.Contains(cf.bare, ",r="+cf.nonce) {
			t.Fatalf("bad nonce %q in %q", cf.nonce, data)
		}
		// The SASLInitialResponse wrapper must carry it through unchanged.
		got, err := parseSASLInitialResponse(sasl(scramMechanism, string(data)))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("SASLInitialResponse round trip: %q, %v", got, err)
		}
	})
}

func FuzzSCRAMClientFinal(f *testing.F) {
	for _, s := range []string{
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"c=eSws,r=abc,x=1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"c=biws,r=abc,p=AAAA",
		"c=biws,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=,r=abc",
		",,",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cf, err := parseClientFinal(data)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || ae.SQLState == "" || ae.Message == "" {
				t.Fatalf("error %v is not a complete *Error", err)
			}
			return
		}
		if len(cf.proof) != scramKeyLen {
			t.Fatalf("proof is %d bytes", len(cf.proof))
		}
		if cf.withoutProof+",p="+base64.StdEncoding.EncodeToString(cf.proof) != string(data) {
			t.Fatalf("without-proof %q + proof does not rebuild %q", cf.withoutProof, data)
		}
		if !strings.HasPrefix(cf.withoutProof, "c="+cf.channelBinding+",r="+cf.nonce) {
			t.Fatalf("fields %q/%q not at the start of %q", cf.channelBinding, cf.nonce, data)
		}
	})
}

// FuzzSCRAMExchange drives a whole server-side exchange with arbitrary
// client messages: it must end in an *Error or the Conn's error, never a
// panic or a success.
func FuzzSCRAMExchange(f *testing.F) {
	f.Add(sasl(scramMechanism, "n,,n=,r=abc"), []byte("c=biws,r=abcX,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("SCRAM-SHA-256\x00\xff\xff\xff\xff"), []byte{})
	f.Add([]byte("pw\x00"), []byte("pw\x00"))
	secret := mustParse(f, SCRAMSecret("pw", 1))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, s := range []*Secret{secret, nil, {Kind: SecretPlain, Plain: "pw"}} {
			_, err := Authenticate(&scriptConn{msgs: [][]byte{first, final}}, MethodSCRAM, "u", s)
			var ae *Error
			if err == nil || !(errors.As(err, &ae) || errors.Is(err, errNoMessage)) {
				t.Fatalf("Authenticate = %v", err)
			}
		}
	})
}

// secretErrors is every error text ParseSecret may return. Each is fixed,
// so none can carry a byte of the secret it was given into a log line: the
// fuzz target checks that the error is one of these, which is exact where
// searching the error for pieces of the input is not (a secret may well
// contain " keys" or "base64"). A new error goes here once it is checked
// not to quote its input.
var secretErrors = func() map[string]bool {
	m := map[string]bool{}
	for _, e := range []string{
		`missing "$" before keys`,
		`missing ":" between iterations and salt`,
		`missing ":" between StoredKey and ServerKey`,
		fmt.Sprintf("iteration count must be an integer in 1..%d", maxSCRAMIterations),
		"salt is not valid non-empty base64",
		"StoredKey is not 32 bytes of base64",
		"ServerKey is not 32 bytes of base64",
	} {
		m["invalid SCRAM-SHA-256 secret: "+e] = true
	}
	return m
}()

func FuzzParseSecret(f *testing.F) {
	for _, s := range []string{pgSCRAMSecret, pgMD5Secret, "secret", "", "SCRAM-SHA-256$", "md5", "SCRAM-SHA-256$1:AA==$" + strings.Repeat("A", 43) + "=:" + strings.Repeat("A", 43) + "=",
		// Secrets that contain words of the error texts.
		"SCRAM-SHA-256$ before keys", "SCRAM-SHA-256$4096:salt is not valid non-empty base64$x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sec, err := ParseSecret(s)
		if err != nil {
			if !strings.HasPrefix(s, scramPrefix) {
				t.Fatalf("error for non-SCRAM input: %v", err)
			}
			if !secretErrors[err.Error()] {
				t.Fatalf("error %q is not one of the fixed texts: it may echo the secret", err)
			}
			return
		}
		switch sec.Kind {
		case SecretPlain:
			if sec.Plain != s {
				t.Fatalf("Plain %q != %q", sec.Plain, s)
			}
		case SecretMD5:
			if sec.MD5 != s || len(s) != 35 {
				t.Fatalf("MD5 %q", sec.MD5)
			}
		case SecretSCRAM:
			if sec.Iterations < 1 || len(sec.Salt) == 0 || len(sec.StoredKey) != 32 || len(sec.ServerKey) != 32 {
				t.Fatalf("bad SCRAM fields from %q", s)
			}
			// Not byte for byte: like PostgreSQL we accept e.g. "04096".
			back, err := ParseSecret(FormatSCRAMSecret(sec.Iterations, sec.Salt, sec.StoredKey, sec.ServerKey))
			if err != nil || back.Iterations != sec.Iterations || !bytes.Equal(back.Salt, sec.Salt) ||
				!bytes.Equal(back.StoredKey, sec.StoredKey) || !bytes.Equal(back.ServerKey, sec.ServerKey) {
				t.Fatalf("round trip of %q: %v", s, err)
			}
		default:
			t.Fatalf("kind %v", sec.Kind)
		}
	})
}
