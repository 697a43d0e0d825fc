package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// The roles: benchUser runs statements through the pool, adminUser is in
// admin_users and statsUser in stats_users. All three exist in PostgreSQL
// (so that PostgreSQL computes their SCRAM secrets); the poolers' userlist
// holds those secrets, not the passwords. A client logs in to a pooler with
// the password; the pooler logs in to PostgreSQL with the keys the client's
// SCRAM exchange proved (SCRAM pass-through), as both poolers do when the
// userlist holds a SCRAM secret.
const (
	benchUser = "bench"
	adminUser = "hostile_admin"
	statsUser = "hostile_stats"
	password  = "hostile-secret"
	benchDB   = "bench"
	consoleDB = "pgbouncer"
)

// env is one run's throwaway world: a temp dir, PostgreSQL and the pooler
// processes, all removed by close. It is pgbench-compare's env cut down to
// what this tool needs (that one is package main, so it cannot be imported).
type env struct {
	dir     string
	pgBin   string
	pgPort  int
	sockDir string
	asPG    bool // we are root: run PostgreSQL and PgBouncer as the postgres OS user
	cred    *syscall.Credential
	procs   []*proc
	pgUp    bool
	// noPrepared: this PgBouncer predates max_prepared_statements (1.21)
	// and refuses to start with it in its ini, so its ini leaves it out.
	noPrepared bool
	secrets    map[string]string // role → SCRAM secret from pg_authid
}

// proc is one started pooler.
type proc struct {
	name    string
	kind    string // kindTurnstile or kindBouncer
	port    int
	logPath string // where its log lines go (PgBouncer's logfile, pgturnstile's stderr)
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func newEnv(pgBin string) (*env, error) {
	e := &env{pgBin: pgBin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("running as root needs a 'postgres' OS user for PostgreSQL and PgBouncer")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		e.asPG = true
		e.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "pgturnstile-hostilemem.")
	if err != nil {
		return nil, err
	}
	e.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	e.sockDir = filepath.Join(dir, "sock")
	for _, d := range []string{filepath.Join(dir, "data"), e.sockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
		if err := e.chown(d); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *env) chown(path string) error {
	if !e.asPG {
		return nil
	}
	return os.Chown(path, int(e.cred.Uid), int(e.cred.Gid))
}

// command runs name as the postgres OS user when we are root.
func (e *env) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = e.dir
	if e.asPG {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	}
	return cmd
}

// freePort picks a port below 32768 (outside the ephemeral range, so a
// client socket cannot take it between our check and the listener's bind).
func freePort() (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, errors.New("no free port in 20000-32000")
}

// startPostgres initdb's and starts a small PostgreSQL 15, creates the three
// roles and the bench database, and reads the roles' SCRAM secrets.
func (e *env) startPostgres() error {
	data := filepath.Join(e.dir, "data")
	out, err := e.command(filepath.Join(e.pgBin, "initdb"), "-D", data, "-U", "postgres", "-E", "UTF8",
		"--no-locale", "--no-sync", "--auth-local=trust", "--auth-host=scram-sha-256").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	e.pgPort = port
	conf := fmt.Sprintf(`
# pgturnstile hostilemem: throwaway.
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 100
shared_buffers = 128MB
fsync = off
synchronous_commit = off
full_page_writes = off
password_encryption = 'scram-sha-256'
log_min_messages = warning
`, port, e.sockDir)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(conf)
	f.Close()
	if err != nil {
		return err
	}
	logPath := filepath.Join(e.dir, "postgres.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		return err
	}
	if err := e.chown(logPath); err != nil {
		return err
	}
	e.pgUp = true
	out, err = e.command(filepath.Join(e.pgBin, "pg_ctl"), "-D", data, "-l", logPath, "-w", "-t", "60", "start").CombinedOutput()
	if err != nil {
		lg, _ := os.ReadFile(logPath)
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, lg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", e.sockDir, port))
	if err != nil {
		return fmt.Errorf("connect as postgres: %v", err)
	}
	defer c.Close(ctx)
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", benchUser, password),
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", adminUser, password),
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", statsUser, password),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", benchDB, benchUser),
	} {
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("%s: %v", q, err)
		}
	}
	res, err := c.Exec(ctx, "SELECT rolname, rolpassword FROM pg_authid WHERE rolpassword LIKE 'SCRAM-SHA-256$%'").ReadAll()
	if err != nil {
		return fmt.Errorf("read SCRAM secrets: %v", err)
	}
	e.secrets = map[string]string{}
	for _, row := range res[0].Rows {
		e.secrets[string(row[0])] = string(row[1])
	}
	for _, u := range []string{benchUser, adminUser, statsUser} {
		if e.secrets[u] == "" {
			return fmt.Errorf("no SCRAM secret for %s in pg_authid", u)
		}
	}
	return nil
}

// poolerINI is the one config both poolers get. Everything not named here
// is each pooler's default (max_packet_size, pkt_buf, and pgturnstile's
// max_held_message_size, held_message_budget and prepared_statement_budget).
func (e *env) poolerINI(name, kind string, port int, extra string) (string, error) {
	userlist := filepath.Join(e.dir, "userlist.txt")
	var ul strings.Builder
	for _, u := range []string{benchUser, adminUser, statsUser} {
		fmt.Fprintf(&ul, "%q %q\n", u, e.secrets[u])
	}
	if err := os.WriteFile(userlist, []byte(ul.String()), 0o644); err != nil {
		return "", err
	}
	prepared := "max_prepared_statements = 200\n"
	if kind == kindBouncer && e.noPrepared {
		prepared = ""
	}
	ini := fmt.Sprintf(`[databases]
%s = host=127.0.0.1 port=%d dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
admin_users = %s
stats_users = %s
pool_mode = transaction
%sdefault_pool_size = 20
max_client_conn = 100
%s`, benchDB, e.pgPort, benchDB, port, userlist, adminUser, statsUser, prepared, extra)
	path := filepath.Join(e.dir, name+".ini")
	return path, os.WriteFile(path, []byte(ini), 0o644)
}

const (
	kindTurnstile = "pgturnstile"
	kindBouncer   = "PgBouncer"
)

// startPooler starts a pooler on a free port and waits until the bench role
// can run a query through it.
func (e *env) startPooler(name, kind, bin string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	stderrPath := filepath.Join(e.dir, name+".stderr")
	logPath := stderrPath
	extra := ""
	if kind == kindBouncer {
		logPath = filepath.Join(e.dir, name+".log")
		extra = "logfile = " + logPath + "\n"
		if err := os.WriteFile(logPath, nil, 0o644); err != nil {
			return nil, err
		}
		if err := e.chown(logPath); err != nil {
			return nil, err
		}
	}
	ini, err := e.poolerINI(name, kind, port, extra)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if kind == kindBouncer {
		cmd = e.command(bin, "-q", ini) // PgBouncer refuses to run as root
	} else {
		cmd = exec.Command(bin, ini)
		cmd.Dir = e.dir
	}
	lf, err := os.OpenFile(stderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %v", name, err)
	}
	p := &proc{name: name, kind: kind, port: port, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	e.procs = append(e.procs, p)
	go func() { p.err = cmd.Wait(); lf.Close(); close(p.done) }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := queryOnce(ctx, port)
		cancel()
		if err == nil {
			return p, nil
		}
		if !p.alive() || time.Now().After(deadline) {
			out, _ := os.ReadFile(stderrPath)
			lg, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s did not come up on port %d: %v\n%s%s", name, port, err, out, lg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func connString(port int, user, db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=disable connect_timeout=10",
		port, user, password, db)
}

func queryOnce(ctx context.Context, port int) error {
	c, err := pgconn.Connect(ctx, connString(port, benchUser, benchDB))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "SELECT 1").ReadAll()
	return err
}

// showConfig returns the values SHOW CONFIG gives for keys, read through the
// console as the admin user ("" for a key the pooler does not have).
func showConfig(port int, keys []string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, connString(port, adminUser, consoleDB))
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	res, err := c.Exec(ctx, "SHOW CONFIG").ReadAll()
	if err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, errors.New("SHOW CONFIG: no result")
	}
	ki, vi := -1, -1
	for i, fd := range res[0].FieldDescriptions {
		switch fd.Name {
		case "key":
			ki = i
		case "value":
			vi = i
		}
	}
	if ki < 0 || vi < 0 {
		return nil, errors.New("SHOW CONFIG: no key/value columns")
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	got := map[string]string{}
	for _, row := range res[0].Rows {
		if k := string(row[ki]); want[k] {
			got[k] = string(row[vi])
		}
	}
	return got, nil
}

// stopPooler stops p with SIGTERM (immediate shutdown for both poolers),
// then SIGKILL.
func (e *env) stopPooler(p *proc) {
	if !p.alive() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (e *env) close(keep bool) {
	for _, p := range e.procs {
		e.stopPooler(p)
	}
	if e.pgUp {
		e.command(filepath.Join(e.pgBin, "pg_ctl"), "-D", filepath.Join(e.dir, "data"), "-m", "immediate", "-w", "stop").Run()
	}
	if keep {
		fmt.Fprintln(os.Stderr, "hostilemem: kept", e.dir)
		return
	}
	os.RemoveAll(e.dir)
}

// bouncerPredatesPrepared tells from `pgbouncer --version`'s first line
// ("PgBouncer 1.18.0") whether it is older than 1.21, the first version
// with max_prepared_statements.
func bouncerPredatesPrepared(version string) bool {
	f := strings.Fields(version)
	if len(f) < 2 {
		return false
	}
	parts := strings.SplitN(f[1], ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return major < 1 || major == 1 && minor < 21
}

// rssKB returns VmRSS of pid in KiB.
func rssKB(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			return strconv.ParseInt(fs[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
