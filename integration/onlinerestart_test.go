//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestOnlineRestartUnderLoad is issue 21's online restart: pgbench -M
// prepared -c 50 -T 20 (named prepared statements, one connection per
// client for the whole run) and a pgx pool with its default statement
// cache run through pgturnstile while `pgturnstile -R` replaces the
// running process. No transaction may fail, no client may reconnect
// (pgbench aborts a client whose connection breaks; the pgx pool's count
// of new connections stays where it was), and the old process exits. The
// longest pause a pgx client saw (its slowest query) is reported.
func TestOnlineRestartUnderLoad(t *testing.T) {
	c := needPG(t)
	waitNoBackends(t, benchDB, benchUser)
	out, err := pgbench(t, benchPass, "-i", "-q", "-s", "1", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", benchUser, benchDB)
	if err != nil {
		t.Fatalf("pgbench -i (direct): %v\n%s", err, out)
	}
	sock := t.TempDir()
	pidfile := filepath.Join(sock, "pgturnstile.pid")
	p1 := startPooler(t, iniSettings(map[string]string{
		"unix_socket_dir":   sock,
		"pidfile":           pidfile,
		"default_pool_size": "20",
		"max_client_conn":   "150",
	}, ""), testUserlist)

	// The pgx pool: 8 connections, each looping a query with an argument
	// (prepared by the statement cache, then Bind/Execute only).
	cfg, err := pgxpool.ParseConfig(p1.ConnString(benchDB, benchUser, benchPass))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MinConns, cfg.MaxConns = 8, 8
	cfg.HealthCheckPeriod = time.Hour // no reconnect of its own
	pool, err := pgxpool.NewWithConfig(ctxT(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for pool.Stat().TotalConns() < 8 {
		time.Sleep(10 * time.Millisecond)
	}
	newConnsBefore := pool.Stat().NewConnsCount()

	// The workers stop at a flag, not by a cancelled context: pgx closes
	// a connection whose query's context ends.
	var stopping atomic.Bool
	stop := func() { stopping.Store(true) }
	defer stop()
	var wg sync.WaitGroup
	var queries, failures atomic.Int64
	var firstFailure atomic.Value
	// Each worker's queries as (start, latency): the pause is what the
	// queries in flight during the takeover took.
	type span struct {
		start time.Time
		lat   time.Duration
	}
	spans := make([][]span, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stopping.Load(); i++ {
				start := time.Now()
				var got int
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := pool.QueryRow(ctx, "SELECT $1::int + 1", i).Scan(&got)
				cancel()
				lat := time.Since(start)
				queries.Add(1)
				if err != nil || got != i+1 {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("worker %d query %d: got %d, %v", w, i, got, err))
					continue
				}
				spans[w] = append(spans[w], span{start, lat})
			}
		}()
	}

	bench := make(chan string, 1)
	go func() {
		out, err := pgbench(t, benchPass, "-M", "prepared", "-c", "50", "-j", "2", "-T", "20", "-P", "5",
			"-h", "127.0.0.1", "-p", strconv.Itoa(p1.Port), "-U", benchUser, benchDB)
		if err != nil {
			out += "\npgbench: " + err.Error()
		}
		bench <- out
	}()

	time.Sleep(5 * time.Second)
	restartStart := time.Now()
	p2 := rebootPooler(t, p1)
	select {
	case <-p1.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("the old process did not exit within 15 s of the takeover; its log:\n%s", p1.Log())
	}
	restartTook := time.Since(restartStart)
	out = <-bench
	stop()
	wg.Wait()

	t.Logf("pgbench -M prepared -c 50 -T 20 across the restart:\n%s", out)
	t.Logf("old process log:\n%s", p1.Log())
	if !strings.Contains(p1.Log(), "takeover: handed over ") {
		t.Errorf("the old process did not log its hand-over")
	}
	if m := tookOverServersRE.FindStringSubmatch(p2.Log()); m == nil || m[1] == "0" {
		t.Errorf("the new process took over no server: %v", m)
	}
	wantPgbenchClean(t, out)
	if strings.Contains(out, "\npgbench: ") {
		t.Errorf("pgbench did not exit cleanly")
	}
	if n := failures.Load(); n > 0 {
		t.Errorf("pgx pool: %d of %d queries failed; first: %v", n, queries.Load(), firstFailure.Load())
	}
	if got := pool.Stat().NewConnsCount(); got != newConnsBefore {
		t.Errorf("pgx pool opened %d new connections during the restart, want 0", got-newConnsBefore)
	}
	if queries.Load() == 0 {
		t.Fatal("the pgx pool ran no query")
	}
	// The new process serves them all: its SHOW CLIENTS has the 8 pgx
	// connections (pgbench has left).
	out2, stderr, err := psqlAsPooler(t, "", "-X", "-tA", "-h", sock, "-p", strconv.Itoa(p2.Port), "-U", "pgbouncer", "-d", "pgbouncer", "-c", "SHOW CLIENTS")
	if err != nil {
		t.Fatalf("SHOW CLIENTS on the new process: %v %s", err, stderr)
	}
	if n := strings.Count(out2, "|"+benchDB+"|"); n < 8 {
		t.Errorf("the new process lists %d clients of %s, want the pgx pool's 8:\n%s", n, benchDB, out2)
	}
	// The pause: the latency of each query in flight while the new
	// process took over (started before the old one exited, ended after
	// the new one started), against every other query's.
	restartEnd := restartStart.Add(restartTook)
	var during, other []time.Duration
	for _, ws := range spans {
		for _, sp := range ws {
			if sp.start.Before(restartEnd) && sp.start.Add(sp.lat).After(restartStart) {
				during = append(during, sp.lat)
			} else {
				other = append(other, sp.lat)
			}
		}
	}
	if len(during) == 0 {
		t.Fatal("no pgx query was in flight during the takeover")
	}
	slices.Sort(during)
	slices.Sort(other)
	pct := func(d []time.Duration, p int) time.Duration { return d[(len(d)-1)*p/100].Round(100 * time.Microsecond) }
	t.Logf("MEASURED online restart under pgbench -M prepared -c 50 + 8 pgx clients: -R start to old process gone %v; pause (latency of the %d pgx queries in flight meanwhile): p50 %v, max %v; other queries: p50 %v, p99 %v, max %v",
		restartTook.Round(time.Millisecond), len(during), pct(during, 50), pct(during, 100), pct(other, 50), pct(other, 99), pct(other, 100))
}

var tookOverServersRE = regexp.MustCompile(`takeover: took over (\d+) servers`)

// rebootPooler starts `pgturnstile -R` on p's configuration (its Unix
// socket is how the new process finds the old one) and waits until it has
// taken over. The old process ends by itself: p is marked stopped, and its
// log is checked for crashes when it has.
func rebootPooler(t *testing.T, p *Pooler) *Pooler {
	t.Helper()
	p.stopped.Store(true) // it exits by itself: not a failure
	t.Cleanup(func() {
		<-p.exited
		for _, bad := range []string{"panic:", "WARNING: DATA RACE", "fatal error:"} {
			if strings.Contains(p.Log(), bad) {
				t.Errorf("old pooler log contains %q:\n%s", bad, p.Log())
			}
		}
	})
	n := startReboot(t, p, nil)
	if !n.WaitLog("old process handed over", 20*time.Second) {
		t.Fatalf("pgturnstile -R did not take over within 20 s; its log:\n%s\nold log:\n%s", n.Log(), p.Log())
	}
	return n
}

// startReboot starts `pgturnstile -R` on p's configuration, edited by edit
// when not nil, and returns at once.
func startReboot(t *testing.T, p *Pooler, edit func(ini string) string) *Pooler {
	t.Helper()
	ini, err := os.ReadFile(p.IniPath)
	if err != nil {
		t.Fatal(err)
	}
	// listen_port = 0 picked the port at the first start: the new process
	// needs it to find the old one's socket.
	text := strings.Replace(string(ini), "listen_port = 0", "listen_port = "+strconv.Itoa(p.Port), 1)
	if edit != nil {
		text = edit(text)
	}
	if err := os.WriteFile(p.IniPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &Pooler{t: t, Port: p.Port, Dir: p.Dir, IniPath: p.IniPath, log: newLogBuffer()}
	n.cmd = exec.Command(poolerBinary(t), "-R", p.IniPath)
	n.cmd.Dir = p.Dir
	n.cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
	n.cmd.SysProcAttr = poolerProcAttr(p.Dir)
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting pgturnstile -R: %v", err)
	}
	n.exited = make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(n.exited) }()
	poolersMu.Lock()
	poolers[n] = struct{}{}
	poolersMu.Unlock()
	t.Cleanup(n.stop)
	return n
}

// TestOnlineRestartKeepsSession: what a client's session is made of
// survives pgturnstile -R: its named prepared statement (executed by name
// on the new process, whose servers never saw its Parse), its startup
// parameters (TimeZone, application_name), and its cancel key (a cancel
// request sent with the key the old process gave cancels the query on the
// new one). A session-mode client whose server is idle moves with it
// (PgBouncer 1.18's linked pair): its session goes on on the same backend
// in the new process, and the old one exits at once.
func TestOnlineRestartKeepsSession(t *testing.T) {
	needPG(t)
	sock := t.TempDir()
	p1 := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock},
		"[databases]\nsessdb = host=127.0.0.1 port=@PGPORT@ dbname="+appDB+" pool_mode=session"), testUserlist)
	cfg := pgxConfig(t, p1.App())
	cfg.RuntimeParams["TimeZone"] = "America/Chicago"
	cfg.RuntimeParams["application_name"] = "keeper"
	a, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	if _, err := a.Prepare(ctxT(t, 5*time.Second), "double_it", "SELECT $1::int * 2"); err != nil {
		t.Fatal(err)
	}
	var got int
	if err := a.QueryRow(ctxT(t, 5*time.Second), "double_it", 4).Scan(&got); err != nil || got != 8 {
		t.Fatalf("double_it(4) before the restart = %d, %v", got, err)
	}
	pidBefore := queryInt(t, a, "SELECT pg_backend_pid()")
	sess := connectPgx(t, p1.ConnString("sessdb", appUser, appPassword))
	if _, err := sess.Exec(ctxT(t, 5*time.Second), "SET my.mark = 'old'"); err != nil {
		t.Fatal(err)
	}
	sessPid := queryInt(t, sess, "SELECT pg_backend_pid()")

	p2 := rebootPooler(t, p1)
	if !p2.WaitLog("took over 2 clients", 5*time.Second) {
		t.Errorf("the new process did not take over both clients; its log:\n%s", p2.Log())
	}
	if err := a.QueryRow(ctxT(t, 5*time.Second), "double_it", 21).Scan(&got); err != nil || got != 42 {
		t.Fatalf("double_it(21) after the restart = %d, %v", got, err)
	}
	// The idle server was handed over too: the same backend, which
	// still has the statement prepared under the name the old process
	// gave it.
	if pid := queryInt(t, a, "SELECT pg_backend_pid()"); pid != pidBefore {
		t.Errorf("backend after the restart = %d, want %d (the server handed over)", pid, pidBefore)
	}
	if n := queryInt(t, a, "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'PGTS_%' AND statement = 'SELECT $1::int * 2'"); n != 1 {
		t.Errorf("the backend has %d copies of double_it's statement, want 1 (prepared once, before the restart)", n)
	}
	if !p2.LogContains("takeover: took over 2 servers") {
		t.Errorf("the new process did not take over the idle server and the session client's; its log:\n%s", p2.Log())
	}
	if tz := queryText(t, a, "SELECT current_setting('TimeZone')"); tz != "America/Chicago" {
		t.Errorf("TimeZone after the restart = %q, want America/Chicago", tz)
	}
	if app := queryText(t, a, "SELECT current_setting('application_name')"); app != "keeper" {
		t.Errorf("application_name after the restart = %q, want keeper", app)
	}
	// The cancel key from the old process's welcome, on the new process.
	done := make(chan error, 1)
	go func() {
		_, err := a.Exec(context.Background(), "SELECT pg_sleep(30)")
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := a.PgConn().CancelRequest(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if pe := asPgError(t, err); pe.Code != "57014" {
			t.Errorf("cancelled query: %v, want SQLSTATE 57014", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel request did not cancel the query within 10 s")
	}

	// The session-mode client moved too: the old process, with no client
	// left, exits, and the session goes on on the same backend.
	select {
	case <-p1.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the old process did not exit with no client left; log:\n%s", p1.Log())
	}
	if mark := queryText(t, sess, "SELECT current_setting('my.mark')"); mark != "old" {
		t.Errorf("session-mode client's my.mark = %q, want old (its session kept)", mark)
	}
	if pid := queryInt(t, sess, "SELECT pg_backend_pid()"); pid != sessPid {
		t.Errorf("session-mode client's backend after the restart = %d, want %d", pid, sessPid)
	}
	sess.Close(ctxT(t, 5*time.Second))
}

// TestShutdownWhileSuspended: SIGTERM ends a suspended pooler (its accept
// loops wait for RESUME; the shutdown resumes them to see their listeners
// close). The harness's stop fails the test if the process does not exit
// within 5 s.
func TestShutdownWhileSuspended(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	admin := adminConsole(t, p)
	if tag := adminExec(t, admin, "SUSPEND"); tag != "SUSPEND" {
		t.Fatalf("SUSPEND tag %q", tag)
	}
	admin.Close(ctxT(t, 5*time.Second))
	p.Stop()
	select {
	case <-p.exited:
	default:
		t.Fatal("the pooler did not exit")
	}
}
