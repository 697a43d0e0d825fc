package auth

import (
	"crypto/tls"
	"crypto/x509"
	"net/netip"
	"strings"
)

// CertLogin decides a login by TLS client certificate, as PgBouncer's
// login_via_cert: the client must have sent a certificate that verified
// (cs, its TLS connection's state); without an ident map its common name
// must be the user name, with one the certificate must carry the name of
// a map line for user (PgBouncer's tls_peer_cert_contains_name: a
// subjectAltName, else the common name). mapMissed: the map had no line
// that matched, which PgBouncer logs.
func CertLogin(cs tls.ConnectionState, user string, ident *IdentMap) (ok, mapMissed bool) {
	if len(cs.PeerCertificates) == 0 || len(cs.VerifiedChains) == 0 {
		return false, false
	}
	cert := cs.PeerCertificates[0]
	if ident == nil {
		return cert.Subject.CommonName == user, false
	}
	if _, ok := ident.Allows(func(name string) bool { return certContainsName(cert, name) }, user); !ok {
		return false, true
	}
	return true, false
}

// certContainsName reports whether cert names name as libtls's
// tls_check_name does, which PgBouncer uses for ident maps: a
// subjectAltName of name's kind (IP address or DNS name, '*.' wildcards
// allowed for a DNS name), else the common name.
func certContainsName(cert *x509.Certificate, name string) bool {
	if ip, err := netip.ParseAddr(name); err == nil {
		for _, a := range cert.IPAddresses {
			if sa, ok := netip.AddrFromSlice(a); ok && sa.Unmap() == ip.Unmap() && len(a) == ip.BitLen()/8 {
				return true
			}
		}
		// No wildcards against an address.
		return cert.Subject.CommonName == name
	}
	for _, d := range cert.DNSNames {
		if certNameMatches(d, name) {
			return true
		}
	}
	return certNameMatches(cert.Subject.CommonName, name)
}

// certNameMatches is libtls's tls_match_name: equal ignoring case, or a
// wildcard "*.domain.tld" covering one label of name.
func certNameMatches(certName, name string) bool {
	if strings.EqualFold(certName, name) {
		return true
	}
	domain, ok := strings.CutPrefix(certName, "*")
	if !ok || !strings.HasPrefix(domain, ".") || strings.HasPrefix(domain, "..") {
		return false
	}
	// "*.tld" and "*.bar.." are no wildcards.
	next := strings.IndexByte(domain[1:], '.')
	if next < 0 || strings.HasPrefix(domain[1+next+1:], ".") {
		return false
	}
	if strings.HasPrefix(name, ".") {
		return false
	}
	i := strings.IndexByte(name, '.')
	if i < 0 || len(name)-i == 1 {
		return false
	}
	return strings.EqualFold(domain, name[i:])
}
