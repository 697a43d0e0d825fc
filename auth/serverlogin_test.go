package auth

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/wire"
)

// loginAgainst runs LoginToServer as the client of serveOne (Authenticate
// playing Postgres) and returns the client's error.
func loginAgainst(t *testing.T, m Method, stored string, cred ServerCredentials) (*ServerLogin, error) {
	t.Helper()
	sec, err := ParseSecret(stored)
	if err != nil {
		t.Fatal(err)
	}
	cc, sc := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- serveOne(sc, m, func(string) *Secret { return &sec }) }()
	r := wire.NewReader(cc, 4096)
	w := wire.NewWriter(cc, 4096)
	login, err := LoginToServer(r, w, []wire.Param{{Name: "user", Value: cred.User}, {Name: "database", Value: "db"}}, cred)
	cc.Close()
	<-done
	return login, err
}

func TestLoginToServer(t *testing.T) {
	const user, pw = "alice", "s3cret-pw"
	md5sec := MD5Secret(user, pw)
	scramSec := SCRAMSecret(pw, 4096)
	parsedSCRAM, _ := ParseSecret(scramSec)
	parsedMD5, _ := ParseSecret(md5sec)
	clientKey := deriveSCRAMKeys(pw, parsedSCRAM.Salt, parsedSCRAM.Iterations).client
	cases := []struct {
		name    string
		method  Method
		stored  string
		cred    ServerCredentials
		wantErr string // substring; "" = success
	}{
		{"cleartext", MethodPlain, pw, ServerCredentials{User: user, Password: pw}, ""},
		{"md5 with password", MethodMD5, md5sec, ServerCredentials{User: user, Password: pw}, ""},
		{"md5 with md5 secret", MethodMD5, md5sec, ServerCredentials{User: user, Secret: &parsedMD5}, ""},
		{"md5 wrong password", MethodMD5, md5sec, ServerCredentials{User: user, Password: "nope"}, "password authentication failed"},
		{"scram with password", MethodSCRAM, scramSec, ServerCredentials{User: user, Password: pw}, ""},
		{"scram wrong password", MethodSCRAM, scramSec, ServerCredentials{User: user, Password: "nope"}, "SASL authentication failed"},
		{"scram pass-through", MethodSCRAM, scramSec, ServerCredentials{User: user, Secret: &parsedSCRAM, ClientKey: clientKey}, ""},
		{"scram secret without keys", MethodSCRAM, scramSec, ServerCredentials{User: user, Secret: &parsedSCRAM}, "did not provide SCRAM keys"},
		{"md5 asked, only scram secret", MethodMD5, md5sec, ServerCredentials{User: user, Secret: &parsedSCRAM}, "cannot do MD5 authentication: wrong password type"},
		{"scram asked, only md5 secret", MethodSCRAM, scramSec, ServerCredentials{User: user, Secret: &parsedMD5}, "cannot do SCRAM authentication: wrong password type"},
		{"cleartext with a plain auth_file password", MethodPlain, pw, ServerCredentials{User: user, Secret: &Secret{Kind: SecretPlain, Plain: pw}}, ""},
		{"cleartext asked, only md5 secret", MethodPlain, pw, ServerCredentials{User: user, Secret: &parsedMD5}, "cannot do plain-text authentication: wrong password type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			login, err := loginAgainst(t, c.method, c.stored, c.cred)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("login failed: %v", err)
				}
				if login.PID != 1 || len(login.CancelKey) != 4 || login.CancelKey[3] != 2 {
					t.Fatalf("backend key not captured: %+v", login)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, c.wantErr)
			}
			if want := strings.Contains(c.wantErr, "wrong password type") || strings.Contains(c.wantErr, "SCRAM keys"); errors.Is(err, ErrWrongPasswordType) != want {
				t.Errorf("errors.Is(%v, ErrWrongPasswordType) = %v, want %v", err, !want, want)
			}
		})
	}
}

func TestLoginToServerForwardsServerError(t *testing.T) {
	_, err := loginAgainst(t, MethodMD5, MD5Secret("bob", "x"), ServerCredentials{User: "bob", Password: "y"})
	var se *ServerError
	if !errors.As(err, &se) || se.Fields.Code != "28P01" || se.Fields.Severity != "FATAL" {
		t.Fatalf("want ServerError 28P01 FATAL, got %#v", err)
	}
}
