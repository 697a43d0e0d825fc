package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command line is PgBouncer's; refusals say why.
func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.ini")
	if err := os.WriteFile(bad, []byte("[pgbouncer]\nlisten_port = 6432\nno_such_setting = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.ini")
	if err := os.WriteFile(good, []byte("[databases]\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = 0\nunix_socket_dir =\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"-d", "x.ini"}, 1, "cannot load config file"},
		{[]string{"-u", "no_such_user_pgt", good}, 1, "FATAL could not find user 'no_such_user_pgt' to switch to"},
		{[]string{"--user=no_such_user_pgt", good}, 1, "FATAL could not find user 'no_such_user_pgt' to switch to"},
		{[]string{}, 1, "Usage:"},
		{[]string{"a.ini", "b.ini"}, 1, "Usage:"},
		{[]string{filepath.Join(dir, "missing.ini")}, 1, "cannot load config file"},
		{[]string{bad}, 1, "bad.ini:3"},
		{[]string{"--dev-backend=nohostport"}, 1, "HOST:PORT"},
		{[]string{"--no-such-flag"}, 1, "flag provided but not defined"},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		if code := run(c.args, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
}

func TestExpandVerbose(t *testing.T) {
	n := 0
	rest := expandVerbose([]string{"-vvv", "-q", "-v", "--verbose", "x.ini"}, &n)
	if n != 5 || strings.Join(rest, " ") != "-q x.ini" {
		t.Fatalf("verbosity %d, rest %v", n, rest)
	}
}

func TestDevConfigIsValid(t *testing.T) {
	cfg, err := devConfig("127.0.0.1:15432")
	if err != nil {
		t.Fatal(err)
	}
	db, ok := cfg.LookupDatabase("anything")
	if !ok || db.Host != "127.0.0.1" || db.Port != 15432 || db.User != "postgres" {
		t.Fatalf("fallback database: %+v %v", db, ok)
	}
	if cfg.Settings.ListenPort != 6432 || cfg.Settings.AuthType != "any" || len(cfg.Warnings) != 0 {
		t.Fatalf("settings: port %d auth %s warnings %v", cfg.Settings.ListenPort, cfg.Settings.AuthType, cfg.Warnings)
	}
}

// --version's first line is what SHOW VERSION reports (versionLine), as
// in PgBouncer: its suite compares the two.
func TestVersionMatchesShowVersion(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	code := run([]string{"--version"}, &bytes.Buffer{})
	os.Stdout = saved
	w.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if code != 0 || first != "PgBouncer 1.25.0 (pgturnstile "+Version+")" {
		t.Fatalf("exit %d, first line %q", code, first)
	}
}

// A config file that cannot be read is said once, "cannot load config
// file", with the system error in the C library's words, as PgBouncer's.
func TestConfigLoadErrorText(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.ini")
	var stderr bytes.Buffer
	if code := run([]string{missing}, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	want := "pgturnstile: cannot load config file: open " + missing + ": No such file or directory\n"
	if stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}
