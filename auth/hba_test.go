package auth

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The golden files are regenerated with `go test ./auth -run TestHBAGolden
// -update`. The flag is registered only if no other test file of the
// package has registered it first (package-level vars run before init).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	b, _ := g.Get().(bool)
	return b
}

const hbaTestdata = "../testdata/hba"

// mapFS returns a readFile over an in-memory set of files.
func mapFS(files map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		s, ok := files[name]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return []byte(s), nil
	}
}

func mustParseHBA(t *testing.T, conf string, files map[string]string) *HBA {
	t.Helper()
	h, err := ParseHBA("/etc/pgbouncer/hba.conf", []byte(conf), mapFS(files))
	if err != nil {
		t.Fatalf("ParseHBA: %v", err)
	}
	return h
}

func tcp(addr string, tls bool, db, user string) HBAConn {
	return HBAConn{TLS: tls, Addr: netip.MustParseAddr(addr), Database: db, User: user}
}

// matchString renders a match as the tables and golden files expect it.
func matchString(r HBARule, ok bool) string {
	if !ok {
		return "no match"
	}
	s := fmt.Sprintf("line %d %s", r.Line, r.Method)
	for _, k := range slices.Sorted(maps.Keys(r.Options)) {
		s += " " + k + "=" + r.Options[k]
	}
	return s
}

func TestHBAMethodString(t *testing.T) {
	want := map[HBAMethod]string{
		HBATrust: "trust", HBAReject: "reject", HBAMD5: "md5", HBAPassword: "password",
		HBASCRAM: "scram-sha-256", HBACert: "cert", HBAPeer: "peer", 0: "HBAMethod(0)", 99: "HBAMethod(99)",
	}
	for m, s := range want {
		if got := m.String(); got != s {
			t.Errorf("HBAMethod(%d).String() = %q, want %q", int(m), got, s)
		}
	}
}

func TestHBARealistic(t *testing.T) {
	h, err := LoadHBA(filepath.Join(hbaTestdata, "realistic.conf"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		conn HBAConn
		want string
	}{
		{"console over socket", HBAConn{Local: true, Database: "pgbouncer", User: "pgbouncer"}, "line 6 peer"},
		{"admin from @file", HBAConn{Local: true, Database: "payments", User: "bob"}, "line 7 peer map=ops"},
		{"admin after comment in @file", HBAConn{Local: true, Database: "payments", User: "carol"}, "line 7 peer map=ops"},
		{"other local user", HBAConn{Local: true, Database: "payments", User: "dave"}, "line 8 scram-sha-256"},
		{"local replication matches no all", HBAConn{Local: true, User: "replicator", Replication: true}, "no match"},
		{"replication with tls", HBAConn{TLS: true, Addr: netip.MustParseAddr("10.20.1.1"), User: "replicator", Replication: true}, "line 11 cert map=standby"},
		{"replication database ignored", HBAConn{TLS: true, Addr: netip.MustParseAddr("10.20.1.1"), Database: "payments", User: "replicator", Replication: true}, "line 11 cert map=standby"},
		{"replication without tls", HBAConn{Addr: netip.MustParseAddr("10.20.1.1"), User: "replicator", Replication: true}, "line 12 reject"},
		{"replication from elsewhere", HBAConn{TLS: true, Addr: netip.MustParseAddr("10.30.1.1"), User: "replicator", Replication: true}, "line 12 reject"},
		{"database named replication is not the keyword", tcp("10.20.1.1", true, "replication", "replicator"), "no match"},
		{"user named all", tcp("10.10.3.4", true, "payments", "all"), "line 15 reject"},
		{"app over tls", tcp("10.10.3.4", true, "payments", "payments_app"), "line 18 scram-sha-256"},
		{"app second database", tcp("10.10.3.4", true, "ledger", "ledger_app"), "line 18 scram-sha-256"},
		{"nested @file quoted name", tcp("10.10.3.4", true, "ledger", "batch job"), "line 18 scram-sha-256"},
		{"nested @file", tcp("10.10.3.4", true, "ledger", "etl"), "line 18 scram-sha-256"},
		{"app without tls", tcp("10.10.3.4", false, "payments", "payments_app"), "line 19 reject"},
		{"app other database", tcp("10.10.3.4", true, "reports", "payments_app"), "no match"},
		{"mask column", tcp("192.168.5.17", false, "reports", "reporter"), "line 22 md5"},
		{"host matches tls too", tcp("192.168.5.17", true, "reports", "reporter"), "line 22 md5"},
		{"mask column other host", tcp("192.168.5.18", false, "reports", "reporter"), "no match"},
		{"sameuser", tcp("10.1.1.1", false, "erin", "erin"), "line 25 scram-sha-256"},
		{"sameuser mapped client", tcp("::ffff:10.1.1.1", false, "erin", "erin"), "line 25 scram-sha-256"},
		{"sameuser other db", tcp("10.1.1.1", false, "frank", "erin"), "no match"},
		{"continued line", tcp("2001:db8:ab::5", true, "reports", "Mixed Case"), "line 28 scram-sha-256"},
		{"continued line first db", tcp("2001:db8:ab::5", true, "payments", "analyst"), "line 28 scram-sha-256"},
		{"names are case sensitive", tcp("2001:db8:ab::5", true, "reports", "mixed case"), "no match"},
		{"hostssl without tls", tcp("2001:db8:ab::5", false, "reports", "analyst"), "no match"},
		{"ipv6 outside prefix", tcp("2001:db8:ac::5", true, "reports", "analyst"), "no match"},
		{"link local with zone", tcp("fe80::1%eth0", false, "payments", "monitor"), "line 33 reject"},
		{"loopback v4", tcp("127.0.0.1", false, "payments", "monitor"), "line 36 password"},
		{"loopback mapped", tcp("::ffff:127.0.0.1", false, "payments", "monitor"), "line 36 password"},
		{"loopback v6", tcp("::1", false, "payments", "monitor"), "line 37 password"},
		{"tcp without address", HBAConn{Database: "payments", User: "all"}, "line 15 reject"},
		{"tcp without address, no all rule", HBAConn{Database: "payments", User: "monitor"}, "no match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := matchString(h.Match(tt.conn)); got != tt.want {
				t.Errorf("Match(%+v) = %s, want %s", tt.conn, got, tt.want)
			}
		})
	}
}

func TestHBAMatchBasics(t *testing.T) {
	const conf = `
local all all trust
host all all 0.0.0.0/0 md5
host all all ::/0 password
`
	h := mustParseHBA(t, conf, nil)
	for _, tt := range []struct {
		conn HBAConn
		want string
	}{
		{HBAConn{Local: true, Database: "d", User: "u"}, "line 2 trust"},
		{tcp("203.0.113.9", false, "d", "u"), "line 3 md5"},
		{tcp("::ffff:203.0.113.9", true, "d", "u"), "line 3 md5"},
		{tcp("2001:db8::1", false, "d", "u"), "line 4 password"},
		{HBAConn{Database: "d", User: "u"}, "no match"},
	} {
		if got := matchString(h.Match(tt.conn)); got != tt.want {
			t.Errorf("Match(%+v) = %s, want %s", tt.conn, got, tt.want)
		}
	}
	var nilHBA *HBA
	if _, ok := nilHBA.Match(HBAConn{Local: true}); ok {
		t.Error("nil HBA matched")
	}
	empty := mustParseHBA(t, "# nothing\n\n   \n", nil)
	if _, ok := empty.Match(HBAConn{Local: true, Database: "d", User: "u"}); ok {
		t.Error("empty HBA matched")
	}
}

func TestHBASyntax(t *testing.T) {
	tests := []struct {
		name string
		conf string
		conn HBAConn
		want string
	}{
		{"quoted keyword is a name", `local "all" all trust`, HBAConn{Local: true, Database: "all", User: "u"}, "line 1 trust"},
		{"quoted keyword does not match others", `local "all" all trust`, HBAConn{Local: true, Database: "d", User: "u"}, "no match"},
		{"quoted sameuser", `local "sameuser" all trust`, HBAConn{Local: true, Database: "u", User: "u"}, "no match"},
		{"doubled quote", `local all "a""b" trust`, HBAConn{Local: true, Database: "d", User: `a"b`}, "line 1 trust"},
		{"partly quoted word", `local all ab"c d"e trust`, HBAConn{Local: true, Database: "d", User: "abc de"}, "line 1 trust"},
		{"quoted comma and hash", `local all "a,b#c" trust`, HBAConn{Local: true, Database: "d", User: "a,b#c"}, "line 1 trust"},
		{"quoted @ is a name", `local all "@x" trust`, HBAConn{Local: true, Database: "d", User: "@x"}, "line 1 trust"},
		{"empty quoted name", `local all "" trust`, HBAConn{Local: true, Database: "d", User: ""}, "line 1 trust"},
		{"blanks around commas", "local a , b ,c all trust", HBAConn{Local: true, Database: "b", User: "u"}, "line 1 trust"},
		{"tabs and crlf", "local\tall\tall\ttrust\r\n", HBAConn{Local: true, Database: "d", User: "u"}, "line 1 trust"},
		{"comment after record", "local all all trust# comment", HBAConn{Local: true, Database: "d", User: "u"}, "line 1 trust"},
		{"keyword in list", "local x,all all md5", HBAConn{Local: true, Database: "d", User: "u"}, "line 1 md5"},
		{"replication in list", "host replication,all all all md5", tcp("10.0.0.1", false, "d", "u"), "line 1 md5"},
		{"replication in list, replication conn", "host replication,all all all md5", HBAConn{Addr: netip.MustParseAddr("10.0.0.1"), User: "u", Replication: true}, "line 1 md5"},
		{"sameuser in user column is a name", "local all sameuser trust", HBAConn{Local: true, Database: "sameuser", User: "sameuser"}, "line 1 trust"},
		{"continuation numbering", "local all \\\n  bob \\\n trust\nlocal all all md5", HBAConn{Local: true, Database: "d", User: "bob"}, "line 1 trust"},
		{"line after continuation", "local all \\\n  bob \\\n trust\nlocal all all md5", HBAConn{Local: true, Database: "d", User: "x"}, "line 4 md5"},
		{"continuation joins without blank", "local all bo\\\nb trust", HBAConn{Local: true, Database: "d", User: "bob"}, "line 1 trust"},
		{"continuation inside comment", "# note \\\nlocal all all trust\nlocal all all md5", HBAConn{Local: true, Database: "d", User: "u"}, "line 3 md5"},
		{"backslash at end of file", "local all all trust\\", HBAConn{Local: true, Database: "d", User: "u"}, "line 1 trust"},
		{"prefix host bits masked", "host all all 10.1.2.3/8 md5", tcp("10.200.0.1", false, "d", "u"), "line 1 md5"},
		{"mask host bits masked", "host all all 10.1.2.3 255.0.0.0 md5", tcp("10.200.0.1", false, "d", "u"), "line 1 md5"},
		{"ipv6 mask column", "host all all 2001:db8:: ffff:ffff:: md5", tcp("2001:db8:1::1", false, "d", "u"), "line 1 md5"},
		{"zero mask", "host all all 0.0.0.0 0.0.0.0 md5", tcp("192.0.2.1", false, "d", "u"), "line 1 md5"},
		{"ipv4 rule no ipv6 client", "host all all 0.0.0.0/0 md5", tcp("2001:db8::1", false, "d", "u"), "no match"},
		{"ipv6 rule no ipv4 client", "host all all ::/0 md5", tcp("192.0.2.1", false, "d", "u"), "no match"},
		{"mapped rule is ipv4", "host all all ::ffff:10.0.0.0/104 md5", tcp("10.9.9.9", false, "d", "u"), "line 1 md5"},
		{"mapped rule, mapped client", "host all all ::ffff:10.0.0.0/104 md5", tcp("::ffff:10.9.9.9", false, "d", "u"), "line 1 md5"},
		{"map option", "hostssl all all all cert map=m1", tcp("10.0.0.1", true, "d", "u"), "line 1 cert map=m1"},
		{"quoted option value", `local all all peer map="my map"`, HBAConn{Local: true, Database: "d", User: "u"}, "line 1 peer map=my map"},
		{"last option wins", `local all all peer map=a map=b`, HBAConn{Local: true, Database: "d", User: "u"}, "line 1 peer map=b"},
		{"peer on host loads", "host all all all peer", tcp("10.0.0.1", false, "d", "u"), "line 1 peer"},
		{"cert on host loads", "host all all all cert", tcp("10.0.0.1", false, "d", "u"), "line 1 cert"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mustParseHBA(t, tt.conf, nil)
			if got := matchString(h.Match(tt.conn)); got != tt.want {
				t.Errorf("Match(%+v) = %s, want %s", tt.conn, got, tt.want)
			}
		})
	}
}

func TestHBAIncludes(t *testing.T) {
	files := map[string]string{
		"/etc/pgbouncer/dbs":          "# databases\nd1, d2\n\n\"d 3\" @sub/more\n",
		"/etc/pgbouncer/sub/more":     "d4,,d5,\n@deeper\n",
		"/etc/pgbouncer/sub/deeper":   "d6",
		"/etc/pgbouncer/users":        "u1\nall\n",
		"/abs/users":                  "u9",
		"/etc/pgbouncer/kw":           "sameuser",
		"/etc/pgbouncer/quoted":       `"all"`,
		"/etc/pgbouncer/replication":  "replication",
		"/etc/pgbouncer/empty":        "",
		"/etc/pgbouncer/with a space": "d7",
	}
	const conf = `
local @dbs all trust
local d0 @users md5
local d8 @/abs/users password
local @kw x scram-sha-256
local d9 @quoted trust
local @replication all trust
local @empty all trust
local @"with a space" all trust
`
	h := mustParseHBA(t, conf, files)
	for _, tt := range []struct {
		conn HBAConn
		want string
	}{
		{HBAConn{Local: true, Database: "d1", User: "u"}, "line 2 trust"},
		{HBAConn{Local: true, Database: "d 3", User: "u"}, "line 2 trust"},
		{HBAConn{Local: true, Database: "d5", User: "u"}, "line 2 trust"},
		{HBAConn{Local: true, Database: "d6", User: "u"}, "line 2 trust"},
		{HBAConn{Local: true, Database: "d0", User: "anyone"}, "line 3 md5"}, // all inside the file is the keyword
		{HBAConn{Local: true, Database: "d8", User: "u9"}, "line 4 password"},
		{HBAConn{Local: true, Database: "x", User: "x"}, "line 5 scram-sha-256"},
		{HBAConn{Local: true, Database: "d9", User: "all"}, "line 6 trust"},
		{HBAConn{Local: true, Database: "d9", User: "u"}, "no match"},
		{HBAConn{Local: true, User: "u", Replication: true}, "line 7 trust"},
		{HBAConn{Local: true, Database: "d7", User: "u"}, "line 9 trust"},
		{HBAConn{Local: true, Database: "zz", User: "u"}, "no match"},
	} {
		if got := matchString(h.Match(tt.conn)); got != tt.want {
			t.Errorf("Match(%+v) = %s, want %s", tt.conn, got, tt.want)
		}
	}
}

func TestHBAErrors(t *testing.T) {
	files := map[string]string{
		"/etc/pgbouncer/self":      "a\n@self\n",
		"/etc/pgbouncer/a":         "@b",
		"/etc/pgbouncer/b":         "@a",
		"/etc/pgbouncer/groups":    "alice\n\n+admins\n",
		"/etc/pgbouncer/badquote":  "x\n\"y\n",
		"/etc/pgbouncer/sub/inner": "@../self",
	}
	// A chain deeper than the nesting limit: f0 -> f1 -> ... -> f12.
	for i := range 12 {
		files[fmt.Sprintf("/etc/pgbouncer/f%d", i)] = fmt.Sprintf("@f%d", i+1)
	}
	files["/etc/pgbouncer/f12"] = "x"
	const main = "/etc/pgbouncer/hba.conf"

	tests := []struct {
		name string
		conf string
		file string // where the error is reported; main when empty
		line int
		msg  string
	}{
		{"unterminated quote", "\n\nhost \"all all 10.0.0.0/8 md5", "", 3, "unterminated quoted string"},
		{"empty list item", "local a,,b all trust", "", 1, "empty item in comma-separated list"},
		{"blank item", "local all a, ,b trust", "", 1, "empty item in comma-separated list"},
		{"leading comma", ",local all all trust", "", 1, "empty item in comma-separated list"},
		{"blank before comma joins the list", "local all alice ,bob", "", 1, "end-of-line before authentication method"},
		{"trailing comma", "local all alice,", "", 1, "comma at end of line"},
		{"trailing comma before comment", "local all alice, # x", "", 1, "comma at end of line"},
		{"type list", "local,host all all trust", "", 1, "multiple values specified for connection type"},
		{"bad type", "hots all all all md5", "", 1, `invalid connection type "hots"`},
		{"quoted type", `"local" all all trust`, "", 1, `invalid connection type "local"`},
		{"gssenc", "hostgssenc all all all md5", "", 1, `connection type "hostgssenc" is not supported`},
		{"nogssenc", "hostnogssenc all all all md5", "", 1, `connection type "hostnogssenc" is not supported`},
		{"no database", "local", "", 1, "end-of-line before database specification"},
		{"no user", "local all # c", "", 1, "end-of-line before user specification"},
		{"no address", "host all all", "", 1, "end-of-line before IP address specification"},
		{"no method local", "local all all", "", 1, "end-of-line before authentication method"},
		{"no method host", "host all all 10.0.0.0/8", "", 1, "end-of-line before authentication method"},
		{"method list", "local all all md5,trust", "", 1, "multiple values specified for authentication method"},
		{"ldap without a mode", "host all all all ldap ldapserver=x", "", 1, `authentication method "ldap" requires argument "ldapbasedn", "ldapprefix", or "ldapsuffix" to be set`},
		{"ldap bad option", "host all all all ldap ldapbasedn=x ldapfoo=1", "", 1, `invalid LDAP option: "ldapfoo"`},
		{"pam", "local all all pam", "", 1, `unsupported auth method "pam"`},
		{"gss", "host all all all gss", "", 1, `unsupported auth method "gss"`},
		{"ident", "host all all all ident", "", 1, `unsupported auth method "ident"`},
		{"any", "local all all any", "", 1, `unsupported auth method "any"`},
		{"bad method", "local all all md6", "", 1, `invalid auth method "md6"`},
		{"method is case sensitive", "local all all MD5", "", 1, `invalid auth method "MD5"`},
		{"option without =", "local all all peer map", "", 1, `authentication option "map" not in name=value format`},
		{"option without name", "local all all peer =x", "", 1, `authentication option "=x" not in name=value format`},
		{"unsupported option", "hostssl all all all scram-sha-256 clientcert=verify-full", "", 1, `unsupported authentication option "clientcert"`},
		{"map for md5", "local all all md5 map=x", "", 1, "authentication option map is only valid for methods cert and peer"},
		{"empty map", "local all all peer map=", "", 1, `missing value for authentication option "map"`},
		{"option list", "local all all peer map=a,b", "", 1, `multiple values specified for authentication option "map=a"`},
		{"address list", "host all all 10.0.0.0/8,10.1.0.0/16 md5", "", 1, "multiple values specified for host address"},
		{"samehost", "host all all samehost md5", "", 1, `address "samehost" is not supported`},
		{"samenet", "hostssl all all samenet md5", "", 1, `address "samenet" is not supported`},
		{"hostname", "host all all db.example.com md5", "", 1, `invalid IP address "db.example.com" (host names are not supported)`},
		{"domain suffix", "host all all .example.com md5", "", 1, `invalid IP address ".example.com"`},
		{"quoted all address", `host all all "all" md5`, "", 1, `invalid IP address "all" (host names are not supported)`},
		{"prefix too long v4", "host all all 10.0.0.0/33 md5", "", 1, `invalid IP address/prefix "10.0.0.0/33"`},
		{"prefix too long v6", "host all all ::1/129 md5", "", 1, `invalid IP address/prefix "::1/129"`},
		{"prefix not a number", "host all all 10.0.0.0/x md5", "", 1, `invalid IP address/prefix "10.0.0.0/x"`},
		{"prefix with zone", "host all all fe80::%eth0/64 md5", "", 1, `invalid IP address/prefix "fe80::%eth0/64"`},
		{"address with zone", "host all all fe80::1%eth0 ffff:: md5", "", 1, `invalid IP address "fe80::1%eth0" (zones are not supported)`},
		{"no netmask", "host all all 10.0.0.1", "", 1, "end-of-line before netmask specification"},
		{"method where netmask expected", "host all all 10.0.0.1 md5", "", 1, `invalid IP mask "md5" (an address without /prefix needs a netmask column)`},
		{"netmask list", "host all all 10.0.0.1 255.0.0.0,255.255.0.0 md5", "", 1, "multiple values specified for netmask"},
		{"netmask family", "host all all 10.0.0.1 ffff:: md5", "", 1, `IP address "10.0.0.1" and mask "ffff::" are of different address families`},
		{"netmask zone", "host all all fe80::1 ffff::%eth0 md5", "", 1, `invalid IP mask "ffff::%eth0"`},
		{"netmask not contiguous", "host all all 10.0.0.1 255.0.255.0 md5", "", 1, `invalid IP mask "255.0.255.0" (not a contiguous netmask)`},
		{"samerole", "local samerole all md5", "", 1, "samerole is not supported"},
		{"samegroup", "local samegroup all md5", "", 1, "samegroup is not supported"},
		{"group user", "local all +admins md5", "", 1, `group names are not supported: "+admins"`},
		{"group in list", "local all alice,+admins md5", "", 1, `group names are not supported: "+admins"`},
		{"group in database column", "local +x all md5", "", 1, `group names are not supported: "+x"`},
		{"regex user", `local all /^app_ md5`, "", 1, `regular expressions are not supported: "/^app_"`},
		{"regex database", `local /^db all md5`, "", 1, `regular expressions are not supported: "/^db"`},
		{"bare @", "local @ all md5", "", 1, "missing file name after @"},
		{"missing @file", "\nlocal @nope all md5", "", 2, `could not read @nope: open /etc/pgbouncer/nope: file does not exist`},
		{"@file includes itself", "local @self all md5", "/etc/pgbouncer/self", 2, "@self: circular @file reference"},
		{"@file cycle", "local all @a md5", "/etc/pgbouncer/b", 1, "@a: circular @file reference"},
		{"@file includes the hba file", "local all @hba.conf md5", "", 1, "@hba.conf: circular @file reference"},
		{"@file relative cycle", "local all @sub/inner md5", "/etc/pgbouncer/self", 2, "@self: circular @file reference"},
		{"@file too deep", "local all @f0 md5", "/etc/pgbouncer/f9", 1, "@f10: @file nesting deeper than 10"},
		{"group inside @file", "\n\n\nlocal all @groups md5", "/etc/pgbouncer/groups", 3, `group names are not supported: "+admins"`},
		{"bad quote inside @file", "local @badquote all md5", "/etc/pgbouncer/badquote", 2, "unterminated quoted string"},
		{"continued record reports first line", "local all all \\\n\\\n  md6\n", "", 1, `invalid auth method "md6"`},
		{"line after continued record", "local all all \\\n  md5\nlocal all all md6", "", 3, `invalid auth method "md6"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHBA(main, []byte(tt.conf), mapFS(files))
			var he *HBAError
			if !errors.As(err, &he) {
				t.Fatalf("ParseHBA(%q) = %v, want *HBAError", tt.conf, err)
			}
			file := tt.file
			if file == "" {
				file = main
			}
			if he.File != file || he.Line != tt.line || !strings.Contains(he.Msg, tt.msg) {
				t.Errorf("ParseHBA(%q) = %s, want %s:%d: …%s…", tt.conf, err, file, tt.line, tt.msg)
			}
			if want := fmt.Sprintf("%s:%d: %s", he.File, he.Line, he.Msg); he.Error() != want {
				t.Errorf("Error() = %q, want %q", he.Error(), want)
			}
		})
	}
}

func TestHBAErrorNoReader(t *testing.T) {
	_, err := ParseHBA("hba.conf", []byte("local @dbs all md5"), nil)
	if err == nil || err.Error() != "hba.conf:1: could not read @dbs: no file reader" {
		t.Fatalf("err = %v", err)
	}
}

// Every bad line is reported, and the good ones are still returned, so a
// caller may choose PgBouncer's skip-the-line behaviour.
func TestHBAMultipleErrors(t *testing.T) {
	const conf = "local all all md6\nlocal all alice trust\nhost all all samehost md5\nlocal all all reject\n"
	h, err := ParseHBA("hba.conf", []byte(conf), nil)
	if err == nil {
		t.Fatal("no error")
	}
	want := "hba.conf:1: invalid auth method \"md6\"\nhba.conf:3: address \"samehost\" is not supported (PgBouncer supports only all and IP addresses)"
	if err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	var he *HBAError
	if !errors.As(err, &he) || he.Line != 1 {
		t.Errorf("errors.As first = %+v", he)
	}
	for _, tt := range []struct{ user, want string }{{"alice", "line 2 trust"}, {"bob", "line 4 reject"}} {
		if got := matchString(h.Match(HBAConn{Local: true, Database: "d", User: tt.user})); got != tt.want {
			t.Errorf("user %s: %s, want %s", tt.user, got, tt.want)
		}
	}
}

func TestLoadHBAMissing(t *testing.T) {
	_, err := LoadHBA(filepath.Join(t.TempDir(), "nope.conf"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

// TestHBAGolden evaluates testdata/hba/NAME.conns against NAME.conf and
// compares the parsed rules and the matches with NAME.golden.
//
// A .conns line is `local DB USER [repl]` or `host ADDR DB USER [tls]
// [repl]`; "-" stands for an empty name.
func TestHBAGolden(t *testing.T) {
	confs, err := filepath.Glob(filepath.Join(hbaTestdata, "*.conf"))
	if err != nil || len(confs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, conf := range confs {
		base := strings.TrimSuffix(conf, ".conf")
		t.Run(filepath.Base(base), func(t *testing.T) {
			got := hbaGoldenOutput(t, conf, base+".conns")
			golden := base + ".golden"
			if updateGolden() {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs (run with -update to accept):\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

func hbaGoldenOutput(t *testing.T, conf, conns string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s evaluated with %s; regenerate with go test ./auth -run TestHBAGolden -update\n", filepath.Base(conf), filepath.Base(conns))
	h, err := LoadHBA(conf)
	if err != nil {
		b.WriteString("\n# errors\n")
		for _, line := range strings.Split(err.Error(), "\n") {
			b.WriteString(filepath.ToSlash(strings.TrimPrefix(line, hbaTestdata+string(filepath.Separator))) + "\n")
		}
	}
	b.WriteString("\n# rules\n")
	for i := range h.rules {
		b.WriteString(describeHBARule(&h.rules[i]) + "\n")
	}
	b.WriteString("\n# matches\n")
	data, err := os.ReadFile(conns)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		c, ok := parseGoldenConn(f)
		if !ok {
			t.Fatalf("%s:%d: bad connection %q", conns, i+1, line)
		}
		fmt.Fprintf(&b, "%-60s => %s\n", strings.Join(f, " "), matchString(h.Match(c)))
	}
	return b.String()
}

func parseGoldenConn(f []string) (HBAConn, bool) {
	var c HBAConn
	name := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	switch {
	case f[0] == "local" && len(f) >= 3:
		c.Local = true
		f = f[1:]
	case f[0] == "host" && len(f) >= 4:
		a, err := netip.ParseAddr(f[1])
		if err != nil {
			return c, false
		}
		c.Addr = a
		f = f[2:]
	default:
		return c, false
	}
	c.Database, c.User = name(f[0]), name(f[1])
	for _, flag := range f[2:] {
		switch flag {
		case "tls":
			c.TLS = true
		case "repl":
			c.Replication = true
		default:
			return c, false
		}
	}
	return c, true
}

// describeHBARule renders a parsed rule in a normalised form for the golden
// files, so that a change in parsing shows up as a diff.
func describeHBARule(r *hbaRule) string {
	typ := map[hbaConnType]string{hbaLocal: "local", hbaHost: "host", hbaHostSSL: "hostssl", hbaHostNoSSL: "hostnossl"}[r.conn]
	addr := ""
	switch {
	case r.conn == hbaLocal:
	case r.anyAddr:
		addr = " addr=all"
	default:
		addr = " addr=" + r.prefix.String()
	}
	opts := ""
	for _, k := range slices.Sorted(maps.Keys(r.Options)) {
		opts += fmt.Sprintf(" %s=%q", k, r.Options[k])
	}
	return fmt.Sprintf("line %d: %s db=%s user=%s%s %s%s", r.Line, typ, describeNames(&r.db), describeNames(&r.user), addr, r.Method, opts)
}

func describeNames(n *hbaNames) string {
	var parts []string
	if n.all {
		parts = append(parts, "ALL")
	}
	if n.sameUser {
		parts = append(parts, "SAMEUSER")
	}
	if n.replication {
		parts = append(parts, "REPLICATION")
	}
	for _, s := range slices.Sorted(maps.Keys(n.names)) {
		parts = append(parts, fmt.Sprintf("%q", s))
	}
	return "[" + strings.Join(parts, ",") + "]"
}
