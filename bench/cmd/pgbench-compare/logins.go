//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
)

// The connect-per-transaction workloads (issue 22) measure what one login
// costs each pooler, configured the way production is: the userlist holds
// the role's SCRAM secret (what auth_query and every production userlist
// return), not its password. A plain password in the userlist makes
// PgBouncer run PBKDF2 (4096 HMAC-SHA-256 rounds) on every login, so the
// main poolers' configuration (plain password, kept for the other
// workloads and for comparison with earlier reports) flatters pgturnstile
// on -C; the plain-password workload stays, labelled as such.
//
// Each setup below gets a fresh PgBouncer and pgturnstile, started for its
// workload and stopped after it, with the same ini as the main poolers but
// for auth_type, the userlist and the client TLS settings.

// The md5 role: its password is stored as md5 in PostgreSQL, and the
// poolers log in to PostgreSQL with the md5 secret from their userlist.
const (
	md5User = "bench_md5"
	md5Pass = "bench-md5-secret"
)

// login is how pgbench and the ready check log in to a target.
type login struct {
	User, Password string
	SSLMode        string // libpq sslmode
	DB             string // the database (a shard map's cluster); "" is bench
}

// plainLogin is the main poolers' (and direct PostgreSQL's) login.
var plainLogin = login{User: benchUser, Password: benchPass, SSLMode: "disable"}

// loginSetup is one pooler configuration of the connect-per-transaction
// workloads.
type loginSetup struct {
	Key      string // names the poolers' files: "scram" → login-scram-pgbouncer.ini
	Userlist string // for the report: what the userlist holds
	AuthType string // auth_type
	Login    login
	Cert     string // client TLS certificate: "" (none), "ecdsa" or "rsa"
}

// loginSetups are the setups by key. The secrets come from pg_authid once
// PostgreSQL runs (env.secrets), the certificates from env.certs.
var loginSetups = map[string]loginSetup{
	"scram":     {Key: "scram", Userlist: "SCRAM secret", AuthType: "scram-sha-256", Login: plainLogin},
	"md5":       {Key: "md5", Userlist: "md5 secret", AuthType: "md5", Login: login{User: md5User, Password: md5Pass, SSLMode: "disable"}},
	"tls-ecdsa": {Key: "tls-ecdsa", Userlist: "SCRAM secret", AuthType: "scram-sha-256", Login: login{User: benchUser, Password: benchPass, SSLMode: "require"}, Cert: "ecdsa"},
	"tls-rsa":   {Key: "tls-rsa", Userlist: "SCRAM secret", AuthType: "scram-sha-256", Login: login{User: benchUser, Password: benchPass, SSLMode: "require"}, Cert: "rsa"},
}

// certDesc is how the report names a certificate kind.
var certDesc = map[string]string{"ecdsa": "ECDSA P-256", "rsa": "RSA-2048"}

// loginOf is how pgbench logs in for w.
func (w workload) loginOf() login {
	if s, ok := loginSetups[w.Setup]; ok {
		return s.Login
	}
	return plainLogin
}

// iniOptsOf is the ini of setup s's poolers: auth_type, a userlist with the
// role's secret from pg_authid, and client TLS.
func (e *env) iniOptsOf(s loginSetup) (iniOpts, error) {
	secret, ok := e.secrets[s.Login.User]
	if !ok || secret == "" {
		return iniOpts{}, fmt.Errorf("no secret of role %s read from pg_authid", s.Login.User)
	}
	io := iniOpts{
		AuthType: s.AuthType,
		Userlist: filepath.Join(e.Dir, "userlist-"+s.Key+".txt"),
		Users:    fmt.Sprintf("%q %q\n", s.Login.User, secret),
		Login:    s.Login,
	}
	if s.Cert != "" {
		c, ok := e.certs[s.Cert]
		if !ok {
			return iniOpts{}, fmt.Errorf("no %s certificate", s.Cert)
		}
		io.Extra = fmt.Sprintf("client_tls_sslmode = require\nclient_tls_key_file = %s\nclient_tls_cert_file = %s\n", c.Key, c.Cert)
	}
	return io, nil
}

// setupTargets starts a fresh PgBouncer and pgturnstile (with -aa, two
// PgBouncers) configured as w's setup and warms each pool up to 20 server
// connections with w's login. A pooler that does not start is left out and
// its error returned in failed, by target name; the caller stops procs.
func (e *env) setupTargets(ctx context.Context, o options, w workload, bouncer, pooler, logDir string, logf func(string, ...any)) (targets []target, procs []*benchenv.Proc, failed map[string]string) {
	failed = map[string]string{}
	s, ok := loginSetups[w.Setup]
	if !ok {
		failed[tBouncer] = "unknown login setup " + w.Setup
		return nil, nil, failed
	}
	kinds := []struct{ name, kind, bin string }{{tBouncer, "pgbouncer", bouncer}, {tTurnstile, "pgturnstile", pooler}}
	if o.aa {
		kinds[1] = struct{ name, kind, bin string }{tBouncerB, "pgbouncer", bouncer}
	}
	io, ierr := e.iniOptsOf(s)
	for i, k := range kinds {
		err := ierr
		var p *benchenv.Proc
		if err == nil {
			p, err = e.startPooler(fmt.Sprintf("login-%s-%s%d", s.Key, k.kind, i), k.kind, k.bin, nil, io)
		}
		if err != nil {
			failed[k.name] = "did not start: " + err.Error()
			logf("%s: %s did not start: %s", w.Key, k.name, shorten(err.Error(), 300))
			continue
		}
		t := target{Name: k.name, Port: p.Port, Proc: p}
		procs = append(procs, p)
		targets = append(targets, t)
		warm := workload{Key: "warm-up", Clients: 40, Args: []string{"-S"}, Setup: w.Setup}
		if r := runPgbench(ctx, logDir, 0, warm, t, max(min(o.duration/2, 2*time.Second), time.Second), 0); !r.OK {
			logf("warm-up through %s (%s): %s", t.Name, s.Key, r.Err)
		}
	}
	for _, f := range o.floorsOf(w) {
		p, err := e.startFloor(o.loginFloor, f.mode, f.name)
		if err != nil {
			failed[f.name] = "did not start: " + err.Error()
			logf("%s: %s did not start: %s", w.Key, f.name, shorten(err.Error(), 300))
			continue
		}
		procs = append(procs, p)
		targets = append(targets, target{Name: f.name, Port: p.Port, Proc: p})
	}
	return targets, procs, failed
}

// floorWorkload is the workload the floors of a Go login run on.
const floorWorkload = "S-connect-50"

// floor is one of bench/cmd/loginfloor's designs as a target.
type floor struct{ name, mode string }

// floorsOf are the floors that run beside the poolers on w: on
// S-connect-50, where -loginfloor names a binary, and not in an A/A run.
func (o options) floorsOf(w workload) []floor {
	if w.Key != floorWorkload || o.loginFloor == "" || o.aa {
		return nil
	}
	return []floor{{tFloorRaw, "raw"}, {tFloorLoop, "epoll"}}
}

// startFloor starts loginfloor in mode as name: the bench role's SCRAM
// secret, 20 servers (the poolers' pool size), the bench role's login to
// PostgreSQL.
func (e *env) startFloor(bin, mode, name string) (*benchenv.Proc, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%v (make bench builds it)", err)
	}
	secret := e.secrets[benchUser]
	if !strings.HasPrefix(secret, "SCRAM-SHA-256$") {
		return nil, fmt.Errorf("no SCRAM secret for %s in pg_authid", benchUser)
	}
	secretFile := filepath.Join(e.Dir, "loginfloor-secret.txt")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o644); err != nil {
		return nil, err
	}
	to := fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=disable", e.PGPort, benchUser, benchPass, benchDB)
	return e.StartPooler(benchenv.Pooler{
		Name: "loginfloor-" + mode, Bin: bin,
		Args: func(port int) []string {
			return []string{"-mode", mode, "-listen", fmt.Sprintf("127.0.0.1:%d", port), "-to", to,
				"-servers", "20", "-user", benchUser, "-secret", secretFile}
		},
		Ready: func(ctx context.Context, port int) error { return queryOnce(ctx, port, plainLogin) },
	})
}

// loginCriteria are issue 22's criteria: pooler CPU per connection,
// pgturnstile over PgBouncer pair by pair, with connect per transaction.
// Those with a bound are judged; the others are figures beside them.
func loginCriteria(t table, o options) []criterion {
	le1 := func(x float64) bool { return x <= 1.0 }
	mk := func(key, what string, judged bool) criterion {
		c := criterion{what: fmt.Sprintf("connect per transaction, %s (%s): pooler CPU per connection", what, key),
			fig: t.pairs(key, tTurnstile, tBouncer, o.roundsOf(key), ratio(fCPU))}
		if judged {
			c.bound, c.meets = "≤ 1.0", le1
		}
		return c
	}
	return []criterion{
		mk("S-connect-50", "SCRAM secret", true),
		mk("S-connect-tls-ecdsa-20", "SCRAM secret, TLS with an ECDSA P-256 certificate", true),
		mk("S-connect-md5-50", "md5 secret", false),
		mk("S-connect-plain-50", "plain password in userlist (PgBouncer runs PBKDF2 per login)", false),
		mk("S-connect-tls-rsa-20", "SCRAM secret, TLS with an RSA-2048 certificate", false),
	}
}

// loginSection is the report's table of the connect-per-transaction
// workloads: pooler CPU per connection of each pooler side by side, and
// pgturnstile/PgBouncer pair by pair.
func loginSection(t table, o options, ws []workload) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	var cs []workload
	for _, w := range ws {
		if w.isConnect() {
			cs = append(cs, w)
		}
	}
	if len(cs) == 0 {
		return ""
	}
	p("## Logins: connect per transaction (issue 22)\n\n")
	p("`pgbench -S -C`: every transaction opens a new connection, logs in, runs one `SELECT` and logs out, so one transaction is one connection and *pooler CPU µs per connection* is the pooler's CPU µs/txn (login, one transaction, logout). ")
	p("The plain-password workload runs on the main poolers; each of the others on a fresh PgBouncer and pgturnstile with the ini above but for `auth_type`, the userlist (the role's secret as `pg_authid` holds it) and, over TLS, `client_tls_sslmode = require` with the same key and certificate for both (TLS 1.3; pgbench with `PGSSLMODE=require`). ")
	p("Cells are *median (min–max)* over rounds; the ratio is pgturnstile ÷ PgBouncer within each round.\n\n")
	p("| Workload | auth_type, userlist | Client TLS | PgBouncer CPU µs/connection | pgturnstile CPU µs/connection | CPU ratio | TPS ratio |\n|---|---|---|---|---|---|---|\n")
	for _, w := range cs {
		n := o.roundsOf(w.Key)
		auth, tls := "scram-sha-256, plain password", "—"
		if s, ok := loginSetups[w.Setup]; ok {
			auth = s.AuthType + ", " + s.Userlist
			if s.Cert != "" {
				tls = certDesc[s.Cert]
			}
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", w.Name, auth, tls,
			t.perTarget(w.Key, tBouncer, n, fCPU).cell(0),
			t.perTarget(w.Key, tTurnstile, n, fCPU).cell(0),
			t.pairs(w.Key, tTurnstile, tBouncer, n, ratio(fCPU)).cell(2),
			t.pairs(w.Key, tTurnstile, tBouncer, n, ratio(fTPS)).cell(2))
	}
	p("\n")
	p("%s", floorSection(t, o, cs))
	return b.String()
}

// floorSection is the table of the floors of a Go login beside PgBouncer,
// where they ran.
func floorSection(t table, o options, cs []workload) string {
	var w workload
	for _, c := range cs {
		if len(o.floorsOf(c)) > 0 {
			w = c
		}
	}
	n := o.roundsOf(w.Key)
	if w.Key == "" || t.perTarget(w.Key, tFloorRaw, n, fCPU).N+t.perTarget(w.Key, tFloorLoop, n, fCPU).N == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("### The floor of a Go login\n\n")
	p("`bench/cmd/loginfloor` serves %s with only what a pooler must do for it: the startup packet, the SCRAM exchange against the same secret, one welcome write, the query on one of 20 servers logged in at start, its replies in one write. ", w.Key)
	p("No configuration, limits, parameter tracking, statistics, logging, deadlines or admission. ")
	p("*Goroutines* is pgturnstile's design with nothing of pgturnstile's logic: a goroutine per client (reused), clients accepted and served by `internal/netpoll`, servers through `wire.SocketIO`, GOMAXPROCS set by `internal/procscale`. ")
	p("*Event loop* is PgBouncer's design in Go: one thread, one epoll set, raw system calls, each client a state machine. ")
	p("They run interleaved with the two poolers, in the same rounds; the ratio is to PgBouncer within each round.\n\n")
	p("| Target | CPU µs/connection | CPU ratio to PgBouncer | TPS ratio |\n|---|---|---|---|\n")
	for _, tg := range []string{tBouncer, tTurnstile, tFloorRaw, tFloorLoop} {
		ratioCPU, ratioTPS := "1.00", "1.00"
		if tg != tBouncer {
			ratioCPU = t.pairs(w.Key, tg, tBouncer, n, ratio(fCPU)).cell(2)
			ratioTPS = t.pairs(w.Key, tg, tBouncer, n, ratio(fTPS)).cell(2)
		}
		p("| %s | %s | %s | %s |\n", tg, t.perTarget(w.Key, tg, n, fCPU).cell(0), ratioCPU, ratioTPS)
	}
	p("\n")
	return b.String()
}

// isConnect reports whether w reconnects per transaction (-C).
func (w workload) isConnect() bool { return slices.Contains(w.Args, "-C") }

// setupFailures are the results of a setup workload's rounds for a pooler
// that did not start.
func setupFailures(w workload, rounds int, failed map[string]string) []runResult {
	var rs []runResult
	for _, name := range []string{tBouncer, tTurnstile, tBouncerB, tFloorRaw, tFloorLoop, tTurnShard} {
		msg, ok := failed[name]
		if !ok {
			continue
		}
		for round := 1; round <= rounds; round++ {
			rs = append(rs, runResult{Workload: w.Key, Target: name, Round: round, Err: msg, CPUus: math.NaN()})
		}
	}
	return rs
}
