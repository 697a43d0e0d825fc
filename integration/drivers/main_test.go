//go:build linux

package drivers

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// The role every driver logs in as, directly and through the pooler. Its
// password is stored as SCRAM; host connections to Postgres use md5 auth,
// which runs SCRAM for such roles.
const (
	drvUser     = "drv"
	drvPassword = "drv-secret"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the direct runs")

// pg is the package's PostgreSQL; nil with -short.
var pg *cluster

// cluster is the throwaway PostgreSQL started by TestMain.
type cluster struct {
	dir     string // temp root: data/, sock/, postgres.log, pooler binary, copy file
	dataDir string
	sockDir string
	logPath string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	cred    *syscall.Credential // run initdb/postgres as this user (nil: as ourselves)
	admin   *pgx.Conn           // superuser, unix socket; used by TestMain's goroutine and newDatabase (under dbMu)
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("drivers: skipped with -short (the driver matrix needs PostgreSQL and the driver runtimes)")
		os.Exit(0)
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	start := time.Now()
	c, err := startCluster()
	if err != nil {
		fmt.Fprintf(os.Stderr, "drivers: cannot start PostgreSQL: %v\n", err)
		if c != nil {
			c.stop()
		}
		return 1
	}
	pg = c

	// Stop Postgres and poolers on ^C or a kill from `go test -timeout`'s
	// parent; Pdeathsig covers the case where we die without running this.
	defer pgtest.Guard("drivers", func(failed bool) {
		killAll()
		if failed {
			fmt.Fprintf(os.Stderr, "drivers: PostgreSQL log tail:\n%s\n", pgtest.TailFile(c.logPath, 40))
		}
		c.stop()
		fmt.Print(matrix.table())
		fmt.Printf("drivers: suite wall time %v\n", time.Since(start).Round(100*time.Millisecond))
	})(&code)
	return m.Run()
}

func startCluster() (*cluster, error) {
	d, err := pgtest.InitDB("pgturnstile-drivers-", "md5")
	if d == nil {
		return nil, err
	}
	c := &cluster{dir: d.Root, dataDir: d.Data, sockDir: d.Socket, logPath: d.Log, cred: d.Cred}
	if err != nil {
		return c, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := pgtest.FreePort()
		if err != nil {
			return c, err
		}
		if lastErr = c.startPostgres(port); lastErr == nil {
			break
		}
		c.stop()
	}
	if lastErr != nil {
		return c, lastErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range []string{
		"SET password_encryption = 'scram-sha-256'",
		fmt.Sprintf("CREATE ROLE %s LOGIN CREATEDB PASSWORD '%s'", drvUser, drvPassword),
	} {
		if _, err := c.admin.Exec(ctx, s); err != nil {
			return c, fmt.Errorf("%s: %w", s, err)
		}
	}
	return c, nil
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
		"-c", "max_connections=300",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		// Every driver's COPY file and timestamptz text are in UTC.
		"-c", "timezone=UTC",
		"-c", "log_min_messages=fatal", // the scenarios raise errors on purpose
	)
	c.cmd.Dir = c.dir
	c.cmd.Stdout = logf
	c.cmd.Stderr = logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
		conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", c.sockDir, c.port))
		cancel()
		if err == nil {
			c.admin = conn
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after 30s: %v\n%s", err, pgtest.TailFile(c.logPath, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) stop() {
	if c.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.admin.Close(ctx)
		cancel()
		c.admin = nil
	}
	if c.cmd != nil && c.cmd.Process != nil && c.exited != nil {
		_ = c.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
		c.cmd = nil
	}
	if os.Getenv("PGTURNSTILE_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "drivers: keeping %s\n", c.dir)
		return
	}
	_ = os.RemoveAll(c.dir)
}
