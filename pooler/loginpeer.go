package pooler

import (
	"crypto/tls"
	"errors"
	"net"
	"os/user"
	"strconv"

	"github.com/pgturnstile/pgturnstile/auth"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/netpoll"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/internal/tlsconn"
)

// The two logins decided without a password exchange, as PgBouncer's
// login_via_cert and login_as_unix_peer: by the client's TLS certificate
// or by the OS user at the other end of the Unix socket, each either
// naming the user itself or, with an auth_hba_file rule's map=, through
// the auth_ident_file map.

// certAuth admits a client with a verified TLS certificate, by its
// common name or through the ident map (auth.CertLogin).
func (c *client) certAuth(ident *auth.IdentMap) error {
	tc, ok := c.conn.(*tls.Conn)
	if !ok {
		return pgerror.New(pgerror.CertAuthFailed, c.user)
	}
	ok, mapMissed := auth.CertLogin(tc.ConnectionState(), c.user, ident)
	if mapMissed {
		c.logger().Error("ident map: " + ident.Name + " does not have a match")
	}
	if !ok {
		return pgerror.New(pgerror.CertAuthFailed, c.user)
	}
	return nil
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
		return nil, none, pgerror.New(pgerror.PeerAuthFailed)
	}
	secret, found, err := c.userSecret(st, db, dbKnown)
	switch {
	case errors.Is(err, errAuthQueryNoRow):
	case err != nil:
		return nil, none, err
	}
	if !found {
		return nil, none, pgerror.New(pgerror.PeerAuthFailed)
	}
	if ident != nil {
		if _, ok := ident.Allows(func(name string) bool { return name == osUser }, c.user); !ok {
			c.logger().Error("ident map " + ident.Name + " cannot be matched")
			return nil, none, pgerror.New(pgerror.PeerAuthFailed)
		}
		c.debugf("ident map '%s' is applied", ident.Name)
		return secret, none, nil
	}
	if osUser != c.user {
		return nil, none, pgerror.New(pgerror.PeerAuthFailed)
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
