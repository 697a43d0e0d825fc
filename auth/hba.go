package auth

// auth_hba_file: the subset of pg_hba.conf that PgBouncer supports
// (https://www.pgbouncer.org/config.html#hba-file-format and
// https://www.postgresql.org/docs/current/auth-pg-hba-conf.html).
//
// Syntax, as PostgreSQL 16 reads it:
//
//   - One record per line; a line whose last character is a backslash
//     continues on the next line (the two are joined without the backslash,
//     before comments are stripped, as PostgreSQL does). A record's line
//     number is the line it starts on.
//   - '#' outside double quotes starts a comment.
//   - Fields are separated by blanks. A field may be a comma list; blanks
//     around the commas are allowed (PgBouncer's tokenizer allows them,
//     PostgreSQL's only after a comma).
//   - Double quotes may enclose any part of a word; "" inside quotes is a
//     literal quote. A word with any quoted part is never a keyword: "all"
//     is the database or user named all. @file is recognised only when the
//     word does not start with a quote.
//
// Records:
//
//	local      DATABASE USER METHOD [OPTIONS]
//	host       DATABASE USER ADDRESS METHOD [OPTIONS]
//	hostssl    DATABASE USER ADDRESS METHOD [OPTIONS]
//	hostnossl  DATABASE USER ADDRESS METHOD [OPTIONS]
//	host...    DATABASE USER IP-ADDRESS IP-MASK METHOD [OPTIONS]
//
// Where we differ from PgBouncer, on purpose:
//
//   - A line PgBouncer cannot parse is logged and skipped; a skipped reject
//     line silently opens access, so ParseHBA reports every bad line as an
//     error (the pooler keeps the previous rules on RELOAD). The rules from
//     the lines that did parse are returned as well, for a caller that wants
//     PgBouncer's leniency.
//   - An address with host bits outside its mask (10.1.2.3/8) is masked, as
//     PostgreSQL does; PgBouncer warns and the rule never matches.
//   - Options other than map= (for cert and peer) are errors rather than
//     ignored: an ignored clientcert=verify-full would weaken a rule.
//
// Like PgBouncer we accept peer and cert on any record type: the caller
// refuses peer over TCP and cert without a verified client certificate when
// it runs the method.

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// HBAMethod is the authentication method an HBA rule selects.
type HBAMethod int

const (
	HBATrust    HBAMethod = iota + 1 // no password
	HBAReject                        // refuse the login
	HBAMD5                           // MD5 challenge (SCRAM when the secret is SCRAM)
	HBAPassword                      // cleartext password (auth_type plain)
	HBASCRAM                         // SCRAM-SHA-256
	HBACert                          // TLS client certificate; user = CN (or map=)
	HBAPeer                          // Unix-socket peer credentials (or map=)
	HBALDAP                          // cleartext password checked by LDAP (HBARule.LDAP)
)

var hbaMethodNames = [...]string{
	HBATrust:    "trust",
	HBAReject:   "reject",
	HBAMD5:      "md5",
	HBAPassword: "password",
	HBASCRAM:    "scram-sha-256",
	HBACert:     "cert",
	HBAPeer:     "peer",
	HBALDAP:     "ldap",
}

// String returns the method as spelled in pg_hba.conf.
func (m HBAMethod) String() string {
	if m >= HBATrust && int(m) < len(hbaMethodNames) {
		return hbaMethodNames[m]
	}
	return "HBAMethod(" + strconv.Itoa(int(m)) + ")"
}

// Method is the authentication method a rule's method runs: a password
// exchange, or trust. cert and peer have none (the zero Method): the
// caller decides those logins itself. ok is false for reject and any
// method the pooler does not run.
func (m HBAMethod) Method() (method Method, ok bool) {
	switch m {
	case HBATrust:
		return MethodTrust, true
	case HBAMD5:
		return MethodMD5, true
	case HBAPassword:
		return MethodPlain, true
	case HBASCRAM:
		return MethodSCRAM, true
	case HBACert, HBAPeer:
		return method, true
	case HBALDAP:
		return MethodLDAP, true
	}
	return method, false
}

// HBARule is what a matching rule tells the caller.
type HBARule struct {
	Line    int               // line of the auth_hba_file the record starts on
	Method  HBAMethod         // what the pooler does with the login
	Options map[string]string // name=value options, e.g. "map" for cert/peer; nil when none. Shared: do not modify.
	// Ident is the auth_ident_file map that map= names, set by
	// ResolveMaps; nil without map=. Shared: do not modify.
	Ident *IdentMap
	// LDAP is the ldap method's options (hba_ldap.go). Shared: do not modify.
	LDAP *LDAPOptions
}

// HBAConn describes a login attempt.
type HBAConn struct {
	Local    bool       // Unix-socket connection
	TLS      bool       // the client completed a TLS handshake
	Addr     netip.Addr // client IP for TCP; IPv4-mapped IPv6 is treated as IPv4
	Database string
	User     string
	// Replication is a physical replication connection (replication=true in
	// the startup packet): only rules naming the replication keyword match
	// it, and its Database is ignored. A logical replication connection
	// (replication=database) names a database and matches like any other
	// connection; leave Replication false for it, as PostgreSQL does.
	Replication bool
}

// HBAError is a problem in the auth_hba_file, or in a file it includes
// with @file, at one line.
type HBAError struct {
	File string
	Line int
	Msg  string
}

func (e *HBAError) Error() string {
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

// HBA is a parsed auth_hba_file. It is immutable after parsing, so one
// value may be shared by every client goroutine; RELOAD builds a new one.
type HBA struct {
	rules []hbaRule
}

type hbaConnType int

const (
	hbaLocal hbaConnType = iota + 1
	hbaHost
	hbaHostSSL
	hbaHostNoSSL
)

var hbaConnTypes = map[string]hbaConnType{
	"local":     hbaLocal,
	"host":      hbaHost,
	"hostssl":   hbaHostSSL,
	"hostnossl": hbaHostNoSSL,
}

type hbaRule struct {
	HBARule
	conn    hbaConnType
	db      hbaNames
	user    hbaNames
	anyAddr bool         // address "all", or a local record
	prefix  netip.Prefix // masked; IPv4 for IPv4 and IPv4-mapped rules
	// ldapAfter: for the ldap method, how many fields come before its
	// options.
	ldapAfter int
}

// hbaNames is a DATABASE or USER column after @file expansion.
type hbaNames struct {
	all         bool // keyword all
	sameUser    bool // keyword sameuser (database column only)
	replication bool // keyword replication (database column only)
	names       map[string]struct{}
}

// hbaMaxIncludeDepth bounds @file nesting; PostgreSQL has no limit but
// detects cycles, which we do as well.
const hbaMaxIncludeDepth = 10

// LoadHBA reads and parses the auth_hba_file at path; @file references are
// read from the file system relative to its directory.
func LoadHBA(path string) (*HBA, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseHBA(path, data, os.ReadFile)
}

// ParseHBA parses data read from path; @file references in the database and
// user columns are read with readFile (paths relative to the directory of
// path, or of the file that names them). path is used for error messages and
// to resolve @file names only.
//
// On error it returns the rules from the lines that parsed together with an
// error: an *HBAError when one line is bad, or errors.Join of one *HBAError
// per bad line. Callers that want PostgreSQL's behaviour (refuse the whole
// file) ignore the rules when err != nil.
func ParseHBA(path string, data []byte, readFile func(string) ([]byte, error)) (*HBA, error) {
	p := hbaParser{readFile: readFile, stack: []string{filepath.Clean(path)}}
	h := &HBA{}
	var errs []error
	for _, ln := range hbaLines(data) {
		fields, msg := hbaLex(ln.text, false)
		if msg == "" && len(fields) == 0 {
			continue
		}
		var r hbaRule
		var err error
		if msg != "" {
			err = &HBAError{File: path, Line: ln.num, Msg: msg}
		} else {
			r, err = p.record(path, ln.num, fields)
			if err == nil && r.Method == HBALDAP {
				err = r.parseLDAP(path, ln)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		h.rules = append(h.rules, r)
	}
	switch len(errs) {
	case 0:
		return h, nil
	case 1:
		return h, errs[0]
	}
	return h, errors.Join(errs...)
}

// Match returns the first rule that applies to c; ok=false means no rule
// matched, and the caller rejects the login as PostgreSQL and PgBouncer do.
// A nil *HBA matches nothing.
func (h *HBA) Match(c HBAConn) (rule HBARule, ok bool) {
	if h == nil {
		return HBARule{}, false
	}
	addr := c.Addr.Unmap().WithZone("")
	for i := range h.rules {
		r := &h.rules[i]
		if c.Local != (r.conn == hbaLocal) {
			continue
		}
		if r.conn == hbaHostSSL && !c.TLS || r.conn == hbaHostNoSSL && c.TLS {
			continue
		}
		if !r.anyAddr && !r.prefix.Contains(addr) {
			continue
		}
		if !r.db.matchDatabase(c) || !r.user.matchUser(c.User) {
			continue
		}
		return r.HBARule, true
	}
	return HBARule{}, false
}

func (n *hbaNames) matchDatabase(c HBAConn) bool {
	if c.Replication {
		return n.replication
	}
	if n.all || n.sameUser && c.Database == c.User {
		return true
	}
	_, ok := n.names[c.Database]
	return ok
}

func (n *hbaNames) matchUser(user string) bool {
	if n.all {
		return true
	}
	_, ok := n.names[user]
	return ok
}

// ---- lines and words ----

type hbaLine struct {
	num  int
	text string
}

// hbaLines splits data into logical lines, joining backslash continuations.
func hbaLines(data []byte) []hbaLine {
	var out []hbaLine
	s := string(data)
	num := 0
	for len(s) > 0 {
		num++
		start := num
		var b strings.Builder
		for {
			line, rest, _ := strings.Cut(s, "\n")
			s = rest
			line = strings.TrimRight(line, "\r")
			if strings.HasSuffix(line, `\`) && len(s) > 0 {
				b.WriteString(line[:len(line)-1])
				num++
				continue
			}
			b.WriteString(strings.TrimSuffix(line, `\`))
			break
		}
		out = append(out, hbaLine{num: start, text: b.String()})
	}
	return out
}

// hbaWord is one name or value. quoted is set when any part of it was in
// double quotes (so it is never a keyword); initQuote when it started with
// one (so a leading @ is literal).
type hbaWord struct {
	text      string
	quoted    bool
	initQuote bool
}

// hbaField is one blank-separated column: a comma list of one or more words.
type hbaField []hbaWord

func hbaBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'
}

// hbaLex splits one logical line into fields. It returns a message on a
// lexical error. In an @file (names) commas are plain separators: empty
// items and a comma at the end of a line are allowed there.
func hbaLex(line string, names bool) ([]hbaField, string) {
	var fields []hbaField
	i := 0
	skip := func() {
		for i < len(line) && hbaBlank(line[i]) {
			i++
		}
	}
	for {
		skip()
		if i >= len(line) || line[i] == '#' {
			return fields, ""
		}
		var f hbaField
		for {
			w, n, msg := hbaLexWord(line[i:])
			if msg != "" {
				return nil, msg
			}
			i += n
			switch {
			case w.text != "" || w.quoted:
				f = append(f, w)
			case !names:
				return nil, "empty item in comma-separated list"
			}
			skip()
			if i < len(line) && line[i] == ',' {
				i++
				skip()
				if i >= len(line) || line[i] == '#' {
					if names {
						break
					}
					return nil, "comma at end of line"
				}
				continue
			}
			break
		}
		if len(f) > 0 {
			fields = append(fields, f)
		}
	}
}

// hbaLexWord reads one word from the start of s, which is not blank.
func hbaLexWord(s string) (w hbaWord, n int, msg string) {
	var b strings.Builder
	inQuote := false
	i := 0
	for i < len(s) {
		c := s[i]
		if inQuote {
			if c == '"' {
				if i+1 < len(s) && s[i+1] == '"' {
					b.WriteByte('"')
					i += 2
					continue
				}
				inQuote = false
				i++
				continue
			}
			b.WriteByte(c)
			i++
			continue
		}
		if hbaBlank(c) || c == ',' || c == '#' {
			break
		}
		if c == '"' {
			if i == 0 {
				w.initQuote = true
			}
			w.quoted = true
			inQuote = true
			i++
			continue
		}
		b.WriteByte(c)
		i++
	}
	if inQuote {
		return hbaWord{}, 0, "unterminated quoted string"
	}
	w.text = b.String()
	return w, i, ""
}

// ---- records ----

type hbaParser struct {
	readFile func(string) ([]byte, error)
	stack    []string // files being read, outermost first, for cycle detection
}

func (p *hbaParser) record(file string, line int, fields []hbaField) (hbaRule, error) {
	fail := func(format string, args ...any) (hbaRule, error) {
		return hbaRule{}, &HBAError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	r := hbaRule{HBARule: HBARule{Line: line}}
	nFields := len(fields)

	typ := fields[0]
	if len(typ) > 1 {
		return fail("multiple values specified for connection type")
	}
	ct, ok := hbaConnTypes[typ[0].text]
	if !ok || typ[0].quoted {
		switch typ[0].text {
		case "hostgssenc", "hostnogssenc":
			return fail("connection type %q is not supported", typ[0].text)
		}
		return fail("invalid connection type %q", typ[0].text)
	}
	r.conn = ct
	fields = fields[1:]

	if len(fields) == 0 {
		return fail("end-of-line before database specification")
	}
	var err error
	if r.db, err = p.names(file, line, fields[0], true); err != nil {
		return hbaRule{}, err
	}
	fields = fields[1:]

	if len(fields) == 0 {
		return fail("end-of-line before user specification")
	}
	if r.user, err = p.names(file, line, fields[0], false); err != nil {
		return hbaRule{}, err
	}
	fields = fields[1:]

	if ct == hbaLocal {
		r.anyAddr = true
	} else {
		if len(fields) == 0 {
			return fail("end-of-line before IP address specification")
		}
		n, msg := r.address(fields)
		if msg != "" {
			return fail("%s", msg)
		}
		fields = fields[n:]
	}

	if len(fields) == 0 {
		return fail("end-of-line before authentication method")
	}
	if len(fields[0]) > 1 {
		return fail("multiple values specified for authentication method")
	}
	m, msg := parseHBAMethod(fields[0][0].text)
	if msg != "" {
		return fail("%s", msg)
	}
	r.Method = m
	fields = fields[1:]
	if m == HBALDAP {
		// The rest of the line is LDAP options in PgBouncer's own
		// syntax, read from the raw text by parseLDAP.
		r.ldapAfter = nFields - len(fields)
		return r, nil
	}

	for _, f := range fields {
		if len(f) > 1 {
			return fail("multiple values specified for authentication option %q", f[0].text)
		}
		name, value, ok := strings.Cut(f[0].text, "=")
		if !ok || name == "" {
			return fail("authentication option %q not in name=value format", f[0].text)
		}
		if name != "map" {
			return fail("unsupported authentication option %q (only map= is supported)", name)
		}
		if m != HBACert && m != HBAPeer {
			return fail("authentication option map is only valid for methods cert and peer")
		}
		if value == "" {
			return fail("missing value for authentication option %q", name)
		}
		if r.Options == nil {
			r.Options = make(map[string]string)
		}
		r.Options[name] = value
	}
	return r, nil
}

func parseHBAMethod(s string) (HBAMethod, string) {
	for m := HBATrust; int(m) < len(hbaMethodNames); m++ {
		if hbaMethodNames[m] == s {
			return m, ""
		}
	}
	switch s {
	case "pam", "gss", "sspi", "ident", "radius", "bsd", "any", "plain", "oauth":
		return 0, fmt.Sprintf("unsupported auth method %q", s)
	}
	return 0, fmt.Sprintf("invalid auth method %q", s)
}

// address parses the ADDRESS column and, for an address without /prefix,
// the IP-MASK column after it. It returns how many fields it used.
func (r *hbaRule) address(fields []hbaField) (int, string) {
	f := fields[0]
	if len(f) > 1 {
		return 0, "multiple values specified for host address"
	}
	w := f[0]
	if !w.quoted {
		switch w.text {
		case "all":
			r.anyAddr = true
			return 1, ""
		case "samehost", "samenet":
			return 0, fmt.Sprintf("address %q is not supported (PgBouncer supports only all and IP addresses)", w.text)
		}
	}
	if strings.Contains(w.text, "/") {
		pfx, err := netip.ParsePrefix(w.text)
		if err != nil {
			return 0, fmt.Sprintf("invalid IP address/prefix %q", w.text)
		}
		r.prefix = hbaNormalize(pfx)
		return 1, ""
	}
	addr, err := netip.ParseAddr(w.text)
	if err != nil {
		return 0, fmt.Sprintf("invalid IP address %q (host names are not supported)", w.text)
	}
	if addr.Zone() != "" {
		return 0, fmt.Sprintf("invalid IP address %q (zones are not supported)", w.text)
	}
	if len(fields) < 2 {
		return 0, "end-of-line before netmask specification"
	}
	if len(fields[1]) > 1 {
		return 0, "multiple values specified for netmask"
	}
	ms := fields[1][0].text
	mask, err := netip.ParseAddr(ms)
	if err != nil || mask.Zone() != "" {
		return 0, fmt.Sprintf("invalid IP mask %q (an address without /prefix needs a netmask column)", ms)
	}
	if mask.Is4() != addr.Is4() {
		return 0, fmt.Sprintf("IP address %q and mask %q are of different address families", w.text, ms)
	}
	bits, ok := hbaMaskBits(mask)
	if !ok {
		return 0, fmt.Sprintf("invalid IP mask %q (not a contiguous netmask)", ms)
	}
	r.prefix = hbaNormalize(netip.PrefixFrom(addr, bits))
	return 2, ""
}

// hbaNormalize masks the prefix and turns an IPv4-mapped one into IPv4, so
// that it compares with unmapped client addresses.
func hbaNormalize(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// hbaMaskBits returns the prefix length of a netmask such as 255.255.0.0.
func hbaMaskBits(mask netip.Addr) (int, bool) {
	bits, zero := 0, false
	for _, b := range mask.AsSlice() {
		for i := 7; i >= 0; i-- {
			one := b&(1<<i) != 0
			switch {
			case one && zero:
				return 0, false
			case one:
				bits++
			default:
				zero = true
			}
		}
	}
	return bits, true
}

// names parses a DATABASE (isDB) or USER column, expanding @file.
func (p *hbaParser) names(file string, line int, f hbaField, isDB bool) (hbaNames, error) {
	var n hbaNames
	err := p.addNames(&n, file, line, f, isDB)
	return n, err
}

func (p *hbaParser) addNames(n *hbaNames, file string, line int, words []hbaWord, isDB bool) error {
	fail := func(format string, args ...any) error {
		return &HBAError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	for _, w := range words {
		if !w.quoted {
			switch {
			case w.text == "all":
				n.all = true
				continue
			case isDB && w.text == "sameuser":
				n.sameUser = true
				continue
			case isDB && w.text == "replication":
				n.replication = true
				continue
			case isDB && (w.text == "samerole" || w.text == "samegroup"):
				return fail("%s is not supported", w.text)
			case strings.HasPrefix(w.text, "+"):
				return fail("group names are not supported: %q (list the users, or use @file)", w.text)
			case strings.HasPrefix(w.text, "/"):
				return fail("regular expressions are not supported: %q (quote the name if it starts with /)", w.text)
			}
		}
		if !w.initQuote && strings.HasPrefix(w.text, "@") {
			if err := p.include(n, file, line, w.text[1:], isDB); err != nil {
				return err
			}
			continue
		}
		if n.names == nil {
			n.names = make(map[string]struct{})
		}
		n.names[w.text] = struct{}{}
	}
	return nil
}

// include adds the names in an @file: words separated by blanks, commas or
// newlines, with comments, quotes and keywords as in the main file.
func (p *hbaParser) include(n *hbaNames, file string, line int, name string, isDB bool) error {
	fail := func(format string, args ...any) error {
		return &HBAError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if name == "" {
		return fail("missing file name after @")
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(file), path)
	}
	clean := filepath.Clean(path)
	for _, f := range p.stack {
		if f == clean {
			return fail("@%s: circular @file reference", name)
		}
	}
	if len(p.stack) > hbaMaxIncludeDepth {
		return fail("@%s: @file nesting deeper than %d", name, hbaMaxIncludeDepth)
	}
	if p.readFile == nil {
		return fail("could not read @%s: no file reader", name)
	}
	data, err := p.readFile(path)
	if err != nil {
		return fail("could not read @%s: %v", name, err)
	}
	p.stack = append(p.stack, clean)
	defer func() { p.stack = p.stack[:len(p.stack)-1] }()
	for _, ln := range hbaLines(data) {
		fields, msg := hbaLex(ln.text, true)
		if msg != "" {
			return &HBAError{File: path, Line: ln.num, Msg: msg}
		}
		for _, f := range fields {
			if err := p.addNames(n, path, ln.num, f, isDB); err != nil {
				return err
			}
		}
	}
	return nil
}
