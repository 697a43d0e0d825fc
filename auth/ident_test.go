package auth

import (
	"strings"
	"testing"
)

func TestParseIdent(t *testing.T) {
	data := strings.Join([]string{
		"# MAPNAME SYSTEM-USERNAME PG-USERNAME",
		"test   pgbouncer.acme.org someuser",
		"test   pgbouncer.acme.org anotheruser  # comment",
		`test2  "bouncer"          all`,
		`test2  pgbouncer.acme.org "anotheruser"`,
		`test3  sys                "all"`,
		"",
	}, "\n")
	id, err := ParseIdent("ident.conf", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	is := func(want string) func(string) bool { return func(s string) bool { return s == want } }
	for _, tc := range []struct {
		m, system, user string
		ok              bool
	}{
		{"test", "pgbouncer.acme.org", "someuser", true},
		{"test", "pgbouncer.acme.org", "anotheruser", true},
		{"test", "pgbouncer.acme.org", "bouncer", false},
		{"test", "bouncer", "someuser", false},
		{"test2", "bouncer", "anyone", true},
		{"test2", "pgbouncer.acme.org", "someuser", false},
		{"test2", "pgbouncer.acme.org", "anotheruser", true},
		// A quoted "all" is the user named all, not the keyword.
		{"test3", "sys", "all", true},
		{"test3", "sys", "someone", false},
	} {
		m, ok := id.Map(tc.m)
		if !ok {
			t.Fatalf("map %s missing", tc.m)
		}
		if _, got := m.Allows(is(tc.system), tc.user); got != tc.ok {
			t.Errorf("%s: %s as %s = %v, want %v", tc.m, tc.system, tc.user, got, tc.ok)
		}
	}
	if _, ok := id.Map("nope"); ok {
		t.Error("unknown map found")
	}
}

func TestParseIdentErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"m sys", "needs MAPNAME SYSTEM-USERNAME PG-USERNAME"},
		{"m sys user extra", "unsupported parameters"},
		{"m a,b user", "comma-separated lists"},
		{`"m" sys user`, "map names are not quoted"},
		{`m /^(.*)$ \1`, "regular expressions are not supported"},
		{"m sys +group", "group names are not supported"},
		{`m sys "unterminated`, "unterminated quoted string"},
	} {
		_, err := ParseIdent("ident.conf", []byte("good a b\n"+tc.line+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ident.conf:2:") {
			t.Errorf("%q: error %v, want ident.conf:2: …%s", tc.line, err, tc.want)
		}
	}
}

func TestHBAResolveMaps(t *testing.T) {
	h, err := ParseHBA("hba.conf", []byte("local all all peer map=m\nhostssl all all all cert map=gone\nlocal all all trust\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseIdent("ident.conf", []byte("m sys user\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = h.ResolveMaps("hba.conf", id)
	if err == nil || err.Error() != "hba.conf:2: Ident map gone is not found in ident config file" {
		t.Fatalf("ResolveMaps: %v", err)
	}
	r, ok := h.Match(HBAConn{Local: true, Database: "d", User: "user"})
	if !ok || r.Ident == nil || r.Ident.Name != "m" {
		t.Fatalf("rule %+v: no map attached", r)
	}
	// Without an auth_ident_file every map= is unknown.
	if err := h.ResolveMaps("hba.conf", nil); err == nil {
		t.Fatal("map= without auth_ident_file accepted")
	}
}

// FuzzParseIdent feeds arbitrary auth_ident_file contents to ParseIdent.
// Properties: no panic; every error names the file; a map that parsed
// answers Allows without panicking, and only with a mapping of its own.
func FuzzParseIdent(f *testing.F) {
	for _, s := range []string{
		"test pgbouncer.acme.org someuser\ntest2 \"bouncer\" all\n",
		"m /^(.*)$ \\1\n",
		"m a,b c\n\"q\" x y\n",
		"m sys \"un\\\nterminated\n",
		"# only a comment\n\n",
	} {
		f.Add([]byte(s), "someuser")
	}
	f.Fuzz(func(t *testing.T, data []byte, user string) {
		id, err := ParseIdent("ident.conf", data)
		if err != nil && !strings.Contains(err.Error(), "ident.conf:") {
			t.Fatalf("error without the file name: %v", err)
		}
		for name, m := range id.maps {
			if m.Name != name || len(m.Mappings) == 0 {
				t.Fatalf("map %q: %+v", name, m)
			}
			mp, ok := m.Allows(func(string) bool { return true }, user)
			if ok && !mp.AllUsers && mp.User != user {
				t.Fatalf("map %q allowed %q through %+v", name, user, mp)
			}
		}
	})
}
