//go:build linux

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
)

// TestConnectWorkloads: the connect-per-transaction workloads are there,
// each on its login setup, and pgbench logs in as that setup says.
func TestConnectWorkloads(t *testing.T) {
	want := map[string]struct {
		setup, user, sslmode string
		clients              int
	}{
		"S-connect-50":           {"scram", benchUser, "disable", 50},
		"S-connect-plain-50":     {"", benchUser, "disable", 50},
		"S-connect-md5-50":       {"md5", md5User, "disable", 50},
		"S-connect-tls-ecdsa-20": {"tls-ecdsa", benchUser, "require", 20},
		"S-connect-tls-rsa-20":   {"tls-rsa", benchUser, "require", 20},
	}
	seen := 0
	for _, w := range workloads() {
		wt, ok := want[w.Key]
		if !ok {
			if w.Setup != "" || w.isConnect() {
				t.Errorf("%s: setup %q, -C %v", w.Key, w.Setup, w.isConnect())
			}
			continue
		}
		seen++
		l := w.loginOf()
		if w.Setup != wt.setup || l.User != wt.user || l.SSLMode != wt.sslmode || w.Clients != wt.clients || !w.isConnect() {
			t.Errorf("%s: setup %q login %+v clients %d -C %v", w.Key, w.Setup, l, w.Clients, w.isConnect())
		}
		if env := pgbenchEnv(l); !slices.Contains(env, "PGSSLMODE="+wt.sslmode) || !slices.Contains(env, "PGPASSWORD="+l.Password) {
			t.Errorf("%s: pgbench env lacks PGSSLMODE=%s or the password", w.Key, wt.sslmode)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d connect workloads", seen, len(want))
	}
	if !strings.Contains(workloadName("S-connect-plain-50"), "plain password in userlist (PgBouncer runs PBKDF2 per login)") ||
		!strings.Contains(workloadName("S-connect-50"), "SCRAM secret") {
		t.Errorf("labels: %q, %q", workloadName("S-connect-plain-50"), workloadName("S-connect-50"))
	}
	// Issue 22's judged workloads run as many rounds as issue 6's.
	o := options{rounds: 1, targetRounds: 2}
	if o.roundsOf("S-connect-50") != 2 || o.roundsOf("S-connect-tls-ecdsa-20") != 2 || o.roundsOf("S-connect-md5-50") != 1 {
		t.Errorf("rounds: %d %d %d", o.roundsOf("S-connect-50"), o.roundsOf("S-connect-tls-ecdsa-20"), o.roundsOf("S-connect-md5-50"))
	}
}

func workloadName(key string) string {
	for _, w := range workloads() {
		if w.Key == key {
			return w.Name
		}
	}
	return ""
}

// TestLoginSetupINI: a setup's poolers get its auth_type (once), a userlist
// of their own with the role's secret, and client TLS when it has a
// certificate; the main poolers' userlist is left alone.
func TestLoginSetupINI(t *testing.T) {
	dir := t.TempDir()
	e := &env{Env: &benchenv.Env{Dir: dir, PGPort: 5432},
		secrets: map[string]string{benchUser: "SCRAM-SHA-256$4096:c2FsdA==$a2V5:c2Vydg==", md5User: "md5" + strings.Repeat("0", 32)},
		certs:   map[string]certFiles{"rsa": {Key: "/k/rsa.key", Cert: "/k/rsa.crt"}}}
	if _, err := e.poolerINI(6431, iniOpts{}); err != nil {
		t.Fatal(err)
	}
	io, err := e.iniOptsOf(loginSetups["md5"])
	if err != nil {
		t.Fatal(err)
	}
	ini, err := e.poolerINI(6432, io)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(ini, "auth_type") != 1 || !strings.Contains(ini, "\nauth_type = md5\n") || strings.Contains(ini, "client_tls") {
		t.Errorf("md5 ini:\n%s", ini)
	}
	if b, _ := os.ReadFile(io.Userlist); string(b) != `"bench_md5" "md500000000000000000000000000000000"`+"\n" {
		t.Errorf("md5 userlist %s: %q", io.Userlist, b)
	}
	if b, _ := os.ReadFile(dir + "/userlist.txt"); string(b) != `"bench" "bench-secret"`+"\n" {
		t.Errorf("main userlist: %q", b)
	}
	if io.Login.User != md5User {
		t.Errorf("ready check logs in as %+v", io.Login)
	}

	io, err = e.iniOptsOf(loginSetups["tls-rsa"])
	if err != nil {
		t.Fatal(err)
	}
	ini, err = e.poolerINI(6433, io)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nauth_type = scram-sha-256\n", "\nclient_tls_sslmode = require\n", "\nclient_tls_key_file = /k/rsa.key\n", "\nclient_tls_cert_file = /k/rsa.crt\n"} {
		if !strings.Contains(ini, want) {
			t.Errorf("tls-rsa ini lacks %q:\n%s", want, ini)
		}
	}
	if b, _ := os.ReadFile(io.Userlist); !strings.Contains(string(b), `"bench" "SCRAM-SHA-256$4096:`) {
		t.Errorf("tls-rsa userlist: %q", b)
	}
	// No ECDSA certificate made: the setup cannot start.
	if _, err := e.iniOptsOf(loginSetups["tls-ecdsa"]); err == nil {
		t.Error("tls-ecdsa without a certificate: no error")
	}
}

// TestWriteCerts: a P-256 and an RSA-2048 key pair that crypto/tls loads,
// the key readable by its owner only.
func TestWriteCerts(t *testing.T) {
	chowned := 0
	cs, err := writeCerts(t.TempDir(), func(string) error { chowned++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if chowned != 4 {
		t.Errorf("%d files handed over, want 4", chowned)
	}
	for kind, check := range map[string]func(any) bool{
		"ecdsa": func(k any) bool { e, ok := k.(*ecdsa.PublicKey); return ok && e.Curve == elliptic.P256() },
		"rsa":   func(k any) bool { r, ok := k.(*rsa.PublicKey); return ok && r.N.BitLen() == 2048 },
	} {
		cf := cs[kind]
		pair, err := tls.LoadX509KeyPair(cf.Cert, cf.Key)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		c, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if !check(c.PublicKey) || c.VerifyHostname("127.0.0.1") != nil || !c.NotAfter.After(time.Now()) {
			t.Errorf("%s: key %T, hostname %v, not after %v", kind, c.PublicKey, c.VerifyHostname("127.0.0.1"), c.NotAfter)
		}
		if fi, err := os.Stat(cf.Key); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s key mode: %v %v", kind, fi.Mode(), err)
		}
	}
}

// TestLoginReport: issue 22's criteria in the targets table (SCRAM secret
// plain and over ECDSA TLS judged, the others informational), and pooler
// CPU per connection side by side.
func TestLoginReport(t *testing.T) {
	o := options{rounds: 1, targetRounds: 2, duration: 2 * time.Second, scale: 1, idleClients: 10}
	mk := okRun
	rs := []runResult{
		mk("S-connect-50", tBouncer, 1, 1000, 100), mk("S-connect-50", tTurnstile, 1, 1100, 90),
		mk("S-connect-50", tTurnstile, 2, 1000, 100), mk("S-connect-50", tBouncer, 2, 1000, 100),
		mk("S-connect-tls-ecdsa-20", tBouncer, 1, 500, 400), mk("S-connect-tls-ecdsa-20", tTurnstile, 1, 450, 480),
		mk("S-connect-tls-ecdsa-20", tTurnstile, 2, 450, 560), mk("S-connect-tls-ecdsa-20", tBouncer, 2, 500, 400),
		mk("S-connect-tls-rsa-20", tBouncer, 1, 400, 600), mk("S-connect-tls-rsa-20", tTurnstile, 1, 300, 1200),
		mk("S-connect-plain-50", tDirect, 1, 300, math.NaN()), mk("S-connect-plain-50", tBouncer, 1, 150, 5000), mk("S-connect-plain-50", tTurnstile, 1, 250, 500),
		{Workload: "S-connect-md5-50", Target: tTurnstile, Round: 1, Err: "did not start: boom", CPUus: math.NaN()},
		mk("S-connect-md5-50", tBouncer, 1, 2000, 80),
	}
	rep := report(o, info{}, workloads(), rs, nil, nil)
	for _, want := range []string{
		"| issue 22: connect per transaction, SCRAM secret (S-connect-50): pooler CPU per connection pgturnstile/PgBouncer ≤ 1.0 | 0.95 (0.90–1.00) | yes |",
		"| issue 22: connect per transaction, SCRAM secret, TLS with an ECDSA P-256 certificate (S-connect-tls-ecdsa-20): pooler CPU per connection pgturnstile/PgBouncer ≤ 1.0 | 1.30 (1.20–1.40) | **no** |",
		"| issue 22: connect per transaction, SCRAM secret, TLS with an RSA-2048 certificate (S-connect-tls-rsa-20): pooler CPU per connection pgturnstile/PgBouncer (informational) | 2.00 | — |",
		"| issue 22: connect per transaction, plain password in userlist (PgBouncer runs PBKDF2 per login) (S-connect-plain-50): pooler CPU per connection pgturnstile/PgBouncer (informational) | 0.10 | — |",
		"| issue 22: connect per transaction, md5 secret (S-connect-md5-50): pooler CPU per connection pgturnstile/PgBouncer (informational) | — | — |",
		"## Logins: connect per transaction (issue 22)",
		"| select-only -C over TLS, RSA-2048 certificate, SCRAM secret, 20 clients | scram-sha-256, SCRAM secret | RSA-2048 | 600 | 1200 | 2.00 | 0.75 |",
		"| select-only -C, plain password in userlist (PgBouncer runs PBKDF2 per login), 50 clients | scram-sha-256, plain password | — | 5000 | 500 | 0.10 | 1.67 |",
		"| select-only -C, md5 secret in userlist (auth_type = md5), 50 clients | md5, md5 secret | — | 80 | — | — | — |",
		"Pooler CPU µs/txn (-C: per connection)",
		"0/1 ⚠ did not start: boom",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q\n%s", want, rep)
		}
	}
	if s := summaryText(rep); !strings.Contains(s, "## Logins: connect per transaction") {
		t.Error("the login table is not in the printed summary")
	}
}

// TestSetupFailures: a pooler that did not start fails every round of the
// workload, under its target name.
func TestSetupFailures(t *testing.T) {
	w := workload{Key: "S-connect-md5-50"}
	rs := setupFailures(w, 2, map[string]string{tTurnstile: "did not start: x"})
	if len(rs) != 2 || rs[0].Target != tTurnstile || rs[1].Round != 2 || rs[0].OK || rs[0].Err != "did not start: x" || !math.IsNaN(rs[0].CPUus) {
		t.Errorf("%+v", rs)
	}
}

// TestConnectDuration: the judged connect workloads run 4 s longer in a
// full run (CPU tick resolution), not with -quick; the others as before.
func TestConnectDuration(t *testing.T) {
	full := options{duration: 4 * time.Second}
	quick := options{duration: 2 * time.Second, quick: true}
	for _, c := range []struct {
		o    options
		w    workload
		want time.Duration
	}{
		{full, workload{Key: "S-connect-50", Clients: 50}, 8 * time.Second},
		{full, workload{Key: "S-connect-tls-ecdsa-20", Clients: 20}, 8 * time.Second},
		{full, workload{Key: "S-connect-tls-rsa-20", Clients: 20}, 4 * time.Second},
		{full, workload{Key: "S-ext-500", Clients: 500}, 7 * time.Second},
		{full, workload{Key: "S-ext-100", Clients: 100}, 4 * time.Second},
		{quick, workload{Key: "S-connect-50", Clients: 50}, 2 * time.Second},
		{quick, workload{Key: "S-ext-500", Clients: 500}, 2 * time.Second},
	} {
		if got := c.o.durationOf(c.w); got != c.want {
			t.Errorf("%s quick=%v: %s, want %s", c.w.Key, c.o.quick, got, c.want)
		}
	}
}

// TestFloors: the floors of a Go login run beside the poolers on
// S-connect-50 only, not in an A/A run nor without a binary, and the
// report puts them beside PgBouncer pair by pair.
func TestFloors(t *testing.T) {
	o := options{rounds: 1, targetRounds: 2, duration: 2 * time.Second, scale: 1, idleClients: 10, loginFloor: "bin/loginfloor"}
	var connect50 workload
	for _, w := range workloads() {
		if fs := o.floorsOf(w); len(fs) > 0 && w.Key != "S-connect-50" {
			t.Errorf("floors on %s", w.Key)
		}
		if w.Key == "S-connect-50" {
			connect50 = w
		}
	}
	if fs := o.floorsOf(connect50); len(fs) != 2 || fs[0] != (floor{tFloorRaw, "raw"}) || fs[1] != (floor{tFloorLoop, "epoll"}) {
		t.Errorf("floors: %+v", fs)
	}
	if aa := (options{aa: true, loginFloor: "x"}); len(aa.floorsOf(connect50)) != 0 {
		t.Error("floors in an A/A run")
	}
	if none := (options{}); len(none.floorsOf(connect50)) != 0 {
		t.Error("floors without a binary")
	}

	mk := func(tg string, round int, tps, cpu float64) runResult {
		return okRun("S-connect-50", tg, round, tps, cpu)
	}
	rs := []runResult{
		mk(tBouncer, 1, 100, 200), mk(tTurnstile, 1, 100, 300), mk(tFloorRaw, 1, 100, 260), mk(tFloorLoop, 1, 100, 210),
		mk(tBouncer, 2, 100, 100), mk(tTurnstile, 2, 50, 140), mk(tFloorRaw, 2, 100, 120), mk(tFloorLoop, 2, 100, 100),
	}
	rep := report(o, info{}, []workload{connect50}, rs, nil, nil)
	for _, want := range []string{
		"### The floor of a Go login",
		"| pgbouncer | 150 (100–200) | 1.00 | 1.00 |",
		"| pgturnstile | 220 (140–300) | 1.45 (1.40–1.50) | 0.75 (0.50–1.00) |",
		"| Go floor, goroutines | 190 (120–260) | 1.25 (1.20–1.30) | 1.00 (1.00–1.00) |",
		"| Go floor, event loop | 155 (100–210) | 1.02 (1.00–1.05) | 1.00 (1.00–1.00) |",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q\n%s", want, rep)
		}
	}
	// Without floor results there is no floor table.
	if rep := report(o, info{}, []workload{connect50}, rs[:2], nil, nil); strings.Contains(rep, "The floor of a Go login") {
		t.Error("a floor table without floor runs")
	}
	if rs := setupFailures(connect50, 1, map[string]string{tFloorLoop: "did not start: x"}); len(rs) != 1 || rs[0].Target != tFloorLoop {
		t.Errorf("floor failure: %+v", rs)
	}
}

// okRun is a successful run of workload w through target tg with these
// TPS and CPU figures.
func okRun(w, tg string, round int, tps, cpu float64) runResult {
	return runResult{Workload: w, Target: tg, Round: round, OK: true, TPS: tps, P50us: 500, P99us: 2000, CPUus: cpu, PeakRSSKB: 10240, Txns: 100, WindowS: 1}
}
