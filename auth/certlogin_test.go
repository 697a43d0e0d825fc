package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
)

// certContainsName follows libtls's tls_check_name, which PgBouncer's
// ident maps for cert use: subjectAltNames of the name's kind, wildcards
// over one label, case ignored, then the common name.
func TestCertContainsName(t *testing.T) {
	cert := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "Bouncer"},
		DNSNames:    []string{"pgbouncer.acme.org", "*.wild.example"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.1").To4()},
	}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"pgbouncer.acme.org", true},
		{"PGBOUNCER.acme.org", true},
		{"host.wild.example", true},
		{"a.host.wild.example", false},
		{"wild.example", false},
		{"bouncer", true}, // the common name, case ignored
		{"10.0.0.1", true},
		{"10.0.0.2", false},
		{"other", false},
	} {
		if got := certContainsName(cert, tc.name); got != tc.want {
			t.Errorf("certContainsName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "a", false},
		{"*foo.example", "a.foo.example", false},
		{"*..example", "a..example", false},
		{"*.tld", "a.tld", false},
		{"*.a.b", ".x.a.b", false},
	} {
		if got := certNameMatches(tc.pattern, tc.name); got != tc.want {
			t.Errorf("certNameMatches(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}
