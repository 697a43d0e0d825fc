package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/internal/testldap"
)

func TestParseLDAPOptions(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want LDAPOptions
	}{
		{`ldapserver=127.0.0.1 ldapport=389 ldapprefix="uid=" ldapsuffix=",dc=example,dc=net"`,
			LDAPOptions{Servers: []string{"127.0.0.1"}, Port: 389, Prefix: "uid=", Suffix: ",dc=example,dc=net", Scope: LDAPScopeSub}},
		// PgBouncer's quoting: a quoted name, a comma before an option.
		{`ldapserver=h "ldapport"=1234 ldapbasedn="dc=example,dc=net" ,ldapsearchfilter="uid=$username"`,
			LDAPOptions{Servers: []string{"h"}, Port: 1234, BaseDN: "dc=example,dc=net", SearchFilter: "uid=$username", Scope: LDAPScopeSub}},
		{`ldapserver="a b" ldapbasedn=dc=x ldaptls=1 ldapbinddn="cn=M,dc=x" ldapbindpasswd="p""w" ldapsearchattribute=cn`,
			LDAPOptions{Servers: []string{"a", "b"}, BaseDN: "dc=x", TLS: true, BindDN: "cn=M,dc=x", BindPasswd: `p"w`, SearchAttribute: "cn", Scope: LDAPScopeSub}},
		{`ldapurl="ldap://127.0.0.1:1389/dc=example,dc=net?uid?sub"`,
			LDAPOptions{Scheme: "ldap", Servers: []string{"127.0.0.1"}, Port: 1389, BaseDN: "dc=example,dc=net", SearchAttribute: "uid", Scope: LDAPScopeSub}},
		{`ldapurl="ldaps://h/dc=example,dc=net??one?(|(uid=$username)(mail=$username))"` + "\n",
			LDAPOptions{Scheme: "ldaps", Servers: []string{"h"}, BaseDN: "dc=example,dc=net", SearchFilter: "(|(uid=$username)(mail=$username))", Scope: LDAPScopeOne}},
		{`ldapurl=ldap://h/dc=x%2Cdc=y?cn?base`,
			LDAPOptions{Scheme: "ldap", Servers: []string{"h"}, BaseDN: "dc=x,dc=y", SearchAttribute: "cn", Scope: LDAPScopeBase}},
		{`ldapscheme=ldaps ldapserver=h ldapbasedn=dc=x`,
			LDAPOptions{Scheme: "ldaps", Servers: []string{"h"}, BaseDN: "dc=x", Scope: LDAPScopeSub}},
	} {
		got, err := ParseLDAPOptions(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.in, *got, tc.want)
		}
	}
	for in, want := range map[string]string{
		``:                          `requires argument "ldapbasedn", "ldapprefix", or "ldapsuffix"`,
		`ldapserver=h`:              `requires argument "ldapbasedn"`,
		`ldapprefix=a ldapbasedn=b`: "cannot mix options for simple bind and search+bind modes",
		`ldapbasedn=b ldapsearchattribute=uid ldapsearchfilter=x`: "cannot use ldapsearchattribute together with ldapsearchfilter",
		`ldapbasedn=b ldapport=0`:                                 `invalid LDAP port number: "0"`,
		`ldapbasedn=b ldapscheme=ldapi`:                           `invalid ldapscheme value: "ldapi"`,
		`ldapbasedn=b ldapfoo=1`:                                  `invalid LDAP option: "ldapfoo"`,
		`ldapbasedn=b ldaptls`:                                    `not in name=value format`,
		`ldapbasedn=b ldaptls= 1`:                                 `not in name=value format`,
		`ldapurl="ldapi://%2Fsock/dc=x"`:                          "unsupported LDAP URL scheme: ldapi",
		`ldapurl="ldap://h/dc=x?uid?bogus"`:                       "could not parse LDAP URL",
	} {
		_, err := ParseLDAPOptions(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}

func TestHBALDAPLine(t *testing.T) {
	data := `host all ldapuser1 0.0.0.0/0 ldap ldapserver=127.0.0.1 "ldapport"=1389 ldapbasedn="dc=example,dc=net" ,ldapsearchfilter="uid=$username" # comment
host all all 0.0.0.0/0 md5
`
	h, err := ParseHBA("/x/hba.conf", []byte(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	rule, ok := h.Match(HBAConn{Addr: netip.MustParseAddr("10.0.0.1"), Database: "db", User: "ldapuser1"})
	if !ok || rule.Method != HBALDAP || rule.LDAP == nil {
		t.Fatalf("rule %+v ok=%v", rule, ok)
	}
	if o := rule.LDAP; o.Port != 1389 || o.BaseDN != "dc=example,dc=net" || o.SearchFilter != "uid=$username" || len(o.Servers) != 1 {
		t.Errorf("options %+v", *o)
	}
	_, err = ParseHBA("/x/hba.conf", []byte("host all all 0.0.0.0/0 ldap ldapserver=h\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `hba.conf:1: authentication method "ldap" requires argument`) {
		t.Errorf("incomplete ldap line: %v", err)
	}
}

func TestParseLDAPConf(t *testing.T) {
	c := parseLDAPConf([]byte("# x\nBASE dc=x\ntls_reqcert   never\nTLS_CACERT /etc/ca.pem\n"))
	if c.reqCert != "never" || c.caFile != "/etc/ca.pem" {
		t.Errorf("%+v", c)
	}
	cfg, err := c.tlsConfig("h")
	if err != nil || !cfg.InsecureSkipVerify {
		t.Errorf("never: %+v %v", cfg, err)
	}
	cfg, err = (&ldapConf{reqCert: "demand"}).tlsConfig("h")
	if err != nil || cfg.InsecureSkipVerify || cfg.ServerName != "h" {
		t.Errorf("demand: %+v %v", cfg, err)
	}
}

// ldapTestChecker checks against srv, trusting its CA for the name in its
// certificate.
func ldapTestChecker(t *testing.T, srv *testldap.Server, opts string) *LDAPChecker {
	t.Helper()
	o, err := ParseLDAPOptions(opts)
	if err != nil {
		t.Fatalf("%s: %v", opts, err)
	}
	pem, err := os.ReadFile(srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return &LDAPChecker{Opts: o, tlsConfig: func(string) (*tls.Config, error) {
		return &tls.Config{ServerName: "server", RootCAs: roots}, nil
	}}
}

func TestLDAPCheckerSlapd(t *testing.T) {
	srv := testldap.Start(t)
	p, tp := srv.Port, srv.TLSPort
	base := `ldapbasedn="dc=example,dc=net"`
	ok := []string{
		fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d ldapprefix="uid=" ldapsuffix=",dc=example,dc=net"`, p),
		fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s`, p, base),
		fmt.Sprintf(`ldapserver="127.0.0.2 127.0.0.1" ldapport=%d %s`, p, base), // the first does not answer
		fmt.Sprintf(`ldapurl="ldap://127.0.0.1:%d/dc=example,dc=net?uid?sub"`, p),
		fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s ldapsearchattribute=uid`, p, base),
		fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s ldapsearchfilter="uid=$username"`, p, base),
		fmt.Sprintf(`ldapurl="ldap://127.0.0.1:%d/dc=example,dc=net??sub?(|(uid=$username)(mail=$username))"`, p),
		fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s ldapbinddn="cn=Manager,dc=example,dc=net" ldapbindpasswd=secret`, p, base),
		fmt.Sprintf(`ldapurl="ldaps://127.0.0.1:%d/dc=example,dc=net?uid?sub"`, tp),
		fmt.Sprintf(`ldapscheme=ldaps ldapserver=127.0.0.1 ldapport=%d ldapprefix="uid=" ldapsuffix=",dc=example,dc=net"`, tp),
		fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d ldapprefix="uid=" ldapsuffix=",dc=example,dc=net" ldaptls=1`, p),
		fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s ldaptls=1`, p, base),
	}
	for _, opts := range ok {
		lc := ldapTestChecker(t, srv, opts)
		if err := lc.CheckPassword(context.Background(), "ldapuser1", "secret1"); err != nil {
			t.Errorf("%s: %v", opts, err)
		}
		if err := lc.CheckPassword(context.Background(), "ldapuser1", "wrong"); err == nil || !strings.Contains(err.Error(), "LDAP login failed for user uid=ldapuser1,dc=example,dc=net") {
			t.Errorf("%s: wrong password: %v", opts, err)
		}
	}
	for _, tc := range []struct{ opts, user, pw, want string }{
		{fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s`, p, base), "nobody", "x", `LDAP user "nobody" does not exist`},
		{fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s ldapsearchfilter="(description=$username)"`, p, base), "twins", "t1", `LDAP user "twins" is not unique`},
		{fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s`, p, base), "ldap*", "secret1", "invalid character in user name"},
		{fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d %s ldapbinddn="cn=Manager,dc=example,dc=net" ldapbindpasswd=nope`, p, base), "ldapuser1", "secret1", "could not perform initial LDAP bind"},
		// TLS where the server speaks none, and none where it wants TLS.
		{fmt.Sprintf(`ldapurl="ldaps://127.0.0.1:%d/dc=example,dc=net?uid?sub"`, p), "ldapuser1", "secret1", "could not connect to LDAP server"},
		{fmt.Sprintf(`ldapserver=127.0.0.1 ldapport=%d ldapprefix="uid=" ldaptls=1`, tp), "ldapuser1", "secret1", "could not start LDAP TLS session"},
		{fmt.Sprintf(`ldapurl="ldaps://127.0.0.1:%d/dc=example,dc=net?uid?sub" ldaptls=1`, tp), "ldapuser1", "secret1", "could not start LDAP TLS session"},
	} {
		err := ldapTestChecker(t, srv, tc.opts).CheckPassword(context.Background(), tc.user, tc.pw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s (%s): got %v, want %q", tc.opts, tc.user, err, tc.want)
		}
	}
	// A certificate the client does not trust is refused (TLS_REQCERT
	// demand, libldap's default).
	o, _ := ParseLDAPOptions(fmt.Sprintf(`ldapurl="ldaps://127.0.0.1:%d/dc=example,dc=net?uid?sub"`, tp))
	lc := &LDAPChecker{Opts: o, tlsConfig: (&ldapConf{}).tlsConfig}
	if err := lc.CheckPassword(context.Background(), "ldapuser1", "secret1"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
}
