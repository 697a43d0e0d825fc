//go:build linux

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The two units in etc/: pgturnstile.service for systemd 240 and later
// (Type=notify, reload by ExecReload; Debian 12, RHEL 9 and Ubuntu 22.04
// have no Type=notify-reload), and the Type=notify-reload variant for 253
// and later. Each is checked for the directives that make it work, and,
// where systemd-analyze exists, verified by it: no complaint about the
// unit, except, on a systemd older than 253, the two about notify-reload
// that the variant's comment warns of.
func TestSystemdUnits(t *testing.T) {
	units := []struct {
		file string
		want map[string]string // directive -> value
		none []string          // directives it must not have
		// the complaints of systemd-analyze verify before 253
		oldSystemd []string
	}{
		{
			file: "pgturnstile.service",
			want: map[string]string{"Type": "notify", "ExecReload": "/bin/kill -HUP $MAINPID", "KillSignal": "SIGINT"},
			none: []string{"ReloadSignal"},
		},
		{
			file:       "pgturnstile-notify-reload.service",
			want:       map[string]string{"Type": "notify-reload", "ReloadSignal": "SIGHUP", "KillSignal": "SIGINT"},
			none:       []string{"ExecReload"},
			oldSystemd: []string{"Failed to parse service type, ignoring: notify-reload", "Unknown key 'ReloadSignal' in section [Service], ignoring."},
		},
	}
	analyze, _ := exec.LookPath("systemd-analyze")
	version := 0
	if analyze != "" {
		version = systemdVersion(t, analyze)
	}
	for _, u := range units {
		t.Run(u.file, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("..", "..", "etc", u.file))
			if err != nil {
				t.Fatal(err)
			}
			got := serviceDirectives(string(text))
			for k, v := range u.want {
				if got[k] != v {
					t.Errorf("%s=%q, want %q", k, got[k], v)
				}
			}
			for _, k := range u.none {
				if _, ok := got[k]; ok {
					t.Errorf("has %s=%s", k, got[k])
				}
			}
			if analyze == "" {
				t.Skip("systemd-analyze not installed: directives checked, unit not verified")
			}
			var allowed []string
			if version < 253 {
				allowed = u.oldSystemd
			}
			verifyUnit(t, analyze, u.file, string(text), allowed, nil)
		})
	}
}

// etc/pgturnstile.socket is PgBouncer's pgbouncer.socket for pgturnstile:
// listening sockets (Accept=no) on port 6432 and the Unix socket where
// PostgreSQL's clients look for it, passed to pgturnstile.service, which
// systemd-analyze verify finds beside it and accepts.
func TestSystemdSocketUnit(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "etc", "pgturnstile.socket"))
	if err != nil {
		t.Fatal(err)
	}
	service, err := os.ReadFile(filepath.Join("..", "..", "etc", "pgturnstile.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(text)
	if got, want := directiveValues(unit, "[Socket]", "ListenStream"), []string{"6432", "/run/postgresql/.s.PGSQL.6432"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ListenStream=%q, want %q", got, want)
	}
	if got := directiveValues(unit, "[Socket]", "Accept"); len(got) != 1 || got[0] != "no" {
		t.Errorf("Accept=%q, want no: pgturnstile serves listening sockets", got)
	}
	if got := directiveValues(unit, "[Socket]", "Service"); len(got) != 0 {
		t.Errorf("Service=%q: the socket's own name, pgturnstile.service, is the one that takes it", got)
	}
	if got := directiveValues(unit, "[Install]", "WantedBy"); len(got) != 1 || got[0] != "sockets.target" {
		t.Errorf("WantedBy=%q, want sockets.target", got)
	}
	// The service works without the socket unit too (TestSystemdUnits
	// verifies it alone).
	for _, d := range [][2]string{{"[Unit]", "Requires"}, {"[Unit]", "BindsTo"}, {"[Service]", "Sockets"}} {
		if got := directiveValues(string(service), d[0], d[1]); len(got) != 0 {
			t.Errorf("pgturnstile.service has %s=%q: it must start without the socket unit", d[1], got)
		}
	}
	analyze, _ := exec.LookPath("systemd-analyze")
	if analyze == "" {
		t.Skip("systemd-analyze not installed: directives checked, unit not verified")
	}
	verifyUnit(t, analyze, "pgturnstile.socket", unit, nil, map[string]string{"pgturnstile.service": string(service)})
}

// directives is each Key=Value line of section, in order.
func directives(unit, section string) [][2]string {
	var out [][2]string
	current := ""
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			current = line
		case current == section:
			if k, v, ok := strings.Cut(line, "="); ok {
				out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
			}
		}
	}
	return out
}

// directiveValues is each value of key in section, in order.
func directiveValues(unit, section, key string) []string {
	var out []string
	for _, kv := range directives(unit, section) {
		if kv[0] == key {
			out = append(out, kv[1])
		}
	}
	return out
}

// serviceDirectives is the [Service] section's Key=Value lines.
func serviceDirectives(unit string) map[string]string {
	out := map[string]string{}
	for _, kv := range directives(unit, "[Service]") {
		out[kv[0]] = kv[1]
	}
	return out
}

// verifyUnit runs systemd-analyze verify on a copy of the unit whose
// ExecStart names a pgturnstile binary that exists (verify refuses a
// missing one): bin/pgturnstile (make test builds it first), else one built
// here. Only complaints about this unit count; verify also loads the units
// it depends on, which may have complaints of their own on some hosts.
// beside are units written next to it (name -> text; a service's ExecStart
// rewritten the same way), which verify finds there.
func verifyUnit(t *testing.T, analyze, name, unit string, allowed []string, beside map[string]string) {
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "pgturnstile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := os.Stat(bin); err != nil {
		bin = filepath.Join(dir, "pgturnstile")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	write := func(name, unit string) {
		if strings.HasSuffix(name, ".service") {
			if !strings.Contains(unit, "ExecStart=/usr/local/bin/pgturnstile ") {
				t.Fatalf("%s: ExecStart is not /usr/local/bin/pgturnstile", name)
			}
			unit = strings.Replace(unit, "ExecStart=/usr/local/bin/pgturnstile ", "ExecStart="+bin+" ", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for n, u := range beside {
		write(n, u)
	}
	write(name, unit)
	path := filepath.Join(dir, name)
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, name) {
			continue
		}
		ok := false
		for _, a := range allowed {
			ok = ok || strings.HasSuffix(line, a)
		}
		if !ok {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}

// systemdVersion is N of "systemd N (…)", systemd-analyze --version's
// first line.
func systemdVersion(t *testing.T, analyze string) int {
	out, err := exec.Command(analyze, "--version").Output()
	if err != nil {
		t.Fatalf("systemd-analyze --version: %v", err)
	}
	m := regexp.MustCompile(`^systemd (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze --version: %q", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
