//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
)

// The role and database every target is driven as. The password is plain in
// the poolers' userlist and SCRAM-SHA-256 in PostgreSQL, so clients log in
// with SCRAM to the pooler and the pooler logs in with SCRAM to PostgreSQL.
const (
	benchUser = "bench"
	benchPass = "bench-secret"
	benchDB   = "bench"
)

// env is the throwaway world of one benchmark run (see benchenv), with the
// bench role and database in its PostgreSQL.
type env struct {
	*benchenv.Env
	log func(format string, args ...any)
}

func newEnv(pgBin string, logf func(string, ...any)) (*env, error) {
	be, err := benchenv.New(pgBin, "pgturnstile-bench.")
	if err != nil {
		return nil, err
	}
	return &env{Env: be, log: logf}, nil
}

// startPostgres starts a PostgreSQL tuned for benchmarking the poolers
// rather than the disk, and creates the bench role and database.
func (e *env) startPostgres(sharedBuffers string) error {
	settings := fmt.Sprintf(`max_connections = 700
shared_buffers = %s
fsync = off
synchronous_commit = off
full_page_writes = off
max_wal_size = 4GB
checkpoint_timeout = 30min
password_encryption = 'scram-sha-256'
log_min_messages = warning
log_connections = off
`, sharedBuffers)
	return e.StartPostgres("pgturnstile bench: throwaway, tuned to measure poolers, not the disk.", settings,
		func(ctx context.Context, c *pgconn.PgConn) error {
			return benchenv.Exec(ctx, c,
				fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", benchUser, benchPass),
				fmt.Sprintf("CREATE DATABASE %s OWNER %s", benchDB, benchUser))
		})
}

// pgbenchInit fills the bench database at the given scale, as the bench role.
func (e *env) pgbenchInit(scale int) error {
	cmd := exec.Command("pgbench", "-i", "-q", "-s", strconv.Itoa(scale), "-h", "127.0.0.1",
		"-p", strconv.Itoa(e.PGPort), "-U", benchUser, benchDB)
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
func (e *env) poolerINI(port int, o iniOpts) (string, error) {
	poolSize := o.PoolSize
	if poolSize == 0 {
		poolSize = 20
	}
	userlist := filepath.Join(e.Dir, "userlist.txt")
	if err := os.WriteFile(userlist, fmt.Appendf(nil, "%q %q\n", benchUser, benchPass), 0o644); err != nil {
		return "", err
	}
	return e.PoolerINIHead(benchDB, port, userlist) + fmt.Sprintf(`pool_mode = transaction
default_pool_size = %d
max_client_conn = 6000
log_connections = 0
log_disconnections = 0
%s`, poolSize, o.Extra), nil
}

// startPooler starts a pooler (kind "pgbouncer" or "pgturnstile") with envv
// added to its environment, on a free port, and waits until the bench role
// can run a query through it.
func (e *env) startPooler(name, kind, bin string, envv []string, io iniOpts) (*benchenv.Proc, error) {
	return e.StartPooler(benchenv.Pooler{
		Name: name, Bouncer: kind == "pgbouncer", Bin: bin, Env: envv,
		INI: func(port int, logfile string) (string, error) {
			io.Extra = logfile + io.Extra
			return e.poolerINI(port, io)
		},
		Ready: queryOnce,
	})
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

func (e *env) close(keep bool) {
	e.Close(keep)
	if keep {
		e.log("kept %s", e.Dir)
	}
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
