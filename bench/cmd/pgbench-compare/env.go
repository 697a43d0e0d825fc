//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

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
	// secrets are the roles' rolpassword from pg_authid (SCRAM for bench,
	// md5 for bench_md5), for the login setups' userlists (logins.go).
	secrets map[string]string
	// certs are the TLS workloads' keys and certificates, by kind.
	certs map[string]certFiles
}

func newEnv(pgBin string, logf func(string, ...any)) (*env, error) {
	be, err := benchenv.New(pgBin, "pgturnstile-bench.")
	if err != nil {
		return nil, err
	}
	return &env{Env: be, log: logf}, nil
}

// startPostgres starts a PostgreSQL tuned for benchmarking the poolers
// rather than the disk, and creates the bench role and database, and the
// md5 role (a member of bench, so it reads bench's tables) with its
// password stored as md5 and md5 logins from 127.0.0.1 (pg_hba.conf's
// scram-sha-256 refuses a role whose password is stored as md5). It reads
// both roles' secrets from pg_authid for the userlists of the login setups,
// and writes the TLS workloads' certificates.
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
	certs, err := writeCerts(e.Dir, e.Chown)
	if err != nil {
		return err
	}
	e.certs = certs
	return e.StartPostgres("pgturnstile bench: throwaway, tuned to measure poolers, not the disk.", settings,
		func(ctx context.Context, c *pgconn.PgConn) error {
			err := benchenv.Exec(ctx, c,
				fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", benchUser, benchPass),
				fmt.Sprintf("CREATE DATABASE %s OWNER %s", benchDB, benchUser),
				"SET password_encryption = 'md5'",
				fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE %s", md5User, md5Pass, benchUser),
				"RESET password_encryption")
			if err != nil {
				return err
			}
			if err := e.allowMD5(); err != nil {
				return err
			}
			if err := benchenv.Exec(ctx, c, "SELECT pg_reload_conf()"); err != nil {
				return err
			}
			e.secrets, err = readSecrets(ctx, c, benchUser, md5User)
			return err
		})
}

// allowMD5 puts a line for the md5 role before initdb's scram-sha-256 ones
// in pg_hba.conf (the caller reloads it).
func (e *env) allowMD5() error {
	path := filepath.Join(e.Dir, "data", "pg_hba.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("host %s %s 127.0.0.1/32 md5\n", benchDB, md5User)
	return os.WriteFile(path, append([]byte(line), b...), 0o600)
}

// readSecrets returns each role's rolpassword: what a production userlist
// or auth_query holds for it.
func readSecrets(ctx context.Context, c *pgconn.PgConn, roles ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, r := range roles {
		res := c.ExecParams(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", [][]byte{[]byte(r)}, nil, nil, nil).Read()
		if res.Err != nil {
			return nil, fmt.Errorf("reading %s's secret: %v", r, res.Err)
		}
		if len(res.Rows) != 1 || len(res.Rows[0][0]) == 0 {
			return nil, fmt.Errorf("role %s has no password in pg_authid", r)
		}
		out[r] = string(res.Rows[0][0])
	}
	if s := out[md5User]; !strings.HasPrefix(s, "md5") {
		return nil, fmt.Errorf("%s's password is not stored as md5: %.12s…", md5User, s)
	}
	if s := out[benchUser]; !strings.HasPrefix(s, "SCRAM-SHA-256$") {
		return nil, fmt.Errorf("%s's password is not stored as SCRAM: %.14s…", benchUser, s)
	}
	return out, nil
}

// pgbenchInit fills the bench database at the given scale, as the bench role.
func (e *env) pgbenchInit(scale int) error { return e.pgbenchInitDB(benchDB, scale) }

// pgbenchInitDB fills database db at the given scale, as the bench role.
func (e *env) pgbenchInitDB(db string, scale int) error {
	cmd := exec.Command("pgbench", "-i", "-q", "-s", strconv.Itoa(scale), "-h", "127.0.0.1",
		"-p", strconv.Itoa(e.PGPort), "-U", benchUser, db)
	cmd.Env = pgbenchEnv(plainLogin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgbench -i %s: %v\n%s", db, err, out)
	}
	return nil
}

// pgbenchEnv is pgbench's environment for logging in as l.
func pgbenchEnv(l login) []string {
	return append(os.Environ(), "PGPASSWORD="+l.Password, "PGSSLMODE="+l.SSLMode, "PGGSSENCMODE=disable",
		"PGAPPNAME=", "PGOPTIONS=")
}

// iniOpts is what one pooler instance's ini differs in.
type iniOpts struct {
	// PoolSize is default_pool_size; 0 means the benchmark's 20.
	PoolSize int
	// Extra is appended to the [pgbouncer] section, one "key = value" a
	// line (logfile for PgBouncer, admission_file for pgturnstile).
	Extra string
	// AuthType is auth_type; "" means scram-sha-256.
	AuthType string
	// Userlist and Users are the auth_file and what it holds; "" means
	// userlist.txt with bench's plain password.
	Userlist, Users string
	// Login is how the ready check logs in; zero means plainLogin.
	Login login
	// Databases are [databases] entries besides bench, one a line (the
	// shards of a shard map, sharding.go).
	Databases string
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
	userlist, users := filepath.Join(e.Dir, "userlist.txt"), fmt.Sprintf("%q %q\n", benchUser, benchPass)
	if o.Userlist != "" {
		userlist, users = o.Userlist, o.Users
	}
	if err := os.WriteFile(userlist, []byte(users), 0o644); err != nil {
		return "", err
	}
	head := e.PoolerINIHead(benchDB, port, userlist)
	if o.Databases != "" {
		// After the head's one entry, before [pgbouncer].
		const sect = "\n\n[pgbouncer]\n"
		if !strings.Contains(head, sect) {
			return "", fmt.Errorf("pooler ini head has no [pgbouncer] section after [databases]")
		}
		head = strings.Replace(head, sect, "\n"+strings.TrimRight(o.Databases, "\n")+sect, 1)
	}
	if o.AuthType != "" {
		// The head's auth_type, replaced rather than repeated: a key given
		// twice is a warning or an error to a strict ini reader.
		const def = "\nauth_type = scram-sha-256\n"
		if !strings.Contains(head, def) {
			return "", fmt.Errorf("pooler ini head has no %q", strings.TrimSpace(def))
		}
		head = strings.Replace(head, def, "\nauth_type = "+o.AuthType+"\n", 1)
	}
	return head + fmt.Sprintf(`pool_mode = transaction
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
		Ready: func(ctx context.Context, port int) error { return queryOnce(ctx, port, io.Login) },
	})
}

// connString is plainLogin's connection string to port.
func connString(port int) string { return plainLogin.connString(port) }

func (l login) connString(port int) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=%s",
		port, l.User, l.Password, l.db(), l.SSLMode)
}

// db is the database l logs in to: bench unless it names one.
func (l login) db() string {
	if l.DB != "" {
		return l.DB
	}
	return benchDB
}

// queryOnce logs in as l (plainLogin when zero) and runs a query.
func queryOnce(ctx context.Context, port int, l login) error {
	if l.User == "" {
		l = plainLogin
	}
	c, err := pgconn.Connect(ctx, l.connString(port))
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
