package auth

// LDAP authentication (auth_type = ldap, hba method ldap), as PgBouncer
// 1.25 and PostgreSQL do it: the client sends its password in clear
// (AuthenticationCleartextPassword) and the pooler checks it by binding to
// the LDAP server as the user.
//
//   - Simple bind (ldapprefix / ldapsuffix): bind as prefix+user+suffix.
//   - Search+bind (ldapbasedn): bind as ldapbinddn (anonymously when not
//     given), search ldapbasedn for exactly one entry matching
//     (ldapsearchattribute=user) or ldapsearchfilter with $username
//     replaced, then bind as that entry's DN with the client's password.
//
// The client library is github.com/go-ldap/ldap/v3 (pure Go, so the
// default build needs no cgo, unlike PgBouncer's libldap). TLS
// verification follows libldap's ldap.conf, as PgBouncer's does: see
// ldapconf.go.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// ldapNetworkTimeout is PgBouncer's LDAP_OPT_NETWORK_TIMEOUT: how long
// connecting to one server may take.
const ldapNetworkTimeout = 3 * time.Second

// ldapDefaultOpTimeout bounds each LDAP request when the caller's context
// has no deadline: a server that accepts and never answers must not hold
// a login forever.
const ldapDefaultOpTimeout = 30 * time.Second

// ldapMaxFilter is PgBouncer's LDAP_LONG_LENGTH: a longer search filter is
// cut there, as PgBouncer cuts it.
const ldapMaxFilter = 256

// LDAPChecker checks passwords against the LDAP server its options name.
type LDAPChecker struct {
	Opts *LDAPOptions
	// tlsConfig returns the TLS settings for a server name; nil means
	// ldap.conf's (tests replace it).
	tlsConfig func(serverName string) (*tls.Config, error)
}

// CheckPassword implements PasswordChecker. The error says why, in
// PgBouncer's words, for the log; the client is only told that LDAP
// authentication failed.
func (lc *LDAPChecker) CheckPassword(ctx context.Context, user, password string) error {
	o := lc.Opts
	if password == "" {
		return errors.New("empty password")
	}
	conn, err := lc.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var dn string
	if o.BaseDN != "" {
		if dn, err = lc.search(conn, user); err != nil {
			return err
		}
	} else {
		dn = o.Prefix + user + o.Suffix
	}
	if _, err := conn.SimpleBind(&ldap.SimpleBindRequest{Username: dn, Password: password}); err != nil {
		return fmt.Errorf("LDAP login failed for user %s on server %s: %s", dn, lc.serverNames(), ldapErrString(err))
	}
	return nil
}

// search finds the DN of the one entry for user.
func (lc *LDAPChecker) search(conn *ldap.Conn, user string) (string, error) {
	o := lc.Opts
	// Characters a filter would need escaped are refused rather than
	// escaped, as PostgreSQL and PgBouncer do: they have no business in a
	// user name and could otherwise inject filter terms.
	if strings.ContainsAny(user, `*()\/`) {
		return "", errors.New("invalid character in user name for LDAP authentication")
	}
	if _, err := conn.SimpleBind(&ldap.SimpleBindRequest{Username: o.BindDN, Password: o.BindPasswd, AllowEmptyPassword: true}); err != nil {
		return "", fmt.Errorf("could not perform initial LDAP bind for ldapbinddn %q on server %q: %s", o.BindDN, lc.serverNames(), ldapErrString(err))
	}
	var filter string
	attrs := []string{"1.1"} // LDAP_NO_ATTRS: the DN is all we need
	if o.SearchFilter != "" {
		filter = strings.ReplaceAll(o.SearchFilter, "$username", user)
	} else {
		attr := o.SearchAttribute
		if attr == "" {
			attr = "uid"
		}
		attrs = []string{attr}
		filter = "(" + attr + "=" + user + ")"
	}
	if len(filter) >= ldapMaxFilter {
		filter = filter[:ldapMaxFilter-1]
	}
	compiled := filter
	if !strings.HasPrefix(compiled, "(") {
		// libldap accepts a filter without its outer parentheses
		// (ldapsearchfilter="uid=$username"); go-ldap wants them.
		compiled = "(" + compiled + ")"
	}
	res, err := conn.Search(ldap.NewSearchRequest(o.BaseDN, o.Scope, ldap.NeverDerefAliases, 0, 0, false, compiled, attrs, nil))
	if err != nil {
		return "", fmt.Errorf("could not search LDAP for filter %q on server %q: %s", filter, lc.serverNames(), ldapErrString(err))
	}
	switch n := len(res.Entries); n {
	case 1:
		if res.Entries[0].DN == "" {
			return "", fmt.Errorf("could not get dn for the first entry matching %q on server %q", filter, lc.serverNames())
		}
		return res.Entries[0].DN, nil
	case 0:
		return "", fmt.Errorf("LDAP user %q does not exist: LDAP search for filter %q on server %q returned no entries", user, filter, lc.serverNames())
	default:
		return "", fmt.Errorf("LDAP user %q is not unique: LDAP search for filter %q on server %q returned %d entries", user, filter, lc.serverNames(), n)
	}
}

// connect opens a connection to the first server that answers, in the
// order given (as libldap tries a URI list), and starts TLS on it for
// ldaptls=1.
func (lc *LDAPChecker) connect(ctx context.Context) (*ldap.Conn, error) {
	o := lc.Opts
	scheme := o.Scheme
	if scheme == "" {
		scheme = "ldap"
	}
	port := o.Port
	if port == 0 {
		port = 389
		if scheme == "ldaps" {
			port = 636
		}
	}
	hosts, err := lc.hosts(ctx, port)
	if err != nil {
		return nil, err
	}
	opTimeout := ldapDefaultOpTimeout
	if dl, ok := ctx.Deadline(); ok {
		opTimeout = time.Until(dl)
		if opTimeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	var lastErr error
	for _, hp := range hosts {
		host, _, _ := net.SplitHostPort(hp)
		tc, err := lc.tls(host)
		if err != nil {
			return nil, err
		}
		dialer := &net.Dialer{Timeout: min(ldapNetworkTimeout, opTimeout)}
		conn, err := ldap.DialURL(scheme+"://"+hp, ldap.DialWithDialer(dialer), ldap.DialWithTLSConfig(tc))
		if err != nil {
			lastErr = err
			continue
		}
		conn.SetTimeout(opTimeout)
		if o.TLS {
			if err := conn.StartTLS(tc); err != nil {
				conn.Close()
				return nil, fmt.Errorf("could not start LDAP TLS session: %s, server: %s, port: %d", ldapErrString(err), lc.serverNames(), o.Port)
			}
		}
		return conn, nil
	}
	return nil, fmt.Errorf("could not connect to LDAP server %s: %s", lc.serverNames(), ldapErrString(lastErr))
}

// hosts lists host:port to try: ldapserver's hosts, else the DNS SRV
// records _ldap._tcp of the domain ldapbasedn's dc= components name.
func (lc *LDAPChecker) hosts(ctx context.Context, port int) ([]string, error) {
	o := lc.Opts
	var out []string
	if len(o.Servers) > 0 {
		for _, h := range o.Servers {
			out = append(out, net.JoinHostPort(h, strconv.Itoa(port)))
		}
		return out, nil
	}
	if o.BaseDN == "" {
		return nil, errors.New("LDAP server not specified, and no ldapbasedn")
	}
	domain := dnToDomain(o.BaseDN)
	if domain == "" {
		return nil, errors.New("could not extract domain name from ldapbasedn")
	}
	_, srvs, err := net.DefaultResolver.LookupSRV(ctx, "ldap", "tcp", domain)
	if err != nil || len(srvs) == 0 {
		return nil, fmt.Errorf("LDAP authentication could not find DNS SRV records for %q", domain)
	}
	for _, s := range srvs {
		out = append(out, net.JoinHostPort(strings.TrimSuffix(s.Target, "."), strconv.Itoa(int(s.Port))))
	}
	return out, nil
}

// dnToDomain turns the dc= components of a DN into a domain name
// (ou=x,dc=example,dc=net → example.net), as libldap's ldap_dn2domain.
func dnToDomain(dn string) string {
	var labels []string
	for _, rdn := range strings.Split(dn, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(rdn), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "dc") && v != "" {
			labels = append(labels, strings.TrimSpace(v))
		}
	}
	return strings.Join(labels, ".")
}

func (lc *LDAPChecker) tls(host string) (*tls.Config, error) {
	if lc.tlsConfig != nil {
		return lc.tlsConfig(host)
	}
	return ldapConfTLS(host)
}

// serverNames is ldapserver as PgBouncer logs it.
func (lc *LDAPChecker) serverNames() string {
	return strings.Join(lc.Opts.Servers, " ")
}

// ldapErrString is an LDAP error in libldap's words where it has one
// (ldap_err2string), so that the log reads as PgBouncer's.
func ldapErrString(err error) string {
	var le *ldap.Error
	if errors.As(err, &le) {
		switch le.ResultCode {
		case ldap.LDAPResultInvalidCredentials:
			return "Invalid credentials"
		case ldap.ErrorNetwork:
			return "Can't contact LDAP server (" + le.Err.Error() + ")"
		}
		if s, ok := ldap.LDAPResultCodeMap[le.ResultCode]; ok {
			return s + " (" + le.Err.Error() + ")"
		}
	}
	if err == nil {
		return "Can't contact LDAP server"
	}
	return err.Error()
}
