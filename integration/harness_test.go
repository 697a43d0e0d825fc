//go:build linux

package integration

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/lib/pq"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// ---------------------------------------------------------------------------
// The pooler binary

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// poolerBinary builds ./cmd/pgturnstile once per test run (or returns
// $PGTURNSTILE_BIN). It is built lazily so that the Postgres-only harness
// tests still run while the pooler does not compile.
func poolerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			buildErr = err
			return
		}
		binPath, buildErr = pgtest.BuildPooler(root, filepath.Join(pg.dir, "pgturnstile"))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// ---------------------------------------------------------------------------
// Configs

// testUserlist holds every role with its plain password: the pooler uses it
// both to check clients and to log in to Postgres.
var testUserlist = fmt.Sprintf("%q %q\n%q %q\n%q %q\n",
	appUser, appPassword, md5User, md5Password, benchUser, benchPass)

// iniSettings returns a pgbouncer.ini with [databases] entries for the test
// databases and the `*` fallback, and a [pgbouncer] section holding the test
// defaults overridden by settings. extra is appended verbatim (for [users],
// [pools], or [databases] lines in a section of its own). @PGPORT@ and
// @AUTH_FILE@ are filled in by startPooler.
func iniSettings(settings map[string]string, extra string) string {
	s := map[string]string{
		"listen_addr":        "127.0.0.1",
		"listen_port":        "0",
		"unix_socket_dir":    "",
		"auth_type":          "scram-sha-256",
		"auth_file":          "@AUTH_FILE@",
		"pool_mode":          "transaction",
		"default_pool_size":  "20",
		"max_client_conn":    "100",
		"query_wait_timeout": "20", // bounded, so a stuck test fails instead of hanging
	}
	for k, v := range settings {
		s[k] = v
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("[databases]\n")
	for _, db := range []string{appDB, otherDB, benchDB} {
		fmt.Fprintf(&b, "%s = host=127.0.0.1 port=@PGPORT@ dbname=%s\n", db, db)
	}
	b.WriteString("* = host=127.0.0.1 port=@PGPORT@\n\n[pgbouncer]\n")
	for _, k := range keys {
		if s[k] == "" {
			fmt.Fprintf(&b, "%s =\n", k)
		} else {
			fmt.Fprintf(&b, "%s = %s\n", k, s[k])
		}
	}
	if extra != "" {
		b.WriteString("\n" + extra + "\n")
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// Running the pooler

// Pooler is one running pgturnstile process.
type Pooler struct {
	t       testing.TB
	Port    int
	Dir     string
	IniPath string
	cmd     *exec.Cmd
	log     *logBuffer
	exited  chan struct{}
	dumped  atomic.Bool // killed by DumpGoroutines on purpose
	stopped atomic.Bool // Stop ran: the cleanup has nothing left to do
	// metricsAddr is metrics_addr when a test set one.
	metricsAddr string
	// ini is the configuration it started with, for failure messages.
	ini string
}

var (
	poolersMu sync.Mutex
	poolers   = map[*Pooler]struct{}{}
)

func killAllPoolers() {
	poolersMu.Lock()
	defer poolersMu.Unlock()
	for p := range poolers {
		if p.cmd.Process != nil {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

var listeningRE = regexp.MustCompile(`listening on 127\.0\.0\.1:(\d+)`)

// startPooler writes ini and userlist into a fresh temp dir, starts the
// pooler with the ini path as its only argument, and waits for its
// "listening on 127.0.0.1:<port>" line. It is stopped in t.Cleanup.
func startPooler(t testing.TB, ini, userlist string) *Pooler {
	t.Helper()
	return startPoolerEnv(t, ini, userlist, nil)
}

// startPoolerEnv is startPooler with env (KEY=VALUE) added to the pooler's
// environment (NOTIFY_SOCKET, for one).
func startPoolerEnv(t testing.TB, ini, userlist string, env []string) *Pooler {
	t.Helper()
	bin := poolerBinary(t)
	p := launchPooler(t, ini, userlist, func(iniPath string) *exec.Cmd {
		cmd := exec.Command(bin, iniPath)
		cmd.Env = append(append(os.Environ(), "GOTRACEBACK=all"), env...)
		return cmd
	})
	p.waitStarted(func(log string) bool {
		if m := listeningRE.FindStringSubmatch(log); m != nil {
			p.Port, _ = strconv.Atoi(m[1])
			return true
		}
		return false
	}, "listening on 127.0.0.1:<port>")
	return p
}

// launchPooler writes ini and userlist into a fresh temp dir and starts
// the process command makes of the ini path, as the pooler's OS user,
// its output in the pooler's log; it is stopped in t.Cleanup.
func launchPooler(t testing.TB, ini, userlist string, command func(iniPath string) *exec.Cmd) *Pooler {
	t.Helper()
	c := needPG(t)
	dir := t.TempDir()
	authFile := filepath.Join(dir, "userlist.txt")
	ini = strings.NewReplacer("@PGPORT@", strconv.Itoa(c.port), "@AUTH_FILE@", authFile).Replace(ini)
	p := &Pooler{t: t, Dir: dir, IniPath: filepath.Join(dir, "pgbouncer.ini"), log: newLogBuffer(), ini: ini}
	if err := os.WriteFile(authFile, []byte(userlist), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.IniPath, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd = command(p.IniPath)
	p.cmd.Dir = dir
	p.cmd.Stdout = p.log
	p.cmd.Stderr = p.log
	p.cmd.SysProcAttr = poolerProcAttr(dir) // not root (runas_test.go)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", p.cmd.Args, err)
	}
	p.exited = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	poolersMu.Lock()
	poolers[p] = struct{}{}
	poolersMu.Unlock()
	t.Cleanup(p.stop)
	return p
}

// waitStarted waits up to 10 s until up says the log shows the process
// started (what names that line for the failure).
func (p *Pooler) waitStarted(up func(log string) bool, what string) {
	p.t.Helper()
	deadline := time.After(10 * time.Second)
	for !up(p.log.String()) {
		select {
		case <-p.exited:
			p.t.Fatalf("pooler exited during startup (%v); config:\n%s\nlog:\n%s", p.cmd.ProcessState, p.ini, p.log.String())
		case <-deadline:
			p.t.Fatalf("pooler did not log %q within 10s; config:\n%s\nlog:\n%s", what, p.ini, p.log.String())
		case <-p.log.changed():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the pooler now (SIGTERM, as in the cleanup) and runs the
// cleanup's checks on its log; the cleanup then does nothing.
func (p *Pooler) Stop() {
	p.t.Helper()
	p.stop()
}

func (p *Pooler) stop() {
	if p.stopped.Swap(true) {
		return
	}
	t := p.t
	defer func() {
		poolersMu.Lock()
		delete(poolers, p)
		poolersMu.Unlock()
	}()
	select {
	case <-p.exited:
		if p.dumped.Load() {
			t.Logf("pooler killed with SIGABRT for a goroutine dump; log:\n%s", p.log.String())
		} else {
			t.Errorf("pooler exited on its own before the test ended (%v); log:\n%s", p.cmd.ProcessState, p.log.String())
		}
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		t.Errorf("pooler did not exit within 5s of SIGTERM; killing it")
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	logText := p.log.String()
	for _, bad := range []string{"panic:", "WARNING: DATA RACE", "fatal error:"} {
		if strings.Contains(logText, bad) {
			t.Errorf("pooler log contains %q:\n%s", bad, logText)
			return
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("pooler log:\n%s", logText)
	}
}

// DumpGoroutines sends SIGABRT, which makes a Go program print every
// goroutine's stack to stderr (into the pooler log; GOTRACEBACK=all is set)
// and exit: use it when a test finds the pooler stuck. (SIGQUIT would do
// too, but the pooler handles it as a shutdown request.)
func (p *Pooler) DumpGoroutines() {
	p.dumped.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGABRT)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// AuthFile is the userlist.txt that startPooler wrote (@AUTH_FILE@).
func (p *Pooler) AuthFile() string { return filepath.Join(p.Dir, "userlist.txt") }

// WriteConfig replaces the pooler's ini (with @PGPORT@ and @AUTH_FILE@
// filled in as by startPooler) and userlist.txt; Reload makes it read them.
func (p *Pooler) WriteConfig(ini, userlist string) {
	p.t.Helper()
	ini = strings.NewReplacer("@PGPORT@", strconv.Itoa(pg.port), "@AUTH_FILE@", p.AuthFile()).Replace(ini)
	if err := os.WriteFile(p.AuthFile(), []byte(userlist), 0o600); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(p.IniPath, []byte(ini), 0o600); err != nil {
		p.t.Fatal(err)
	}
}

const reloadedLine = "got SIGHUP, re-reading config"

// Reload sends SIGHUP and waits for the pooler to log that it re-read its
// config; a "RELOAD failed" line or 10 s of silence fails the test.
func (p *Pooler) Reload() {
	p.t.Helper()
	before := strings.Count(p.log.String(), reloadedLine)
	failedBefore := strings.Count(p.log.String(), "RELOAD failed")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		p.t.Fatalf("SIGHUP: %v", err)
	}
	deadline := time.After(10 * time.Second)
	for {
		logText := p.log.String()
		if strings.Count(logText, reloadedLine) > before {
			return
		}
		if strings.Count(logText, "RELOAD failed") > failedBefore {
			p.t.Fatalf("pooler refused the reload; log:\n%s", logText)
		}
		select {
		case <-p.exited:
			p.t.Fatalf("pooler exited on SIGHUP (%v); log:\n%s", p.cmd.ProcessState, logText)
		case <-deadline:
			p.t.Fatalf("pooler did not log %q within 10s of SIGHUP; log:\n%s", reloadedLine, logText)
		case <-p.log.changed():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitLog waits up to timeout for the pooler's log to contain s: the log
// arrives through a pipe, after the client saw the effect.
func (p *Pooler) WaitLog(s string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for !p.LogContains(s) {
		select {
		case <-p.log.changed():
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			return false
		}
	}
	return true
}

// LogContains reports whether the pooler's stdout/stderr so far contains s.
func (p *Pooler) LogContains(s string) bool { return strings.Contains(p.log.String(), s) }

// Log returns everything the pooler wrote so far.
func (p *Pooler) Log() string { return p.log.String() }

// Alive fails the test if the pooler process has exited.
func (p *Pooler) Alive(t testing.TB) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("pooler died (%v); log:\n%s", p.cmd.ProcessState, p.log.String())
	default:
	}
}

// Addr is the pooler's TCP address.
func (p *Pooler) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.Port) }

// ConnString is a libpq-style connection string to the pooler (understood by
// pgx, lib/pq and psql). An empty password is left out.
func (p *Pooler) ConnString(db, user, password string) string {
	s := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s sslmode=disable connect_timeout=10", p.Port, db, user)
	if password != "" {
		s += " password=" + password
	}
	return s
}

// App is ConnString for app@appdb.
func (p *Pooler) App() string { return p.ConnString(appDB, appUser, appPassword) }

// logBuffer is an io.Writer safe for concurrent use that wakes waiters.
type logBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{notify: make(chan struct{})} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	close(b.notify)
	b.notify = make(chan struct{})
	return n, err
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.notify
}

// ---------------------------------------------------------------------------
// Clients

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// pgxConfig parses connstr and selects QueryExecModeExec (unnamed statements,
// one round trip), which works through any transaction pooler. Tests that
// need pgx's default statement cache set it back themselves.
func pgxConfig(t testing.TB, connstr string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(connstr)
	if err != nil {
		t.Fatalf("parse %q: %v", connstr, err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	return cfg
}

// tryConnectPgx connects with cfg and closes the conn in t.Cleanup.
func tryConnectPgx(t testing.TB, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn, nil
}

// connectPgx connects to connstr (see pgxConfig) or fails the test.
func connectPgx(t testing.TB, connstr string) *pgx.Conn {
	t.Helper()
	conn, err := tryConnectPgx(t, pgxConfig(t, connstr))
	if err != nil {
		t.Fatalf("connect %q: %v", connstr, err)
	}
	return conn
}

// connectPq opens a database/sql pool on lib/pq and pings it.
func connectPq(t testing.TB, connstr string) *sql.DB {
	t.Helper()
	db, err := sql.Open("postgres", connstr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("lib/pq ping %q: %v", connstr, err)
	}
	return db
}

// queryInt runs a one-value query and returns it as int64.
func queryInt(t testing.TB, conn *pgx.Conn, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(ctxT(t, 10*time.Second), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// queryText runs a one-value query and returns it as a string.
func queryText(t testing.TB, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(ctxT(t, 10*time.Second), sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// selectOne asserts that connstr answers SELECT 1 through a fresh connection.
func selectOne(t testing.TB, connstr string) {
	t.Helper()
	conn := connectPgx(t, connstr)
	if n := queryInt(t, conn, "SELECT 1"); n != 1 {
		t.Fatalf("SELECT 1 = %d", n)
	}
	_ = conn.Close(context.Background())
}

// asPgError returns err's *pgconn.PgError or fails the test.
func asPgError(t testing.TB, err error) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("want a server error (ErrorResponse), got %T: %v", err, err)
	}
	return pgErr
}

// wantPgError asserts err is an ErrorResponse with this SQLSTATE and message.
// An empty severity or message is not checked.
func wantPgError(t testing.TB, err error, severity, code, message string) *pgconn.PgError {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s %q, got success", code, message)
	}
	e := asPgError(t, err)
	if e.Code != code || (severity != "" && e.Severity != severity) || (message != "" && e.Message != message) {
		t.Fatalf("want %s %s %q, got %s %s %q", severity, code, message, e.Severity, e.Code, e.Message)
	}
	return e
}

// psqlPath is the client on PATH in CI (Debian's wrapper picks version 15).
const psqlPath = "/usr/bin/psql"

func clientEnv(password string) []string {
	env := append(os.Environ(), "PGCONNECT_TIMEOUT=10", "PGSSLMODE=disable", "PSQLRC=/dev/null", "PGAPPNAME=")
	if password != "" {
		env = append(env, "PGPASSWORD="+password)
	} else {
		env = append(env, "PGPASSWORD=")
	}
	return env
}

// psql runs psql -X -v ON_ERROR_STOP=1 with args and returns stdout, stderr
// and the exit error.
func psql(t testing.TB, password string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return psqlWith(t, func(*exec.Cmd) {}, password, args...)
}

// psqlWith is psql with setup applied to the command before it runs.
func psqlWith(t testing.TB, setup func(*exec.Cmd), password string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t, 30*time.Second), psqlPath, append([]string{"-X", "-v", "ON_ERROR_STOP=1"}, args...)...)
	cmd.Env = clientEnv(password)
	setup(cmd)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// pgbench runs the pgbench from pgtest.BinDir with args and returns its combined
// output. It is killed after 60 s: a -T 10 run that outlives that is stuck.
func pgbench(t testing.TB, password string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t, 60*time.Second), filepath.Join(pgtest.BinDir, "pgbench"), args...)
	cmd.Env = clientEnv(password)
	out := newLogBuffer()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return out.String(), err
}

// ---------------------------------------------------------------------------
// Looking at Postgres directly

// directSuperuser is a pgx conn straight to Postgres as postgres (unix
// socket, trust), closed in t.Cleanup.
func directSuperuser(t testing.TB, db string) *pgx.Conn {
	t.Helper()
	c := needPG(t)
	conn, err := pgx.Connect(ctxT(t, 10*time.Second), c.superuserConnString(db))
	if err != nil {
		t.Fatalf("direct superuser connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

const countBackendsSQL = `SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
  AND ($1 = '' OR datname = $1) AND ($2 = '' OR usename = $2)`

// countBackends returns the number of client backends connected to db as
// user right now (an empty db or user matches any), not counting the
// monitoring connection itself.
func countBackends(t testing.TB, db, user string) int {
	t.Helper()
	n, err := pg.countBackends(db, user)
	if err != nil {
		t.Fatalf("counting backends: %v", err)
	}
	return n
}

func (c *cluster) countBackends(db, user string) (int, error) {
	c.monitorMu.Lock()
	defer c.monitorMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	err := c.monitor.QueryRow(ctx, countBackendsSQL, db, user).Scan(&n)
	return n, err
}

// waitBackends waits until countBackends(db, user) satisfies ok, or fails.
func waitBackends(t testing.TB, db, user string, timeout time.Duration, what string, ok func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n := countBackends(t, db, user)
		if ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("backends for db=%q user=%q: %d after %v, want %s", db, user, n, timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitNoBackends waits for leftovers of earlier tests (a stopped pooler's
// servers) to leave, so caps are measured from zero.
func waitNoBackends(t testing.TB, db, user string) {
	t.Helper()
	waitBackends(t, db, user, 10*time.Second, "0", func(n int) bool { return n == 0 })
}

// backendSampler polls countBackends every interval in the background and
// keeps the maximum seen.
type backendSampler struct {
	db, user string
	stopCh   chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	max      int
	samples  int
	err      error
}

func sampleBackends(t testing.TB, db, user string, interval time.Duration) *backendSampler {
	s := &backendSampler{db: db, user: user, stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			n, err := pg.countBackends(db, user)
			s.mu.Lock()
			if err != nil && s.err == nil {
				s.err = err
			}
			if n > s.max {
				s.max = n
			}
			s.samples++
			s.mu.Unlock()
			select {
			case <-s.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop ends sampling and returns the maximum and the number of samples.
func (s *backendSampler) stop(t testing.TB) (maxSeen, samples int) {
	t.Helper()
	select {
	case <-s.stopCh:
	default:
		close(s.stopCh)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		t.Errorf("sampling pg_stat_activity: %v", s.err)
	}
	return s.max, s.samples
}

func parseInt(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return n
}

// scratchDatabase creates database name on su's server (owned by owner
// when not ""), dropped with its connections when the test ends.
func scratchDatabase(t testing.TB, ctx context.Context, su *pgx.Conn, name, owner string) {
	t.Helper()
	q := "CREATE DATABASE " + name
	if owner != "" {
		q += " OWNER " + owner
	}
	if _, err := su.Exec(ctx, q); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = su.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
}
