//go:build linux

package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// Roles and databases created by TestMain. Tests use these names rather than
// literals so a grep finds every user of a fixture.
const (
	appUser     = "app"
	appPassword = "app-secret" // stored as SCRAM-SHA-256 in Postgres
	md5User     = "md5user"
	md5Password = "md5-secret" // stored as md5 in Postgres
	benchUser   = "bench"
	benchPass   = "bench-secret"
	aliceUser   = "alice"
	alicePass   = "alice-secret"
	bobUser     = "bob"
	bobPass     = "bob-secret"
	// scramUser's own pg_hba.conf line demands scram-sha-256 (no md5
	// fallback); its password is created by the SCRAM pass-through tests.
	scramUser = "scram_pt"

	appDB   = "appdb"
	otherDB = "otherdb"
	benchDB = "benchdb"
)

// pg is the package's PostgreSQL; nil when running with -short.
var pg *cluster

// cluster is one throwaway PostgreSQL started by TestMain.
type cluster struct {
	dir     string // temp root: data/, sock/, postgres.log, pooler binary
	dataDir string
	sockDir string
	logPath string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	cred    *syscall.Credential // run initdb/postgres as this user (nil: as ourselves)
	// extraArgs are appended to the postgres command line (a later -c wins).
	extraArgs []string

	monitorMu sync.Mutex
	monitor   *pgx.Conn // superuser conn for pg_stat_activity polling
}

func TestMain(m *testing.M) {
	if path := os.Getenv(impostorEnv); path != "" {
		// A helper process, not a test run (takeover_impostor_test.go).
		os.Exit(runImpostor(path))
	}
	flag.Parse()
	if testing.Short() {
		// Unit runs: every test calls needPG, which skips.
		os.Exit(m.Run())
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	c, err := startCluster()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: cannot start PostgreSQL: %v\n", err)
		if c != nil {
			c.stop()
		}
		return 1
	}
	pg = c

	// Stop Postgres and poolers on ^C or a kill from `go test -timeout`'s
	// parent; Pdeathsig covers the case where we die without running this.
	defer pgtest.Guard("integration", func(failed bool) {
		killAllPoolers()
		if failed {
			fmt.Fprintf(os.Stderr, "integration: PostgreSQL log tail:\n%s\n", pgtest.TailFile(c.logPath, 40))
		}
		c.stop()
	})(&code)
	return m.Run()
}

// needPG skips under -short and otherwise returns the cluster.
func needPG(t testing.TB) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped with -short")
	}
	if pg == nil {
		t.Fatal("integration: PostgreSQL was not started (TestMain failed?)")
	}
	return pg
}

func startCluster() (*cluster, error) {
	c, err := initCluster()
	if err != nil {
		return c, err
	}
	if err := c.prependHBA(extraHBALines); err != nil {
		return c, err
	}
	if err := c.startOnFreePort(); err != nil {
		return c, err
	}
	if err := c.setup(); err != nil {
		return c, fmt.Errorf("creating roles and databases: %w", err)
	}
	return c, nil
}

// extraHBALines go before initdb's own pg_hba.conf lines (which are md5 for
// every TCP connection): scramUser must use SCRAM with no md5 fallback, and
// the cloudflare-fork §3.5 scenario's roles get its variant B lines.
var extraHBALines = []string{
	"host all " + scramUser + " 127.0.0.1/32 scram-sha-256",
	"host all pgb_auth 127.0.0.1/32 md5",
	"host appdb app_user,other_user 127.0.0.1/32 md5",
}

// prependHBA puts lines at the top of the cluster's pg_hba.conf (before the
// server starts, or followed by pg_reload_conf()).
func (c *cluster) prependHBA(lines []string) error {
	path := filepath.Join(c.dataDir, "pg_hba.conf")
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// WriteFile keeps the owner (postgres) of the existing file.
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"+string(old)), 0o600)
}

// startOnFreePort starts postgres on a free port, retrying on another port
// when one is taken between the check and the bind.
func (c *cluster) startOnFreePort() error {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := pgtest.FreePort()
		if err != nil {
			return err
		}
		if err := c.startPostgres(port); err != nil {
			lastErr = err
			c.stopServer()
			continue
		}
		return nil
	}
	return lastErr
}

// initCluster makes a temp dir and runs initdb in it (as the postgres OS
// user when we are root); the server is not started.
func initCluster() (*cluster, error) {
	// Host connections use md5, which also runs SCRAM for roles whose
	// password is stored as SCRAM: that lets md5user and app coexist.
	d, err := pgtest.InitDB("pgturnstile-it-", "md5")
	if d == nil {
		return nil, err
	}
	c := &cluster{dir: d.Root, dataDir: d.Data, sockDir: d.Socket, logPath: d.Log, cred: d.Cred}
	return c, err
}

func (c *cluster) startPostgres(port int) error {
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.port = port
	c.cmd = exec.Command(filepath.Join(pgtest.BinDir, "postgres"),
		"-D", c.dataDir,
		"-p", strconv.Itoa(port),
		"-k", c.sockDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "unix_socket_permissions=0777",
		"-c", "log_min_messages=warning",
	)
	c.cmd.Args = append(c.cmd.Args, c.extraArgs...)
	c.cmd.Dir = c.dir
	c.cmd.Stdout = logf
	c.cmd.Stderr = logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: c.cred,
		Setpgid:    true,
		// Go sets this after switching credentials, so it survives into
		// postgres: if the test binary dies, so does the postmaster.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := c.cmd.Start(); err != nil {
		return err
	}
	c.exited = make(chan struct{})
	go func(cmd *exec.Cmd, ch chan struct{}) { _ = cmd.Wait(); close(ch) }(c.cmd, c.exited)

	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during startup on port %d:\n%s", port, pgtest.TailFile(c.logPath, 20))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.superuserConnString("postgres"))
		cancel()
		if err == nil {
			c.monitor = conn
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after 30s: %v\n%s", err, pgtest.TailFile(c.logPath, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// superuserConnString connects over the unix socket, where auth is trust.
func (c *cluster) superuserConnString(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", c.sockDir, c.port, db)
}

// directConnString connects over TCP with a password, as the pooler does.
func (c *cluster) directConnString(db, user, password string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=disable", c.port, user, password, db)
}

func (c *cluster) setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stmts := []string{
		"SET password_encryption = 'scram-sha-256'",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", appUser, appPassword),
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", benchUser, benchPass),
		// alice and bob: the Cloudflare-fork scenarios' tenants (throttle_test.go).
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", aliceUser, alicePass),
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", bobUser, bobPass),
		"SET password_encryption = 'md5'",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", md5User, md5Password),
		"RESET password_encryption",
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", appDB, appUser),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", otherDB, appUser),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", benchDB, benchUser),
	}
	for _, s := range stmts {
		if _, err := c.monitor.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	conn, err := pgx.Connect(ctx, c.superuserConnString(appDB))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, s := range []string{
		"CREATE TABLE dropped_tx (v text)",
		"ALTER TABLE dropped_tx OWNER TO " + appUser,
		"CREATE TABLE smoke (id int PRIMARY KEY, v text)",
		"ALTER TABLE smoke OWNER TO " + appUser,
		"GRANT ALL ON SCHEMA public TO PUBLIC",
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func (c *cluster) stop() {
	c.stopServer()
	if os.Getenv("PGTURNSTILE_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "integration: keeping %s\n", c.dir)
		return
	}
	_ = os.RemoveAll(c.dir)
}

// stopServer stops postgres and keeps the data directory (startOnFreePort
// retries on another port with it).
func (c *cluster) stopServer() {
	if c.monitor != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.monitor.Close(ctx)
		cancel()
		c.monitor = nil
	}
	if c.cmd != nil && c.cmd.Process != nil && c.exited != nil {
		// SIGQUIT: immediate shutdown; nothing here needs to survive.
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
		c.cmd = nil
	}
}

// restartFast restarts postgres as `pg_ctl restart -m fast` does: SIGINT
// to the postmaster (its backends end with "terminating connection due to
// administrator command"), wait for it to exit, start it again on the same
// port. The monitor connection is reopened by startPostgres, so the other
// tests keep using the cluster as before.
func (c *cluster) restartFast() error {
	c.monitorMu.Lock()
	defer c.monitorMu.Unlock()
	if c.monitor != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.monitor.Close(ctx)
		cancel()
		c.monitor = nil
	}
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("SIGINT to the postmaster: %w", err)
	}
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("postgres did not exit within 30s of SIGINT:\n%s", pgtest.TailFile(c.logPath, 20))
	}
	c.cmd = nil
	return c.startPostgres(c.port)
}

// startSecondCluster starts a second, small PostgreSQL on a free port with
// the app role (same password) owning appdb, for tests that move a
// database between servers; it is stopped and removed at the test's end.
func startSecondCluster(t testing.TB) *cluster {
	t.Helper()
	c, err := initCluster()
	if c != nil {
		t.Cleanup(c.stop)
	}
	if err != nil {
		t.Fatalf("second cluster: %v", err)
	}
	if err := c.startOnFreePort(); err != nil {
		t.Fatalf("second cluster: %v", err)
	}
	c.createApp(t, "second cluster")
	return c
}

// createApp makes the app role (SCRAM) and its database in an extra
// cluster; what names the cluster in a failure.
func (c *cluster) createApp(t testing.TB, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []string{
		"SET password_encryption = 'scram-sha-256'",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", appUser, appPassword),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", appDB, appUser),
	} {
		if _, err := c.monitor.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %s: %v", what, s, err)
		}
	}
}
