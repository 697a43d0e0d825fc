package auth

// LDAP options: the text after "ldap" on an auth_hba_file line, or the
// value of auth_ldap_options, as PgBouncer 1.25 reads them (src/ldapauth.c)
// with PostgreSQL's pg_hba ldap option names
// (https://www.postgresql.org/docs/current/auth-ldap.html).
//
// Syntax: name=value pairs separated by blanks and at most one comma. A
// name or a value may be double-quoted ("" is a quote inside); an unquoted
// value ends at a blank or a comma. PgBouncer stops reading at the first
// item that is not name=value and ignores the rest of the line; we refuse
// the options instead, as the rest of auth_hba_file does, because an
// ignored ldaptls=1 would silently send passwords in clear.

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// LDAPOptions are parsed LDAP options. Empty strings are options not
// given (PgBouncer's NULL): none of them may be empty when given.
type LDAPOptions struct {
	Scheme          string   // "ldap" or "ldaps"; "" means ldap
	Servers         []string // ldapserver: blank-separated host names; none: DNS SRV from BaseDN
	Port            int      // 0: 389, or 636 for ldaps
	TLS             bool     // ldaptls=1: StartTLS before binding
	Prefix, Suffix  string   // simple bind: DN = Prefix + user + Suffix
	BaseDN          string   // search+bind: where to search
	BindDN          string   // search+bind: who searches (anonymous when empty)
	BindPasswd      string   // search+bind: BindDN's password
	SearchAttribute string   // search+bind: (attr=user); "uid" by default
	SearchFilter    string   // search+bind: filter with $username
	Scope           int      // search scope (LDAPScope*)
}

// Search scopes, as in RFC 4511.
const (
	LDAPScopeBase = 0
	LDAPScopeOne  = 1
	LDAPScopeSub  = 2
)

// ParseLDAPOptions parses and validates an LDAP option string. The error
// texts are PgBouncer's warnings where it has one.
func ParseLDAPOptions(s string) (*LDAPOptions, error) {
	o := &LDAPOptions{Scope: LDAPScopeSub}
	rest := strings.TrimRight(s, " \t\r\n\f\v")
	for {
		key, val, next, err := nextLDAPOption(rest)
		if err != nil {
			return nil, err
		}
		if key == "" {
			break
		}
		rest = next
		if err := o.set(key, val); err != nil {
			return nil, err
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *LDAPOptions) set(key, val string) error {
	switch key {
	case "ldaptls":
		o.TLS = val == "1"
	case "ldapscheme":
		if val != "ldap" && val != "ldaps" {
			return fmt.Errorf("invalid ldapscheme value: %q", val)
		}
		o.Scheme = val
	case "ldapport":
		// atoi: "389x" is 389, as in PgBouncer; 0 or no digits is an error.
		n, _ := strconv.Atoi(leadingDigits(val))
		if n <= 0 || n > 65535 {
			return fmt.Errorf("invalid LDAP port number: %q", val)
		}
		o.Port = n
	case "ldapserver":
		o.Servers = strings.Fields(val)
	case "ldapbinddn":
		o.BindDN = val
	case "ldapsearchattribute":
		o.SearchAttribute = val
	case "ldapsearchfilter":
		o.SearchFilter = val
	case "ldapbasedn":
		o.BaseDN = val
	case "ldapbindpasswd":
		o.BindPasswd = val
	case "ldapprefix":
		o.Prefix = val
	case "ldapsuffix":
		o.Suffix = val
	case "ldapurl":
		return o.parseURL(val)
	default:
		return fmt.Errorf("invalid LDAP option: %q", key)
	}
	return nil
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// validate refuses what PgBouncer and PostgreSQL refuse: mixing the
// simple-bind and search+bind options, neither mode, and a search
// attribute together with a filter.
func (o *LDAPOptions) validate() error {
	if o.Prefix != "" || o.Suffix != "" {
		if o.BaseDN != "" || o.BindDN != "" || o.BindPasswd != "" || o.SearchAttribute != "" || o.SearchFilter != "" {
			return fmt.Errorf("cannot mix options for simple bind and search+bind modes")
		}
	} else if o.BaseDN == "" {
		return fmt.Errorf(`authentication method "ldap" requires argument "ldapbasedn", "ldapprefix", or "ldapsuffix" to be set`)
	}
	if o.SearchAttribute != "" && o.SearchFilter != "" {
		return fmt.Errorf("cannot use ldapsearchattribute together with ldapsearchfilter")
	}
	return nil
}

func isLDAPSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// nextLDAPOption reads one name=value from s: blanks, an optional comma,
// blanks, then the pair. key is "" at the end of s.
func nextLDAPOption(s string) (key, val, rest string, err error) {
	i := 0
	for i < len(s) && isLDAPSpace(s[i]) {
		i++
	}
	if i < len(s) && s[i] == ',' {
		i++
	}
	for i < len(s) && isLDAPSpace(s[i]) {
		i++
	}
	if i == len(s) {
		return "", "", "", nil
	}
	start := i
	bad := func() (string, string, string, error) {
		return "", "", "", fmt.Errorf("LDAP option %q not in name=value format", strings.TrimSpace(s[start:]))
	}
	if s[i] == '"' {
		key, i = ldapQuoted(s, i+1)
	} else {
		j := strings.IndexByte(s[i:], '=')
		if j < 0 {
			return bad()
		}
		key, i = s[i:i+j], i+j
	}
	if i >= len(s) || s[i] != '=' || key == "" {
		return bad()
	}
	i++
	if i >= len(s) || isLDAPSpace(s[i]) {
		return bad()
	}
	if s[i] == '"' {
		val, i = ldapQuoted(s, i+1)
	} else {
		j := i
		for j < len(s) && !isLDAPSpace(s[j]) && s[j] != ',' {
			j++
		}
		val, i = s[i:j], j
		if i < len(s) {
			i++ // the blank or comma that ended the value
		}
	}
	if val == "" {
		return bad()
	}
	return key, val, s[i:], nil
}

// ldapQuoted reads a quoted string whose opening quote is before s[i]; ""
// is a quote. It returns the text and the index after the closing quote
// (or len(s) when there is none, as PgBouncer accepts).
func ldapQuoted(s string, i int) (string, int) {
	var b strings.Builder
	for i < len(s) {
		if s[i] == '"' {
			if i+1 < len(s) && s[i+1] == '"' {
				b.WriteByte('"')
				i += 2
				continue
			}
			return b.String(), i + 1
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String(), i
}

// parseURL reads an RFC 4516 LDAP URL,
// scheme://host[:port][/basedn[?attribute[?scope[?filter]]]], into the
// options it stands for; only the first attribute is used.
func (o *LDAPOptions) parseURL(raw string) error {
	bad := func(why string) error {
		return fmt.Errorf("could not parse LDAP URL %q: %s", raw, why)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return bad("Bad LDAP URL")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "ldap" && scheme != "ldaps" {
		return fmt.Errorf("unsupported LDAP URL scheme: %s", scheme)
	}
	hostport, rest, _ := strings.Cut(rest, "/")
	if hostport != "" {
		u, err := url.Parse("x://" + hostport)
		if err != nil {
			return bad("Bad LDAP URL")
		}
		if h := u.Hostname(); h != "" {
			o.Servers = []string{h}
		}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return bad("Bad LDAP URL")
			}
			o.Port = n
		}
	}
	o.Scheme = scheme
	parts := strings.SplitN(rest, "?", 5)
	get := func(i int) (string, error) {
		if i >= len(parts) {
			return "", nil
		}
		v, err := url.PathUnescape(parts[i])
		if err != nil {
			return "", bad("Bad LDAP URL")
		}
		return v, nil
	}
	dn, err := get(0)
	if err != nil {
		return err
	}
	attrs, err := get(1)
	if err != nil {
		return err
	}
	scope, err := get(2)
	if err != nil {
		return err
	}
	filter, err := get(3)
	if err != nil {
		return err
	}
	if dn != "" {
		o.BaseDN = dn
	}
	if attr, _, _ := strings.Cut(attrs, ","); attr != "" {
		o.SearchAttribute = attr
	}
	// No scope: libldap's default, a subtree search (RFC 4516 says base,
	// but PgBouncer passes libldap's "default" scope on, which is sub).
	switch strings.ToLower(scope) {
	case "":
	case "base":
		o.Scope = LDAPScopeBase
	case "one":
		o.Scope = LDAPScopeOne
	case "sub":
		o.Scope = LDAPScopeSub
	default:
		return bad("Bad LDAP URL")
	}
	if filter != "" {
		o.SearchFilter = filter
	}
	return nil
}
