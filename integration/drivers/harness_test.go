//go:build linux

package drivers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// The scenario sizes every driver uses (the programs get them in the
// environment, see target.env).
const (
	numClients     = 10      // concurrent clients per run
	txnsPerClient  = 100     // prepared: transactions per client (1,000 in all)
	pipelineLength = 60      // statements per pipeline/batch
	bigRows        = 100_000 // rows: rows in the big result; copy: rows copied
	errorRounds    = 3       // error: rounds per client
)

// ---------------------------------------------------------------------------
// The pooler

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// poolerBinary builds ./cmd/pgturnstile once (or returns $PGTURNSTILE_BIN).
func poolerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := filepath.Abs("../..")
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

// pooler is one running pgturnstile process.
type pooler struct {
	t      testing.TB
	port   int
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
}

var (
	procsMu sync.Mutex
	procs   = map[*exec.Cmd]struct{}{} // poolers still running, killed by killAll
)

func killAll() {
	procsMu.Lock()
	defer procsMu.Unlock()
	for cmd := range procs {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}

var listeningRE = regexp.MustCompile(`listening on 127\.0\.0\.1:(\d+)`)

// startPooler runs pgturnstile in transaction mode in front of pg with
// default_pool_size = poolSize, and stops it in t.Cleanup.
func startPooler(t testing.TB, poolSize int) *pooler {
	t.Helper()
	bin := poolerBinary(t)
	dir := t.TempDir()
	authFile := filepath.Join(dir, "userlist.txt")
	ini := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 0
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 200
query_wait_timeout = 60
; pgjdbc sends extra_float_digits at startup; like PgBouncer, pgturnstile
; refuses startup parameters it does not track unless told to ignore them.
ignore_startup_parameters = extra_float_digits
`, pg.port, authFile, poolSize)
	if err := os.WriteFile(authFile, fmt.Appendf(nil, "%q %q\n", drvUser, drvPassword), 0o600); err != nil {
		t.Fatal(err)
	}
	iniPath := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(iniPath, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &pooler{t: t, log: newSyncBuffer(), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, iniPath)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = pgtest.PoolerProcAttr(pg.cred, dir) // not root
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting pooler: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	procsMu.Lock()
	procs[p.cmd] = struct{}{}
	procsMu.Unlock()
	t.Cleanup(p.stop)

	deadline := time.After(10 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(p.log.String()); m != nil {
			p.port, _ = strconv.Atoi(m[1])
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("pooler exited during startup (%v); log:\n%s", p.cmd.ProcessState, p.log.String())
		case <-deadline:
			t.Fatalf("pooler did not log \"listening on 127.0.0.1:<port>\" within 10s; log:\n%s", p.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *pooler) stop() {
	t := p.t
	defer func() {
		procsMu.Lock()
		delete(procs, p.cmd)
		procsMu.Unlock()
	}()
	select {
	case <-p.exited:
		t.Errorf("pooler exited before the test ended (%v); log:\n%s", p.cmd.ProcessState, p.log.String())
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
	if t.Failed() {
		t.Logf("pooler log (last 60 lines):\n%s", lastLines(logText, 60))
	}
}

// syncBuffer is an io.Writer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func lastLines(s string, n int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

// ---------------------------------------------------------------------------
// Targets and databases

// target is where a run connects: Postgres itself or a pooler in front of
// it. Each run gets a database of its own, so direct and pooled runs never
// see each other's rows.
type target struct {
	name string // "direct" or "pgturnstile"
	port int
	db   string
}

// connString is a libpq keyword/value string (pgx, lib/pq, psql).
func (tg target) connString() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=disable connect_timeout=10",
		tg.port, tg.db, drvUser, drvPassword)
}

// env is the libpq environment for psql, pgbench, psycopg and node-postgres,
// plus the scenario sizes for the programs.
func (tg target) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") { // no stray PGOPTIONS, PGTZ, PGSERVICE…
			env = append(env, kv)
		}
	}
	return append(env,
		"PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(tg.port), "PGDATABASE="+tg.db,
		"PGUSER="+drvUser, "PGPASSWORD="+drvPassword, "PGSSLMODE=disable",
		"PGCONNECT_TIMEOUT=10", "PSQLRC=/dev/null",
		"DRV_CLIENTS="+strconv.Itoa(numClients),
		"DRV_TXNS="+strconv.Itoa(txnsPerClient),
		"DRV_PIPELINE="+strconv.Itoa(pipelineLength),
		"DRV_ROWS="+strconv.Itoa(bigRows),
		"DRV_ERROR_ROUNDS="+strconv.Itoa(errorRounds),
		"DRV_COPY_FILE="+copyFile(),
		"DRV_TARGET="+tg.name,
	)
}

// fixtures are created in every run's database, as drvUser.
const fixtures = `
CREATE TABLE prep_log (client int NOT NULL, seq int NOT NULL, PRIMARY KEY (client, seq));
CREATE TABLE pipe_t (client int NOT NULL, i int NOT NULL, v text, PRIMARY KEY (client, i));
CREATE TABLE copy_t (id int, t text, n numeric, b bytea, ts timestamptz);
CREATE TABLE copy_bin (LIKE copy_t);
CREATE TABLE err_t (client int);
CREATE TABLE pgb_log (id bigserial PRIMARY KEY, client int NOT NULL, v int);
CREATE FUNCTION tagged_fail(id int) RETURNS int LANGUAGE plpgsql AS
  $$BEGIN RAISE EXCEPTION 'client % failed', id; END$$;
CREATE SCHEMA sp_a; CREATE TABLE sp_a.sp_probe (v text); INSERT INTO sp_a.sp_probe VALUES ('sp_a');
CREATE SCHEMA "Sp_B"; CREATE TABLE "Sp_B".sp_probe (v text); INSERT INTO "Sp_B".sp_probe VALUES ('Sp_B');
CREATE SCHEMA sp_c; CREATE TABLE sp_c.sp_probe (v text); INSERT INTO sp_c.sp_probe VALUES ('sp_c');
`

var dbMu sync.Mutex // serialises CREATE DATABASE on pg.admin

// newDatabase creates database name, owned by drvUser, with the fixtures.
func newDatabase(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dbMu.Lock()
	_, err := pg.admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", name, drvUser))
	dbMu.Unlock()
	if err != nil {
		t.Fatalf("CREATE DATABASE %s: %v", name, err)
	}
	conn, err := pgx.Connect(ctx, target{port: pg.port, db: name}.connString())
	if err != nil {
		t.Fatalf("connect to %s: %v", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fixtures); err != nil {
		t.Fatalf("fixtures in %s: %v", name, err)
	}
}

var dbNameRE = regexp.MustCompile(`[^a-z0-9]+`)

// ---------------------------------------------------------------------------
// Running a driver against both targets

// runFunc runs one driver's scenarios against tg and returns its result
// lines, "<scenario> <result…>". A scenario that fails on the driver's side
// reports "<scenario> ERROR …" (and may also fail t).
type runFunc func(t *testing.T, tg target) []string

// runBoth runs fn against Postgres and through a fresh pgturnstile
// (transaction mode, pool of 2), one after the other, and checks that both
// give the lines of testdata/<driver>.golden. The result of each scenario is
// recorded for the matrix table TestMain prints.
func runBoth(t *testing.T, driver string, fn runFunc) {
	t0 := time.Now()
	copyFile()
	p := startPooler(t, 2)
	t.Logf("pooler up in %v", time.Since(t0).Round(time.Millisecond))
	base := "d_" + dbNameRE.ReplaceAllString(strings.ToLower(driver), "_")
	targets := []target{
		{name: "direct", port: pg.port, db: base + "_direct"},
		{name: "pgturnstile", port: p.port, db: base + "_pooled"},
	}
	out := make([][]string, len(targets))
	for i, tg := range targets {
		t0 := time.Now()
		newDatabase(t, tg.db)
		t.Logf("database %s created in %v", tg.db, time.Since(t0).Round(time.Millisecond))
		t.Run(tg.name, func(t *testing.T) {
			start := time.Now()
			out[i] = fn(t, tg)
			t.Logf("%s via %s: %d lines in %v", driver, tg.name, len(out[i]), time.Since(start).Round(time.Millisecond))
		})
	}

	goldenPath := filepath.Join("testdata", dbNameRE.ReplaceAllString(strings.ToLower(driver), "-")+".golden")
	if *update {
		if slices.ContainsFunc(out[0], isErrorLine) {
			t.Fatalf("-update: the direct run has ERROR lines, not writing %s:\n%s", goldenPath, strings.Join(out[0], "\n"))
		}
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, []byte(strings.Join(out[0], "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("no golden file (run `go test ./integration/drivers -run '%s' -update` against a good build): %v", t.Name(), err)
	}
	golden := strings.Split(strings.TrimRight(string(b), "\n"), "\n")

	want := byScenario(golden)
	copyFile()
	for sc, l := range canonical {
		if _, ok := want[sc]; ok {
			want[sc] = []string{l}
		}
	}
	if _, ok := want["copy"]; ok {
		want["copy"] = []string{copyResult("copy", copyBytes)}
	}
	for sc, lines := range byScenario(golden) {
		if !slices.Equal(lines, want[sc]) {
			t.Errorf("%s: scenario %s must print\n  %s\nbut the golden file has\n  %s", goldenPath, sc,
				strings.Join(want[sc], "\n  "), strings.Join(lines, "\n  "))
		}
	}
	for i, tg := range targets {
		got := byScenario(out[i])
		for _, sc := range scenarioNames(golden, out[i]) {
			ok := slices.Equal(got[sc], want[sc]) && !slices.ContainsFunc(got[sc], isErrorLine)
			matrix.record(driver, sc, tg.name, ok)
			if !ok {
				t.Errorf("%s via %s, scenario %s:\n got: %s\nwant: %s", driver, tg.name, sc,
					strings.Join(got[sc], "\n      "), strings.Join(want[sc], "\n      "))
			}
		}
	}
	if !slices.Equal(out[0], out[1]) {
		t.Errorf("%s: direct and pgturnstile runs differ:\n%s", driver, lineDiff(out[0], out[1]))
	}
}

func isErrorLine(l string) bool {
	f := strings.Fields(l)
	return len(f) > 1 && f[1] == "ERROR"
}

func scenarioOf(line string) string {
	s, _, _ := strings.Cut(line, " ")
	return s
}

func byScenario(lines []string) map[string][]string {
	m := map[string][]string{}
	for _, l := range lines {
		m[scenarioOf(l)] = append(m[scenarioOf(l)], l)
	}
	return m
}

// scenarioNames lists the scenarios of a and b in order of first appearance.
func scenarioNames(a, b []string) []string {
	var names []string
	for _, l := range append(slices.Clone(a), b...) {
		if s := scenarioOf(l); !slices.Contains(names, s) {
			names = append(names, s)
		}
	}
	return names
}

func lineDiff(a, b []string) string {
	var sb strings.Builder
	for _, l := range a {
		if !slices.Contains(b, l) {
			fmt.Fprintf(&sb, "- direct:      %s\n", l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			fmt.Fprintf(&sb, "+ pgturnstile: %s\n", l)
		}
	}
	if sb.Len() == 0 {
		sb.WriteString("(same lines, different order)\n")
	}
	return sb.String()
}

// line formats one result line.
func line(scenario string, kv ...any) string {
	var sb strings.Builder
	sb.WriteString(scenario)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&sb, " %v=%v", kv[i], kv[i+1])
	}
	return sb.String()
}

func errLine(scenario string, err error) string {
	s := strings.ReplaceAll(fmt.Sprint(err), "\n", " | ")
	if len(s) > 600 {
		s = s[:300] + " … " + s[len(s)-300:]
	}
	return scenario + " ERROR " + s
}

// ---------------------------------------------------------------------------
// The matrix table

type matrixTable struct {
	mu   sync.Mutex
	rows []string                      // drivers in order of first result
	cols []string                      // scenarios in order of first result
	cell map[[2]string]map[string]bool // (driver, scenario) → target → pass
}

// scenarioOrder orders the table's columns.
var scenarioOrder = []string{"prepared", "transactions", "pipeline", "pipelines", "queued", "batch",
	"copy", "copy_binary", "error", "rows", "rows_fetch", "rows_cursor", "rows_server_cursor", "types",
	"no_cross_talk", "load"}

var matrix = &matrixTable{cell: map[[2]string]map[string]bool{}}

func (m *matrixTable) record(driver, scenario, target string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.rows, driver) {
		m.rows = append(m.rows, driver)
	}
	if !slices.Contains(m.cols, scenario) {
		m.cols = append(m.cols, scenario)
	}
	k := [2]string{driver, scenario}
	if m.cell[k] == nil {
		m.cell[k] = map[string]bool{}
	}
	m.cell[k][target] = ok
}

// table renders the matrix: one row per driver, one column per scenario,
// each cell "direct/pgturnstile" with pass, FAIL or n/a.
func (m *matrixTable) table() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.rows) == 0 {
		return ""
	}
	rows := slices.Clone(m.rows)
	sort.Strings(rows)
	cols := slices.Clone(m.cols)
	rank := func(c string) int {
		if i := slices.Index(scenarioOrder, c); i >= 0 {
			return i
		}
		return len(scenarioOrder)
	}
	slices.SortStableFunc(cols, func(a, b string) int { return rank(a) - rank(b) })
	word := func(c map[string]bool, tg string) string {
		ok, seen := c[tg]
		switch {
		case !seen:
			return "-"
		case ok:
			return "pass"
		}
		return "FAIL"
	}
	var sb strings.Builder
	sb.WriteString("\ndriver matrix (direct/pgturnstile):\n| driver | " + strings.Join(cols, " | ") + " |\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, r := range rows {
		sb.WriteString("| " + r + " |")
		for _, c := range cols {
			cell := m.cell[[2]string{r, c}]
			if cell == nil {
				sb.WriteString(" n/a |")
				continue
			}
			sb.WriteString(" " + word(cell, "direct") + "/" + word(cell, "pgturnstile") + " |")
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// ---------------------------------------------------------------------------
// External programs

// needTool returns the path of an executable or fails the test with the
// install command.
func needTool(t testing.TB, path string) string {
	t.Helper()
	p, err := exec.LookPath(path)
	if err != nil {
		t.Fatalf("%s not found: %v — install the driver matrix's dependencies with scripts/test-deps.sh", path, err)
	}
	return p
}

// needFile fails the test with the install command when path is missing.
func needFile(t testing.TB, path, what string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s missing (%v) — install the driver matrix's dependencies with scripts/test-deps.sh", what, err)
	}
}

// runProgram runs cmd (its Env already set) and returns its stdout lines,
// leaving out blank lines and "#" comments. A non-zero exit fails t with the
// program's stderr.
func runProgram(t *testing.T, cmd *exec.Cmd, timeout time.Duration) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		err = fmt.Errorf("killed after %v (%v)", timeout, err)
	}
	if err != nil {
		t.Errorf("%s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(cmd.Args, " "), err, lastLines(stderr.String(), 40), lastLines(stdout.String(), 40))
	} else if stderr.Len() > 0 && testing.Verbose() {
		t.Logf("%s stderr:\n%s", filepath.Base(cmd.Path), lastLines(stderr.String(), 20))
	}
	var lines []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		l = strings.TrimRight(l, "\r")
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}
