package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/wire"
)

// scramView is what a client sees of one SCRAM attempt: the messages, the
// server-first attributes and the error, everything but the log's Detail.
type scramView struct {
	msgs, salt, iter string
	nonceLen         int // the server's half of the nonce
	sqlstate, msg    string
}

func viewSCRAM(t *testing.T, user, password string, secret *Secret) scramView {
	t.Helper()
	c := &testClient{user: user, password: password}
	_, err := Authenticate(c, MethodSCRAM, user, secret)
	v := scramView{msgs: msgNames(c.sent)}
	for _, a := range strings.Split(c.serverFirst, ",") {
		switch {
		case strings.HasPrefix(a, "s="):
			v.salt = a[2:]
		case strings.HasPrefix(a, "i="):
			v.iter = a[2:]
		case strings.HasPrefix(a, "r="):
			v.nonceLen = len(a[2:]) - len(c.clientNonce)
		}
	}
	var ae *Error
	if errors.As(err, &ae) {
		v.sqlstate, v.msg = ae.SQLState, ae.Message
	} else if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	return v
}

// TestMockSCRAMIndistinguishable: for one user name, a user this process
// does not know, one whose secret is MD5 only (cannot do SCRAM) and one
// with a plain password (ad-hoc verifier) show the client the same
// exchange: same messages, same salt, same iteration count, a server nonce
// of the same length, and the same failure as a wrong password. The salt
// is the same on every attempt, as a stored secret's is.
func TestMockSCRAMIndistinguishable(t *testing.T) {
	const user, pw = "carol", "carol-pw"
	plain := &Secret{Kind: SecretPlain, Plain: pw}
	views := map[string]scramView{
		"unknown user":           viewSCRAM(t, user, pw, nil),
		"md5 secret, right pw":   viewSCRAM(t, user, pw, mustParse(t, MD5Secret(user, pw))),
		"plain secret, wrong pw": viewSCRAM(t, user, "wrong", plain),
		"empty plain secret":     viewSCRAM(t, user, pw, &Secret{Kind: SecretPlain}),
		"unknown user again":     viewSCRAM(t, user, "other", nil),
	}
	want := views["unknown user"]
	if want.msgs != saslOnly || want.sqlstate != SQLStateInvalidPassword || want.msg != MsgSASLFailed {
		t.Fatalf("unknown user: %+v", want)
	}
	if raw, err := base64.StdEncoding.DecodeString(want.salt); err != nil || len(raw) != scramSaltLen || want.iter != "4096" || want.nonceLen != 24 {
		t.Errorf("unknown user: salt %q iterations %q nonce %d, want %d bytes, 4096, 24 like PostgreSQL", want.salt, want.iter, want.nonceLen, scramSaltLen)
	}
	for name, v := range views {
		if v != want {
			t.Errorf("%s: %+v, unknown user: %+v", name, v, want)
		}
	}
	// The right plain password succeeds, with the very salt the mock shows.
	if ok := viewSCRAM(t, user, pw, plain); ok.salt != want.salt || ok.sqlstate != "" {
		t.Errorf("plain secret, right pw: %+v", ok)
	}
	// A real stored secret shows its own salt, stable too.
	stored := mustParse(t, SCRAMSecret(pw, 4096))
	a, b := viewSCRAM(t, user, "wrong", stored), viewSCRAM(t, user, "wrong", stored)
	if a != b || a.salt != base64.StdEncoding.EncodeToString(stored.Salt) || a.msg != want.msg || a.sqlstate != want.sqlstate {
		t.Errorf("stored secret: %+v then %+v", a, b)
	}
}

// TestMockSaltIsSecret: the mock salt is a MAC of the user name under a
// per-process key (PostgreSQL's mock_auth_nonce), so another process, or
// anyone without the key, cannot predict it to tell mock from real.
func TestMockSaltIsSecret(t *testing.T) {
	a := userSalt("dave")
	saved := mockKey
	defer func() { mockKey = saved }()
	mockKey = bytes.Repeat([]byte{7}, 32)
	b := userSalt("dave")
	if bytes.Equal(a, b) {
		t.Fatal("the mock salt does not depend on the process key")
	}
	if !bytes.Equal(b, userSalt("dave")) || bytes.Equal(b, userSalt("Dave")) {
		t.Fatal("the mock salt is not a function of the exact user name")
	}
}

// TestAdHocKeysCached: the keys of a plain password are derived once per
// (user, password) and reused; a changed password gets new keys.
func TestAdHocKeysCached(t *testing.T) {
	const user = "erin"
	v1 := adHocVerifier(user, "pw-1")
	want := deriveSCRAMKeys("pw-1", userSalt(user), DefaultSCRAMIterations)
	if !bytes.Equal(v1.storedKey, want.stored) || !bytes.Equal(v1.serverKey, want.server) {
		t.Fatal("ad-hoc keys are not the password's keys under the user's salt")
	}
	// Poison the cached entry: a second call that returns it proves no
	// PBKDF2 ran.
	adHocKeys.Lock()
	n := len(adHocKeys.m)
	for id, k := range adHocKeys.m {
		if bytes.Equal(k.stored, want.stored) {
			adHocKeys.m[id] = scramKeys{stored: []byte("cached"), server: []byte("cached")}
		}
	}
	adHocKeys.Unlock()
	if v := adHocVerifier(user, "pw-1"); string(v.storedKey) != "cached" {
		t.Error("second call derived the keys again")
	}
	if v := adHocVerifier(user, "pw-2"); string(v.storedKey) == "cached" || bytes.Equal(v.storedKey, want.stored) {
		t.Error("a changed password reused the old keys")
	}
	adHocKeys.Lock()
	if len(adHocKeys.m) != n+1 {
		t.Errorf("cache has %d entries, want %d", len(adHocKeys.m), n+1)
	}
	clear(adHocKeys.m)
	adHocKeys.Unlock()
}

// scripted runs LoginToServer (password login as alice) against script,
// which plays the server on the other end of a pipe, and returns
// LoginToServer's error and how long it took.
func scripted(t *testing.T, cred ServerCredentials, script func(r *wire.Reader, w net.Conn)) (time.Duration, error) {
	t.Helper()
	cc, sc := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer sc.Close()
		r := wire.NewReader(sc, 1<<16)
		if _, err := wire.ReadStartup(sc); err != nil {
			return
		}
		script(r, sc)
	}()
	start := time.Now()
	r := wire.NewReader(cc, 4096)
	w := wire.NewWriter(cc, 4096)
	_, err := LoginToServer(r, w, []wire.Param{{Name: "user", Value: "alice"}}, cred)
	d := time.Since(start)
	cc.Close()
	<-done
	return d, err
}

func authMsg(code uint32, data string) []byte {
	body := append(binary.BigEndian.AppendUint32(nil, code), data...)
	return append(binary.BigEndian.AppendUint32([]byte{wire.MsgAuthentication}, uint32(4+len(body))), body...)
}

// clientNonceOf reads the SASLInitialResponse and returns the client nonce.
func clientNonceOf(r *wire.Reader) string {
	if _, _, err := r.Next(); err != nil {
		return ""
	}
	body, err := r.Body()
	if err != nil {
		return ""
	}
	i := bytes.Index(body, []byte("r="))
	if i < 0 {
		return ""
	}
	return string(body[i+2:])
}

// TestLoginToServerHostile: a server that asks for an iteration count
// meant to burn CPU, skips its signature, sends messages out of order or
// larger than the buffer makes the login fail at once with an error.
func TestLoginToServerHostile(t *testing.T) {
	pwCred := ServerCredentials{User: "alice", Password: "pw"}
	salt := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	sasl := authMsg(10, "SCRAM-SHA-256\x00\x00")
	first := func(iter string) func(r *wire.Reader, w net.Conn) {
		return func(r *wire.Reader, w net.Conn) {
			w.Write(sasl)
			n := clientNonceOf(r)
			w.Write(authMsg(11, "r="+n+"SRV,s="+salt+",i="+iter))
			r.Next()
		}
	}
	cases := []struct {
		name, want string
		script     func(r *wire.Reader, w net.Conn)
	}{
		{"iterations above the bound", "exceeds the pooler's limit of 1048576", first("1048577")},
		{"iterations INT_MAX", "invalid SCRAM server-first", first("2147483647")},
		{"iterations zero", "invalid SCRAM server-first", first("0")},
		{"AuthenticationOk without signature", "without a valid signature", func(r *wire.Reader, w net.Conn) {
			w.Write(sasl)
			clientNonceOf(r)
			w.Write(authMsg(0, ""))
		}},
		{"SASLFinal before SASLContinue", "signature is invalid", func(r *wire.Reader, w net.Conn) {
			w.Write(sasl)
			clientNonceOf(r)
			w.Write(authMsg(12, "v=AAAA"))
		}},
		{"SASLContinue before SASL", "before SASL", func(r *wire.Reader, w net.Conn) {
			w.Write(authMsg(11, "r=x,s="+salt+",i=4096"))
		}},
		{"nonce not extending the client's", "invalid SCRAM server-first", func(r *wire.Reader, w net.Conn) {
			w.Write(sasl)
			clientNonceOf(r)
			w.Write(authMsg(11, "r=someoneelse,s="+salt+",i=4096"))
		}},
		{"server-final larger than the buffer", "more than the pooler takes", func(r *wire.Reader, w net.Conn) {
			w.Write(sasl)
			n := clientNonceOf(r)
			w.Write(authMsg(11, "r="+n+"SRV,s="+salt+",i=4096"))
			r.Next()
			r.Skip()
			w.Write(authMsg(12, "v="+strings.Repeat("A", 20000)))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := scripted(t, pwCred, c.script)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
			if errors.Is(err, wire.ErrMessageTooLarge) {
				t.Errorf("err %v reads as the client's max_packet_size", err)
			}
			if d > time.Second {
				t.Errorf("took %v", d)
			}
		})
	}

	// SCRAM pass-through derives nothing: a stored secret's own iteration
	// count is fine whatever its size.
	sec := &Secret{Kind: SecretSCRAM, Iterations: 1 << 22, Salt: []byte("0123456789abcdef"),
		StoredKey: make([]byte, 32), ServerKey: make([]byte, 32)}
	sawFinal := false
	_, err := scripted(t, ServerCredentials{User: "alice", Secret: sec, ClientKey: make([]byte, 32)}, func(r *wire.Reader, w net.Conn) {
		w.Write(sasl)
		n := clientNonceOf(r)
		w.Write(authMsg(11, "r="+n+"SRV,s="+salt+",i=4194304"))
		if typ, _, err := r.Next(); err == nil && typ == wire.MsgPassword {
			sawFinal = true
		}
	})
	if !sawFinal {
		t.Errorf("pass-through with 2^22 iterations sent no client-final (err %v)", err)
	}
}
