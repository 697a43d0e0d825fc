//go:build linux

// Package benchenv is the throwaway world the bench tools (pgbench-compare,
// hostilemem) run poolers in: a temp dir, a PostgreSQL started from initdb,
// pooler processes on free ports, and the /proc readings they take of them.
//
// When the tools run as root, PostgreSQL and PgBouncer (which both refuse to
// run as root) run as the postgres OS user; pgturnstile runs as the caller.
// What a tool's PostgreSQL holds (roles, databases, data) and what its
// poolers' ini says stay in the tool: StartPostgres takes the settings and a
// setup function, StartPooler a function that writes the ini.
package benchenv

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
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"
)

// Env is one run's temp dir, its PostgreSQL and its pooler processes, all
// stopped (and the dir removed) by Close.
type Env struct {
	Dir     string // the temp dir; PostgreSQL's data is Dir/data
	PGPort  int    // PostgreSQL's TCP port on 127.0.0.1, once started
	SockDir string // PostgreSQL's Unix socket directory
	pgBin   string
	asPG    bool // we are root: run PostgreSQL and PgBouncer as the postgres OS user
	cred    *syscall.Credential
	procs   []*Proc
	pgUp    bool
}

// Proc is one started pooler.
type Proc struct {
	Name    string
	Port    int
	LogPath string // where its log lines go (PgBouncer's logfile, pgturnstile's stderr)
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // set before done is closed
}

// Pid is the pooler's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Alive reports whether the pooler has not exited yet.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Err is how the pooler exited (as exec.Cmd.Wait says), nil while it runs.
func (p *Proc) Err() error {
	if p.Alive() {
		return nil
	}
	return p.err
}

// New makes the temp dir (named from dirPrefix) for a PostgreSQL whose
// initdb, pg_ctl are in pgBin.
func New(pgBin, dirPrefix string) (*Env, error) {
	e := &Env{pgBin: pgBin}
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
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, err
	}
	e.Dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	e.SockDir = filepath.Join(dir, "sock")
	for _, d := range []string{filepath.Join(dir, "data"), e.SockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
		if err := e.chown(d); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *Env) chown(path string) error {
	if !e.asPG {
		return nil
	}
	return os.Chown(path, int(e.cred.Uid), int(e.cred.Gid))
}

// Chown gives path to the OS user PostgreSQL and the poolers run as (the
// postgres OS user when we are root; otherwise it does nothing).
func (e *Env) Chown(path string) error { return e.chown(path) }

// touch creates path empty, writable by the postgres OS user.
func (e *Env) touch(path string) error {
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return err
	}
	return e.chown(path)
}

// command runs name in Dir, as the postgres OS user when we are root.
func (e *Env) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = e.Dir
	if e.asPG {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
	}
	return cmd
}

// FreePort picks a port below 32768 (outside the ephemeral range, so a
// client socket cannot take it between our check and the listener's bind).
func FreePort() (int, error) {
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

// StartPostgres initdb's and starts PostgreSQL on a free port, with SCRAM
// for TCP logins and trust on the socket. postgresql.conf gets "# comment",
// the listen address, port and socket dir, then settings (one "key = value"
// a line). setup then runs as the postgres superuser over the socket
// (Exec is there for its statements).
func (e *Env) StartPostgres(comment, settings string, setup func(context.Context, *pgconn.PgConn) error) error {
	data := filepath.Join(e.Dir, "data")
	out, err := e.command(filepath.Join(e.pgBin, "initdb"), "-D", data, "-U", "postgres", "-E", "UTF8",
		"--no-locale", "--no-sync", "--auth-local=trust", "--auth-host=scram-sha-256").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	e.PGPort = port
	conf := fmt.Sprintf(`
# %s
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
%s`, comment, port, e.SockDir, settings)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(conf)
	f.Close()
	if err != nil {
		return err
	}
	logPath := filepath.Join(e.Dir, "postgres.log")
	if err := e.touch(logPath); err != nil {
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
	c, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", e.SockDir, port))
	if err != nil {
		return fmt.Errorf("connect as postgres: %v", err)
	}
	defer c.Close(ctx)
	return setup(ctx, c)
}

// Exec runs each of queries on c in turn and stops at the first error,
// which names the query.
func Exec(ctx context.Context, c *pgconn.PgConn, queries ...string) error {
	for _, q := range queries {
		if _, err := c.Exec(ctx, q).ReadAll(); err != nil {
			return fmt.Errorf("%s: %v", q, err)
		}
	}
	return nil
}

// PoolerINIHead is how both tools' pooler ini begins: db served from this
// PostgreSQL, listening on 127.0.0.1:port only, SCRAM logins checked against
// authFile. The caller adds the rest of [pgbouncer], one "key = value" a line.
func (e *Env) PoolerINIHead(db string, port int, authFile string) string {
	return fmt.Sprintf(`[databases]
%s = host=127.0.0.1 port=%d dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
`, db, e.PGPort, db, port, authFile)
}

// Pooler is what StartPooler starts.
type Pooler struct {
	// Name names its files in Dir: Name.ini, Name.stderr (its stdout and
	// stderr) and, for PgBouncer, Name.log.
	Name string
	// Bouncer: this is PgBouncer, which logs to Name.log; otherwise it is
	// pgturnstile. Both run as the postgres OS user when we are root.
	Bouncer bool
	Bin     string
	Env     []string // added to our environment
	// INI returns the pooler's ini for listening on port; logfile is "" or
	// a "logfile = …" line that belongs in its [pgbouncer] section.
	INI func(port int, logfile string) (string, error)
	// Ready is a check through port that succeeds once the pooler serves.
	Ready func(ctx context.Context, port int) error
	// Args, where set, are the command's arguments for listening on port,
	// and INI is not used: a measuring stick (bench/cmd/loginfloor)
	// rather than a pooler.
	Args func(port int) []string
	// CPUs, when not nil, is the CPU set the pooler runs on (every thread
	// it will have: it inherits the set at fork).
	CPUs *unix.CPUSet
}

// StartPooler starts pl on a free port and waits (20 s at most) until its
// Ready check passes.
func (e *Env) StartPooler(pl Pooler) (*Proc, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	stderrPath := filepath.Join(e.Dir, pl.Name+".stderr")
	logPath := stderrPath
	logfile := ""
	if pl.Bouncer {
		logPath = filepath.Join(e.Dir, pl.Name+".log")
		logfile = "logfile = " + logPath + "\n"
		if err := e.touch(logPath); err != nil {
			return nil, err
		}
	}
	// Both refuse to run as root: as the postgres OS user when we are root.
	var cmd *exec.Cmd
	if pl.Args != nil {
		cmd = e.command(pl.Bin, pl.Args(port)...)
	} else {
		text, err := pl.INI(port, logfile)
		if err != nil {
			return nil, err
		}
		ini := filepath.Join(e.Dir, pl.Name+".ini")
		if err := os.WriteFile(ini, []byte(text), 0o644); err != nil {
			return nil, err
		}
		cmd = e.command(pl.Bin, ini)
		if pl.Bouncer {
			cmd = e.command(pl.Bin, "-q", ini)
		}
	}
	cmd.Env = append(os.Environ(), pl.Env...)
	lf, err := os.OpenFile(stderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := StartPinned(cmd, pl.CPUs); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %v", pl.Name, err)
	}
	p := &Proc{Name: pl.Name, Port: port, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	e.procs = append(e.procs, p)
	go func() { p.err = cmd.Wait(); lf.Close(); close(p.done) }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := pl.Ready(ctx, port)
		cancel()
		if err == nil {
			return p, nil
		}
		if !p.Alive() || time.Now().After(deadline) {
			out, _ := os.ReadFile(stderrPath)
			var lg []byte
			if pl.Bouncer {
				lg, _ = os.ReadFile(logPath)
			}
			return nil, fmt.Errorf("%s did not come up on port %d: %v\n%s%s", pl.Name, port, err, out, lg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StartPinned starts cmd on the CPUs of set (cmd.Start when set is nil).
// The child inherits the CPU mask of the thread that forks it, which is
// this goroutine's, locked to its thread and pinned for the time of the
// fork, so every thread the child will ever start is pinned too; the
// thread's own mask is put back afterwards.
func StartPinned(cmd *exec.Cmd, set *unix.CPUSet) error {
	if set == nil {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("sched_getaffinity: %v", err)
	}
	if err := unix.SchedSetaffinity(0, set); err != nil {
		return fmt.Errorf("sched_setaffinity: %v", err)
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		err = fmt.Errorf("restoring our CPU mask: %v", rerr)
	}
	return err
}

// StopPooler stops p with SIGTERM (immediate shutdown for both poolers;
// SIGINT would be PgBouncer's wait-for-clients shutdown), then SIGKILL.
func (e *Env) StopPooler(p *Proc) {
	if !p.Alive() {
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

// Close stops the poolers and PostgreSQL and, unless keep, removes Dir.
func (e *Env) Close(keep bool) {
	for _, p := range e.procs {
		e.StopPooler(p)
	}
	if e.pgUp {
		e.command(filepath.Join(e.pgBin, "pg_ctl"), "-D", filepath.Join(e.Dir, "data"), "-m", "immediate", "-w", "stop").Run()
	}
	if !keep {
		os.RemoveAll(e.Dir)
	}
}

// StatusKB returns a "Vm…:" field of /proc/PID/status in KiB.
func StatusKB(pid int, field string) (int64, error) {
	return FileKB("/proc/"+strconv.Itoa(pid)+"/status", field)
}

// FileKB returns the number after "field:" in a /proc file of such lines
// (/proc/PID/status, /proc/meminfo), in their unit, KiB.
func FileKB(path, field string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				break
			}
			return strconv.ParseInt(fs[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}

// FirstLine is the first line of what name args prints (stdout and
// stderr), or "?" when it fails printing nothing: a version for a report.
func FirstLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil && s == "" {
		return "?"
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// CPUInfo is the first value of key in /proc/cpuinfo ("model name"), or
// "unknown CPU".
func CPUInfo(key string) string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
