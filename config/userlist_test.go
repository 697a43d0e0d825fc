package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseUserlist(t *testing.T) {
	const scram = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5c3RvcmVka2V5c3RvcmVka2V5MTI=:c2VydmVya2V5c2VydmVya2V5c2VydmVya2V5MTI="
	tests := []struct {
		name, in string
		want     map[string]string
	}{
		{"plain md5 scram", `"alice" "secret"
"bob" "md545f2603610af569b6155c45067268c6b"
"carol" "` + scram + `"
`, map[string]string{"alice": "secret", "bob": "md545f2603610af569b6155c45067268c6b", "carol": scram}},
		{"comments blanks rest of line", "; comment \"x\" \"y\"\n\n   \n  \"a\" \"1\" anything \"else\" here\r\n\t\"b\"\t\"2\"\n", map[string]string{"a": "1", "b": "2"}},
		{"doubled quotes", `"o""brien" "pa""ss"
"q" """"`, map[string]string{`o"brien`: `pa"ss`, "q": `"`}},
		{"empty secret and spaces", `"u s" ""`, map[string]string{"u s": ""}},
		{"later line wins", "\"a\" \"1\"\n\"a\" \"2\"\n", map[string]string{"a": "2"}},
		{"separator is anything", `"a","x y"`, map[string]string{"a": "x y"}},
		{"empty file", "", map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUserlist("userlist.txt", []byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseUserlistErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\"a\" \"1\"\nbob secret\n", `userlist.txt:2: broken auth file: expected "user" "secret"`},
		{`"a" secret`, `userlist.txt:1: broken auth file: expected a quoted secret after user "a"`},
		{`"a" "unterminated`, `userlist.txt:1: broken auth file: expected a quoted secret after user "a"`},
		{`"unterminated`, `userlist.txt:1: broken auth file: expected "user" "secret"`},
		{`"" "x"`, `userlist.txt:1: empty user name in auth file`},
		{`"` + strings.Repeat("u", 128) + `" "x"`, `userlist.txt:1: user name too long in auth file (max 127 bytes)`},
		{`"u" "` + strings.Repeat("p", 65536) + `"`, `userlist.txt:1: password too long in auth file for user "u" (max 65535 bytes)`},
	}
	for _, tt := range tests {
		_, err := ParseUserlist("userlist.txt", []byte(tt.in))
		var pe *ParseError
		if err == nil || !errors.As(err, &pe) || err.Error() != tt.want {
			t.Errorf("%.40q: err = %v, want %s", tt.in, err, tt.want)
		}
	}
	// Limits are inclusive.
	if _, err := ParseUserlist("u", []byte(`"`+strings.Repeat("u", 127)+`" "`+strings.Repeat("p", 65535)+`"`)); err != nil {
		t.Errorf("at the limits: %v", err)
	}
}

func TestLoadUserlist(t *testing.T) {
	users, err := LoadUserlist(filepath.Join("..", "testdata", "config", "userlist.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pgbouncer_admin": "admin-plain-password",
		"web":             "md5d8bb5e2a5e4d4c4b1f2a0e6c3b7d9a1f",
		"batch":           "SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0$dGVzdHN0b3JlZGtleXRlc3RzdG9yZWRrZXk=:dGVzdHNlcnZlcmtleXRlc3RzZXJ2ZXJrZXk=",
		"reporting":       `pa"ss "quoted"`,
		"o'brien":         "x",
	}
	if !reflect.DeepEqual(users, want) {
		t.Errorf("got %q\nwant %q", users, want)
	}
	if _, err := LoadUserlist("no/such/userlist.txt"); err == nil || !strings.Contains(err.Error(), "cannot load auth_file") {
		t.Errorf("missing file: %v", err)
	}
}
