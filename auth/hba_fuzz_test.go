package auth

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseHBA feeds arbitrary auth_hba_file contents to ParseHBA. Every
// @file resolves to the second input, so includes, cycles and nesting are
// fuzzed too. Properties: no panic; every error is an *HBAError (or a join
// of them) within the file's lines; the rules returned match without
// panicking and report lines of records that parsed.
func FuzzParseHBA(f *testing.F) {
	for _, name := range []string{"realistic.conf", "keywords.conf", "errors.conf"} {
		data, err := os.ReadFile(filepath.Join(hbaTestdata, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, []byte("alice, bob\n# comment\n\"x y\""))
	}
	for _, s := range []string{
		`local all all trust`,
		`host all all 10.0.0.1 255.255.0.0 md5`,
		`hostssl "a""b",c @f d,"e f" ::ffff:1.2.3.4/120 cert map="x"`,
		"host all \\\nall all md5\\",
		`host sameuser +g samehost ldap`,
		`local @f @f peer map=`,
		`host all all fe80::1%eth0 ffff:: reject`,
		`local all all scram-sha-256 a=b=c`,
		`host all u 0.0.0.0/0 ldap ldapserver=h "ldapport"=9 ldapbasedn="dc=a,dc=b" ,ldapsearchfilter="uid=$username" # c`,
		`host all all all ldap ldapurl="ldaps://h:1/dc=x??sub?(|(uid=$username)(mail=$username))" ldaptls=1`,
	} {
		f.Add([]byte(s), []byte("@f\n@g"))
	}
	conns := []HBAConn{
		{Local: true, Database: "all", User: "alice"},
		{Local: true, User: "x y", Replication: true},
		{TLS: true, Addr: netip.MustParseAddr("10.0.0.1"), Database: "a\"b", User: "alice"},
		{Addr: netip.MustParseAddr("::ffff:1.2.3.4"), Database: "c", User: "c"},
		{Addr: netip.MustParseAddr("fe80::1%eth0"), Database: "e f", User: "bob", Replication: true},
		{Database: "d", User: "d"},
	}
	f.Fuzz(func(t *testing.T, data, inc []byte) {
		read := func(string) ([]byte, error) { return inc, nil }
		h, err := ParseHBA("/etc/hba.conf", data, read)
		if h == nil {
			t.Fatal("nil *HBA")
		}
		lines := strings.Count(string(data), "\n") + 1
		if err != nil {
			var list []error
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				list = j.Unwrap()
			} else {
				list = []error{err}
			}
			for _, e := range list {
				he, ok := e.(*HBAError)
				if !ok {
					t.Fatalf("error %T %v is not an *HBAError", e, e)
				}
				if he.Line < 1 || he.Msg == "" || he.File == "" {
					t.Fatalf("incomplete error %+v", he)
				}
				if he.File == "/etc/hba.conf" && he.Line > lines {
					t.Fatalf("error line %d beyond %d lines", he.Line, lines)
				}
			}
			if !errors.As(err, new(*HBAError)) {
				t.Fatalf("errors.As failed for %v", err)
			}
		}
		prev := 0
		for i := range h.rules {
			r := &h.rules[i]
			if r.Line <= prev || r.Line > lines {
				t.Fatalf("rule line %d after %d (of %d lines)", r.Line, prev, lines)
			}
			prev = r.Line
			if r.Method.String() == "" || strings.HasPrefix(r.Method.String(), "HBAMethod(") {
				t.Fatalf("rule with method %d", r.Method)
			}
		}
		for _, c := range conns {
			if r, ok := h.Match(c); ok && r.Line < 1 {
				t.Fatalf("matched rule without a line: %+v", r)
			}
		}
	})
}
