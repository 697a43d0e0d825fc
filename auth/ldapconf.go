package auth

// TLS to the LDAP server is configured where PgBouncer's (libldap's) is:
// in ldap.conf, so that an installation that works with PgBouncer works
// unchanged. We read the file libldap reads ($LDAPCONF, else
// /etc/ldap/ldap.conf), once per process as libldap does, and honour:
//
//	TLS_REQCERT never|allow|try|demand|hard   (default demand)
//	TLS_CACERT  file of PEM CA certificates   (default: the system's)
//
// and the LDAPTLS_REQCERT / LDAPTLS_CACERT environment variables, which
// override the file as in libldap. never and allow do not verify the
// server's certificate; try, demand and hard do (a server always sends
// one). Other ldap.conf settings (URI, BASE, client certificates) are not
// used: the LDAP options say which server to use.

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync"
)

type ldapConf struct {
	reqCert string // lower case; "" means demand
	caFile  string
	err     error // an unreadable TLS_CACERT, reported on each TLS connection
	roots   *x509.CertPool
}

var ldapConfOnce = sync.OnceValue(func() *ldapConf {
	path := os.Getenv("LDAPCONF")
	if path == "" {
		path = "/etc/ldap/ldap.conf"
	}
	data, _ := os.ReadFile(path) // no file: libldap's defaults
	c := parseLDAPConf(data)
	if v := os.Getenv("LDAPTLS_REQCERT"); v != "" {
		c.reqCert = strings.ToLower(v)
	}
	if v := os.Getenv("LDAPTLS_CACERT"); v != "" {
		c.caFile = v
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			c.err = fmt.Errorf("could not read TLS_CACERT: %v", err)
		} else {
			c.roots = x509.NewCertPool()
			if !c.roots.AppendCertsFromPEM(pem) {
				c.err = fmt.Errorf("no certificates in TLS_CACERT %s", c.caFile)
			}
		}
	}
	return c
})

// parseLDAPConf reads the TLS settings of an ldap.conf: one "KEYWORD
// value" a line, # comments, keywords in any case.
func parseLDAPConf(data []byte) *ldapConf {
	c := &ldapConf{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v := line, ""
		if i := strings.IndexAny(line, " \t"); i > 0 {
			k, v = line[:i], strings.TrimSpace(line[i+1:])
		}
		switch strings.ToUpper(k) {
		case "TLS_REQCERT":
			c.reqCert = strings.ToLower(v)
		case "TLS_CACERT":
			c.caFile = v
		}
	}
	return c
}

// tlsConfig is the client TLS configuration for serverName.
func (c *ldapConf) tlsConfig(serverName string) (*tls.Config, error) {
	switch c.reqCert {
	case "never", "allow":
		return &tls.Config{ServerName: serverName, InsecureSkipVerify: true}, nil
	}
	if c.err != nil {
		return nil, c.err
	}
	return &tls.Config{ServerName: serverName, RootCAs: c.roots}, nil
}

func ldapConfTLS(serverName string) (*tls.Config, error) {
	return ldapConfOnce().tlsConfig(serverName)
}
