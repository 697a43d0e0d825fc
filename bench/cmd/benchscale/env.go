//go:build linux

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
	"github.com/pgturnstile/pgturnstile/bench/internal/pgbrun"
	"github.com/pgturnstile/pgturnstile/internal/testcert"
	"golang.org/x/sys/unix"
)

// The role and database pgbench runs as; the poolers' userlist holds the
// role's SCRAM secret from pg_authid (as a production userlist does), so a
// pooler verifies the client's proof without PBKDF2 and logs in to
// PostgreSQL with the client's own ClientKey.
const (
	benchUser = "bench"
	benchPass = "bench-secret"
	benchDB   = "bench"
	// serverConns is the server connections each target holds at most: the
	// pool size the peers' published benchmarks use.
	serverConns = 40
)

type env struct {
	*benchenv.Env
	o        options
	log      func(string, ...any)
	userlist string
	cert     string
	key      string
}

func newEnv(o options, logf func(string, ...any)) (*env, error) {
	be, err := benchenv.New(o.pgBin, "pgturnstile-benchscale.")
	if err != nil {
		return nil, err
	}
	return &env{Env: be, o: o, log: logf}, nil
}

func (e *env) close(keep bool) {
	e.Close(keep)
	if keep {
		e.log("kept %s", e.Dir)
	}
}

// startPostgres starts a PostgreSQL tuned to measure the poolers rather than
// the disk, with the bench role and database, writes the userlist with the
// role's SCRAM secret, and an ECDSA P-256 certificate for the TLS workloads.
func (e *env) startPostgres(o options) error {
	sb := "256MB"
	if o.quick {
		sb = "128MB"
	}
	settings := fmt.Sprintf(`max_connections = 250
shared_buffers = %s
fsync = off
synchronous_commit = off
full_page_writes = off
jit = off
password_encryption = 'scram-sha-256'
log_min_messages = warning
log_connections = off
`, sb)
	if err := e.writeCert(); err != nil {
		return err
	}
	return e.StartPostgres("pgturnstile bench-scale: throwaway, tuned to measure poolers, not the disk.", settings,
		func(ctx context.Context, c *pgconn.PgConn) error {
			if err := benchenv.Exec(ctx, c,
				fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", benchUser, benchPass),
				fmt.Sprintf("CREATE DATABASE %s OWNER %s", benchDB, benchUser)); err != nil {
				return err
			}
			res := c.ExecParams(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", [][]byte{[]byte(benchUser)}, nil, nil, nil).Read()
			if res.Err != nil || len(res.Rows) != 1 || !strings.HasPrefix(string(res.Rows[0][0]), "SCRAM-SHA-256$") {
				return fmt.Errorf("reading %s's SCRAM secret: %v", benchUser, res.Err)
			}
			e.userlist = filepath.Join(e.Dir, "userlist.txt")
			return os.WriteFile(e.userlist, fmt.Appendf(nil, "%q %q\n", benchUser, res.Rows[0][0]), 0o644)
		})
}

// writeCert makes the poolers' TLS key and certificate (ECDSA P-256, for
// 127.0.0.1, signed by a throwaway CA; pgbench's sslmode=require does not
// verify it).
func (e *env) writeCert() error {
	ca, err := testcert.NewCA(e.Dir, "pgturnstile bench-scale CA")
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	e.cert, e.key, err = ca.Issue(e.Dir, "tls-ecdsa", testcert.Server{CommonName: "127.0.0.1", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}, key)
	if err != nil {
		return err
	}
	for _, f := range []string{e.cert, e.key} {
		if err := e.Chown(f); err != nil {
			return err
		}
	}
	return nil
}

// pgbenchEnv is pgbench's environment: ours (LD_LIBRARY_PATH from a
// bundle comes along) and the login.
func pgbenchEnv(tls bool) []string {
	mode := "disable"
	if tls {
		mode = "require"
	}
	return append(os.Environ(), "PGPASSWORD="+benchPass, "PGSSLMODE="+mode, "PGGSSENCMODE=disable", "PGAPPNAME=", "PGOPTIONS=")
}

func (e *env) pgbenchInit(scale int) error {
	cmd := exec.Command(e.o.pgbench, "-i", "-q", "-s", strconv.Itoa(scale), "-h", "127.0.0.1", "-p", strconv.Itoa(e.PGPort), "-U", benchUser, benchDB)
	cmd.Env = pgbenchEnv(false)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgbench -i: %v\n%s", err, out)
	}
	return nil
}

// target is one pooler setup at one core count: one process (pgturnstile,
// one PgBouncer) or N PgBouncers on one port.
type target struct {
	Name  string
	Port  int
	Procs []*benchenv.Proc
}

func (t target) pids() []int {
	var out []int
	for _, p := range t.Procs {
		out = append(out, p.Pid())
	}
	return out
}

func (t target) alive() error {
	for _, p := range t.Procs {
		if !p.Alive() {
			return fmt.Errorf("%s (pid %d) exited: %v", p.Name, p.Pid(), p.Err())
		}
	}
	return nil
}

// Target names; "pgbouncer×N" is named with its N in the report.
const (
	tTurn     = "pgturnstile"
	tBouncer  = "pgbouncer×1"
	tBouncerN = "pgbouncer×N"
)

// ini is the one config every pooler gets: transaction pooling, poolSize
// server connections, SCRAM logins against the secret, TLS offered
// (prefer: pgbench's sslmode says whether it is used), room for 10,000
// clients, each login and logout not logged.
func (e *env) ini(port, poolSize int, extra string) string {
	return e.PoolerINIHead(benchDB, port, e.userlist) + fmt.Sprintf(`pool_mode = transaction
default_pool_size = %d
max_client_conn = 12000
log_connections = 0
log_disconnections = 0
client_tls_sslmode = prefer
client_tls_key_file = %s
client_tls_cert_file = %s
%s`, poolSize, e.key, e.cert, extra)
}

// ready logs in through port and runs a query.
func ready(ctx context.Context, port int) error {
	c, err := pgconn.Connect(ctx, fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=disable", port, benchUser, benchPass, benchDB))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "SELECT 1").ReadAll()
	return err
}

// startTargets starts the targets of core count n with the poolers pinned
// to pool: pgturnstile with GOMAXPROCS=n; one PgBouncer; and, for n > 1,
// n PgBouncers with so_reuseport on one port, each pinned to its own core
// of pool and holding its share of the 40 server connections.
func (e *env) startTargets(n int, pool []int, pin bool) ([]target, error) {
	set := func(cs ...int) *unix.CPUSet {
		if !pin {
			return nil
		}
		return cpuSet(cs)
	}
	var ts []target
	turn, err := e.StartPooler(benchenv.Pooler{Name: fmt.Sprintf("pgturnstile-%dc", n), Bin: e.o.turnstile,
		Env: []string{"GOMAXPROCS=" + strconv.Itoa(n)}, CPUs: set(pool...),
		INI: func(port int, _ string) (string, error) { return e.ini(port, serverConns, ""), nil }, Ready: ready})
	if err != nil {
		return nil, err
	}
	ts = append(ts, target{Name: tTurn, Port: turn.Port, Procs: []*benchenv.Proc{turn}})
	one, err := e.StartPooler(benchenv.Pooler{Name: fmt.Sprintf("pgbouncer-%dc", n), Bouncer: true, Bin: e.o.pgbouncer, CPUs: set(pool...),
		INI: func(port int, logfile string) (string, error) { return e.ini(port, serverConns, logfile), nil }, Ready: ready})
	if err != nil {
		return nil, err
	}
	ts = append(ts, target{Name: tBouncer, Port: one.Port, Procs: []*benchenv.Proc{one}})
	if n == 1 {
		return ts, nil
	}
	many := target{Name: tBouncerN}
	share := (serverConns + n - 1) / n
	for i := range n {
		name := fmt.Sprintf("pgbouncer-%dc-%d", n, i)
		p, err := e.StartPooler(benchenv.Pooler{Name: name, Bouncer: true, Bin: e.o.pgbouncer, CPUs: set(pool[i]),
			INI: func(port int, logfile string) (string, error) {
				if i == 0 {
					many.Port = port
				}
				return e.ini(many.Port, share, logfile+"so_reuseport = 1\n"), nil
			},
			// The first instance answers on the shared port before the
			// others listen: wait for this one's own "listening on" line.
			Ready: func(ctx context.Context, _ int) error {
				lg, _ := os.ReadFile(filepath.Join(e.Dir, name+".log"))
				if !strings.Contains(string(lg), "listening on 127.0.0.1") {
					return fmt.Errorf("%s not listening yet", name)
				}
				return ready(ctx, many.Port)
			}})
		if err != nil {
			return nil, err
		}
		many.Procs = append(many.Procs, p)
	}
	return append(ts, many), nil
}

// pinPostgres moves the postmaster to the CPUs of rest: the server
// processes the poolers open from then on are forked from it and inherit
// them.
func (e *env) pinPostgres(rest []int) error {
	b, err := os.ReadFile(filepath.Join(e.Dir, "data", "postmaster.pid"))
	if err != nil {
		return err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %v", err)
	}
	return unix.SchedSetaffinity(pid, cpuSet(rest))
}

func cpuSet(cs []int) *unix.CPUSet {
	var s unix.CPUSet
	for _, c := range cs {
		s.Set(c)
	}
	return &s
}

// allowedCPUs lists the CPUs this process may run on (a container's
// cpuset may be fewer than the machine's).
func allowedCPUs() ([]int, error) {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %v", err)
	}
	var out []int
	for c := range 8 * int(unsafe.Sizeof(s)) {
		if s.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// raiseNoFile lifts the open-files limit to at least want where it can
// (as root the hard limit too, up to the kernel's nr_open), else to the
// hard limit; every child inherits it. It returns the limit in force.
func raiseNoFile(want int) uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	if uint64(want) > r.Max && os.Geteuid() == 0 {
		up := r
		up.Max, up.Cur = uint64(want), uint64(want)
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
			return up.Cur
		}
	}
	n, err := pgbrun.RaiseNoFile()
	if err != nil {
		return r.Cur
	}
	return n
}
