//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
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

// env is one run's throwaway world (see benchenv), with the three roles and
// the bench database in its PostgreSQL.
type env struct {
	*benchenv.Env
	// noPrepared: this PgBouncer predates max_prepared_statements (1.21)
	// and refuses to start with it in its ini, so its ini leaves it out.
	noPrepared bool
	secrets    map[string]string // role → SCRAM secret from pg_authid
}

// proc is one started pooler of a kind.
type proc struct {
	*benchenv.Proc
	kind string // kindTurnstile or kindBouncer
}

func newEnv(pgBin string) (*env, error) {
	be, err := benchenv.New(pgBin, "pgturnstile-hostilemem.")
	if err != nil {
		return nil, err
	}
	return &env{Env: be}, nil
}

// startPostgres starts a small PostgreSQL 15, creates the three roles and
// the bench database, and reads the roles' SCRAM secrets.
func (e *env) startPostgres() error {
	return e.StartPostgres("pgturnstile hostilemem: throwaway.", `max_connections = 100
shared_buffers = 128MB
fsync = off
synchronous_commit = off
full_page_writes = off
password_encryption = 'scram-sha-256'
log_min_messages = warning
`, e.setupRoles)
}

// setupRoles creates the roles and the database and reads the secrets.
func (e *env) setupRoles(ctx context.Context, c *pgconn.PgConn) error {
	if err := benchenv.Exec(ctx, c,
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", benchUser, password),
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", adminUser, password),
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", statsUser, password),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", benchDB, benchUser),
	); err != nil {
		return err
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
func (e *env) poolerINI(kind string, port int, extra string) (string, error) {
	userlist := filepath.Join(e.Dir, "userlist.txt")
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
	return e.PoolerINIHead(benchDB, port, userlist) + fmt.Sprintf(`admin_users = %s
stats_users = %s
pool_mode = transaction
%sdefault_pool_size = 20
max_client_conn = 100
%s`, adminUser, statsUser, prepared, extra), nil
}

const (
	kindTurnstile = "pgturnstile"
	kindBouncer   = "PgBouncer"
)

// startPooler starts a pooler on a free port and waits until the bench role
// can run a query through it.
func (e *env) startPooler(name, kind, bin string) (*proc, error) {
	p, err := e.StartPooler(benchenv.Pooler{
		Name: name, Bouncer: kind == kindBouncer, Bin: bin,
		INI:   func(port int, logfile string) (string, error) { return e.poolerINI(kind, port, logfile) },
		Ready: queryOnce,
	})
	if err != nil {
		return nil, err
	}
	return &proc{Proc: p, kind: kind}, nil
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

func (e *env) close(keep bool) {
	e.Close(keep)
	if keep {
		fmt.Fprintln(os.Stderr, "hostilemem: kept", e.Dir)
	}
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
