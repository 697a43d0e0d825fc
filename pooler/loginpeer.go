package pooler

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"os/user"
	"strconv"
	"strings"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/tlsconn"
)

// The two logins decided without a password exchange, as PgBouncer's
// login_via_cert and login_as_unix_peer: by the client's TLS certificate
// or by the OS user at the other end of the Unix socket, each either
// naming the user itself or, with an auth_hba_file rule's map=, through
// the auth_ident_file map.

// certAuth admits a client with a verified TLS certificate: without a
// map, one whose common name is its user name; with one, one whose
// certificate carries the name of a map line for its user (PgBouncer's
// tls_peer_cert_contains_name: a subjectAltName, else the common name).
func (c *client) certAuth(ident *auth.IdentMap) error {
	tc, ok := c.conn.(*tls.Conn)
	if !ok {
		return newError(CodeCertAuthFailed, c.user)
	}
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) == 0 || len(cs.VerifiedChains) == 0 {
		return newError(CodeCertAuthFailed, c.user)
	}
	cert := cs.PeerCertificates[0]
	if ident == nil {
		if cert.Subject.CommonName == c.user {
			return nil
		}
		return newError(CodeCertAuthFailed, c.user)
	}
	if _, ok := ident.Allows(func(name string) bool { return certContainsName(cert, name) }, c.user); !ok {
		c.logger().Error("ident map: " + ident.Name + " does not have a match")
		return newError(CodeCertAuthFailed, c.user)
	}
	return nil
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

// peerAuth admits a client on the Unix socket whose peer's OS user (by
// SO_PEERCRED) is its user name or, with a map, is the system name of a
// map line for its user. As with PgBouncer the user must have an auth
// source (auth_file or auth_query); the secret found is returned for the
// pool's server login, as under trust.
func (c *client) peerAuth(st *config.Settings, db *config.Database, dbKnown bool, ident *auth.IdentMap) (*auth.Secret, auth.Result, error) {
	var none auth.Result
	osUser, ok := c.peerUserName()
	if !ok {
		return nil, none, newError(CodePeerAuthFailed)
	}
	secret, found, err := c.userSecret(st, db, dbKnown)
	switch {
	case errors.Is(err, errAuthQueryNoRow):
	case err != nil:
		return nil, none, err
	}
	if !found {
		return nil, none, newError(CodePeerAuthFailed)
	}
	if ident != nil {
		if _, ok := ident.Allows(func(name string) bool { return name == osUser }, c.user); !ok {
			c.logger().Error("ident map " + ident.Name + " cannot be matched")
			return nil, none, newError(CodePeerAuthFailed)
		}
		c.debugf("ident map '%s' is applied", ident.Name)
		return secret, none, nil
	}
	if osUser != c.user {
		return nil, none, newError(CodePeerAuthFailed)
	}
	return secret, none, nil
}

// peerUserName is the OS user name of the process at the other end of the
// client's Unix socket (TLS over it included); ok is false over TCP or
// where the system cannot tell.
func (c *client) peerUserName() (string, bool) {
	if !c.local {
		return "", false
	}
	uc, ok := tlsconn.NetConn(c.conn).(*net.UnixConn)
	if !ok {
		return "", false
	}
	uid, ok := netpoll.PeerUID(uc)
	if !ok {
		return "", false
	}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return "", false
	}
	return u.Username, true
}
