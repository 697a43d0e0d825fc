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

// The role and database every target is driven as. The password is plain in
// the poolers' userlist and SCRAM-SHA-256 in PostgreSQL, so clients log in
// with SCRAM to the pooler and the pooler logs in with SCRAM to PostgreSQL.
const (
	benchUser = "bench"
	benchPass = "bench-secret"
	benchDB   = "bench"
)

// env is the throwaway world of one benchmark run: a temp dir, a PostgreSQL
// and the pooler processes, all removed by close.
type env struct {
	dir     string
	pgBin   string
	pgPort  int
	sockDir string
	asPG    bool // we are root: run PostgreSQL and PgBouncer as the postgres OS user
	cred    *syscall.Credential
	procs   []*proc
	pgUp    bool
	log     func(format string, args ...any)
}

// proc is one started pooler.
type proc struct {
	name string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	err  error
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

func newEnv(pgBin string, logf func(string, ...any)) (*env, error) {
	e := &env{pgBin: pgBin, log: logf}
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
	dir, err := os.MkdirTemp("", "pgturnstile-bench.")
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

// startPostgres initdb's and starts a PostgreSQL tuned for benchmarking the
// poolers rather than the disk, creates the bench role and database.
func (e *env) startPostgres(sharedBuffers string) error {
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
# pgturnstile bench: throwaway, tuned to measure poolers, not the disk.
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 700
shared_buffers = %s
fsync = off
synchronous_commit = off
full_page_writes = off
max_wal_size = 4GB
checkpoint_timeout = 30min
password_encryption = 'scram-sha-256'
log_min_messages = warning
log_connections = off
`, port, e.sockDir, sharedBuffers)
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
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", benchUser, benchPass),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", benchDB, benchUser),
	} {
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("%s: %v", q, err)
		}
	}
	return nil
}

// pgbenchInit fills the bench database at the given scale, as the bench role.
func (e *env) pgbenchInit(scale int) error {
	cmd := exec.Command("pgbench", "-i", "-q", "-s", strconv.Itoa(scale), "-h", "127.0.0.1",
		"-p", strconv.Itoa(e.pgPort), "-U", benchUser, benchDB)
	cmd.Env = pgbenchEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgbench -i: %v\n%s", err, out)
	}
	return nil
}

func pgbenchEnv() []string {
	return append(os.Environ(), "PGPASSWORD="+benchPass, "PGSSLMODE=disable", "PGGSSENCMODE=disable",
		"PGAPPNAME=", "PGOPTIONS=")
}

// iniOpts is what one pooler instance's ini differs in.
type iniOpts struct {
	// PoolSize is default_pool_size; 0 means the benchmark's 20.
	PoolSize int
	// Extra is appended to the [pgbouncer] section, one "key = value" a
	// line (logfile for PgBouncer, admission_file for pgturnstile).
	Extra string
}

// poolerINI is the one config both poolers get: transaction pooling, pool of
// 20 (the overload scenario: 4), SCRAM for clients (plain password in the
// userlist, which both also use to log in to PostgreSQL), logging of each
// login and logout off (PgBouncer and pgturnstile both log them by default,
// which would dominate -C).
func (e *env) poolerINI(name string, port int, o iniOpts) (string, error) {
	poolSize := o.PoolSize
	if poolSize == 0 {
		poolSize = 20
	}
	userlist := filepath.Join(e.dir, "userlist.txt")
	if err := os.WriteFile(userlist, fmt.Appendf(nil, "%q %q\n", benchUser, benchPass), 0o644); err != nil {
		return "", err
	}
	ini := fmt.Sprintf(`[databases]
%s = host=127.0.0.1 port=%d dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 6000
log_connections = 0
log_disconnections = 0
%s`, benchDB, e.pgPort, benchDB, port, userlist, poolSize, o.Extra)
	path := filepath.Join(e.dir, name+".ini")
	return path, os.WriteFile(path, []byte(ini), 0o644)
}

// startPooler starts a pooler (kind "pgbouncer" or "pgturnstile") on a free
// port and waits until the bench role can run a query through it.
func (e *env) startPooler(name, kind, bin string, envv []string, io iniOpts) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(e.dir, name+".log")
	if kind == "pgbouncer" {
		io.Extra = "logfile = " + logPath + "\n" + io.Extra
		if err := os.WriteFile(logPath, nil, 0o644); err != nil {
			return nil, err
		}
		if err := e.chown(logPath); err != nil {
			return nil, err
		}
	}
	ini, err := e.poolerINI(name, port, io)
	if err != nil {
		return nil, err
	}
	var cmd *exec.Cmd
	if kind == "pgbouncer" {
		cmd = e.command(bin, "-q", ini) // PgBouncer refuses to run as root
	} else {
		cmd = exec.Command(bin, ini)
		cmd.Dir = e.dir
	}
	cmd.Env = append(os.Environ(), envv...)
	lf, err := os.OpenFile(filepath.Join(e.dir, name+".stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %v", name, err)
	}
	p := &proc{name: name, port: port, cmd: cmd, done: make(chan struct{})}
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
			out, _ := os.ReadFile(filepath.Join(e.dir, name+".stderr"))
			lg, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s did not come up on port %d: %v\n%s%s", name, port, err, out, lg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func connString(port int) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=disable",
		port, benchUser, benchPass, benchDB)
}

func queryOnce(ctx context.Context, port int) error {
	c, err := pgconn.Connect(ctx, connString(port))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "SELECT 1").ReadAll()
	return err
}

// stopPooler stops p with SIGTERM (immediate shutdown for both poolers;
// SIGINT would be PgBouncer's wait-for-clients shutdown), then SIGKILL.
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
		e.log("kept %s", e.dir)
		return
	}
	os.RemoveAll(e.dir)
}

// ---------------------------------------------------------------------------
// /proc readings

// clkTck is USER_HZ, the unit of utime/stime in /proc/PID/stat; 100 on every
// Linux architecture Go runs on.
const clkTck = 100

// cpuTicks is utime+stime of pid (all its threads), in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatTicks(string(b))
}

// parseStatTicks reads fields 14 (utime) and 15 (stime) of a /proc/PID/stat
// line. The comm field (2) may hold spaces and parentheses, so fields are
// counted from its closing parenthesis.
func parseStatTicks(s string) (int64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14 → f[11], stime f[12].
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad utime/stime in /proc stat")
	}
	return u + st, nil
}

// procStatusKB returns a "Vm…:" field of /proc/PID/status in KiB.
func procStatusKB(pid int, field string) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			return strconv.ParseInt(fs[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux ≥ 4.0),
// so that each run reports its own peak.
func resetPeakRSS(pid int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

// raiseNoFile lifts RLIMIT_NOFILE to its hard limit; the poolers, pgbench
// and PostgreSQL inherit it (500 clients, 5,000 idle connections).
func raiseNoFile() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	r.Cur = r.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	return r.Cur, nil
}
