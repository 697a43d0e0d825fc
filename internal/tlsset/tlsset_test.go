package tlsset

import (
	"errors"
	"testing"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/testcert"
)

// pair writes a CA and a server certificate signed by it; it returns the
// certificate and key files.
func pair(t *testing.T, name string) (cert, key string) {
	t.Helper()
	dir := t.TempDir()
	ca, err := testcert.NewCA(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err = ca.Issue(dir, "server", testcert.Localhost, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// withTLS is the default configuration with client TLS required from
// cert and key.
func withTLS(t *testing.T, cert, key string) *config.Config {
	t.Helper()
	cfg := config.Default()
	for k, v := range map[string]string{"client_tls_sslmode": "require", "client_tls_cert_file": cert, "client_tls_key_file": key} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// WantedOf reads both sides' settings, the TLS 1.3 cipher lists
// included, which have no Settings field.
func TestWantedOf(t *testing.T) {
	cfg := config.Default()
	for k, v := range map[string]string{
		"client_tls_sslmode": "prefer", "client_tls_ciphers": "secure",
		"client_tls13_ciphers": "TLS_AES_128_GCM_SHA256", "server_tls_sslmode": "verify-full",
		"server_tls_ca_file": "/etc/ca.crt", "server_tls13_ciphers": "TLS_AES_256_GCM_SHA384",
	} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	w := WantedOf(cfg)
	if w.Client.Mode != "prefer" || w.Client.Ciphers != "secure" || w.Client.Ciphers13 != "TLS_AES_128_GCM_SHA256" {
		t.Errorf("client: %+v", w.Client)
	}
	if w.Server.Mode != "verify-full" || w.Server.CAFile != "/etc/ca.crt" || w.Server.Ciphers13 != "TLS_AES_256_GCM_SHA384" {
		t.Errorf("server: %+v", w.Server)
	}
}

// At start a set that does not load is an error; later it keeps the TLS
// in force and says so; a SET of another key builds nothing again; a set
// that loads is put in force.
func TestDerive(t *testing.T) {
	cert1, key1 := pair(t, "one")
	cert2, key2 := pair(t, "two")

	if _, _, _, err := Derive(nil, withTLS(t, cert1, key2), true); err == nil {
		t.Fatal("at start, a key that does not match its certificate: no error")
	}

	cur, _, notApplied, err := Derive(nil, withTLS(t, cert1, key1), true)
	if err != nil || notApplied != nil {
		t.Fatalf("at start: %v, %v", err, notApplied)
	}
	if cur.ClientTLS == nil || cur.ClientMode != "require" || cur.Want.Client.CertFile != cert1 {
		t.Fatalf("in force: %+v", cur)
	}

	// A SET of another key: nothing read again, the same configuration.
	other := withTLS(t, cert1, key1)
	if err := other.Set("default_pool_size", "7"); err != nil {
		t.Fatal(err)
	}
	next, _, notApplied, err := Derive(&cur, other, false)
	if err != nil || notApplied != nil || next.ClientTLS != cur.ClientTLS {
		t.Errorf("SET of another key: %v, %v, same config %v", err, notApplied, next.ClientTLS == cur.ClientTLS)
	}

	// Half a rotation: kept out, the old TLS in force, the new values
	// remembered as given.
	half := withTLS(t, cert1, key2)
	next, _, notApplied, err = Derive(&cur, half, false)
	var na *NotAppliedError
	if err != nil || !errors.As(notApplied, &na) {
		t.Fatalf("half a rotation: %v, %v; want a NotAppliedError", err, notApplied)
	}
	if next.ClientTLS != cur.ClientTLS || next.Want.Client.KeyFile != key2 {
		t.Errorf("half a rotation: same config %v, key given %q", next.ClientTLS == cur.ClientTLS, next.Want.Client.KeyFile)
	}
	if got := notApplied.Error(); len(got) <= len(SetNotApplied) || got[:len(SetNotApplied)] != SetNotApplied {
		t.Errorf("text %q", got)
	}

	// The rotation completed: the new set is in force.
	done, _, notApplied, err := Derive(&next, withTLS(t, cert2, key2), false)
	if err != nil || notApplied != nil || done.ClientTLS == cur.ClientTLS || done.Want.Client.CertFile != cert2 {
		t.Errorf("the rotation done: %v, %v, new config %v", err, notApplied, done.ClientTLS != cur.ClientTLS)
	}
}

// Servers reconnect on any change of server_tls_*, except between two
// ways of having TLS off.
func TestServerChanged(t *testing.T) {
	off, disable := auth.TLSSettings{}, auth.TLSSettings{Mode: auth.TLSDisable}
	require := auth.TLSSettings{Mode: "require"}
	for _, c := range []struct {
		a, b auth.TLSSettings
		want bool
	}{
		{off, disable, false},
		{disable, auth.TLSSettings{Mode: auth.TLSDisable, CAFile: "/x"}, false},
		{disable, require, true},
		{require, auth.TLSSettings{Mode: "require", Ciphers: "secure"}, true},
		{require, require, false},
	} {
		if got := ServerChanged(c.a, c.b); got != c.want {
			t.Errorf("ServerChanged(%+v, %+v) = %v", c.a, c.b, got)
		}
	}
}
