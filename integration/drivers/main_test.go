package drivers

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgBinDir is where CI (and the Debian packages) keep PostgreSQL 15.
const pgBinDir = "/usr/lib/postgresql/15/bin"

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

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "drivers: %v: stopping PostgreSQL and poolers\n", s)
		killAll()
		c.stop()
		os.Exit(2)
	}()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "drivers: panic: %v\n", r)
			code = 2
		}
		killAll()
		if code != 0 {
			fmt.Fprintf(os.Stderr, "drivers: PostgreSQL log tail:\n%s\n", tailFile(c.logPath, 40))
		}
		c.stop()
		fmt.Print(matrix.table())
		fmt.Printf("drivers: suite wall time %v\n", time.Since(start).Round(100*time.Millisecond))
	}()
	return m.Run()
}

func startCluster() (*cluster, error) {
	if _, err := os.Stat(filepath.Join(pgBinDir, "postgres")); err != nil {
		return nil, fmt.Errorf("PostgreSQL 15 binaries not found in %s (install postgresql-15): %w", pgBinDir, err)
	}
	dir, err := os.MkdirTemp("", "pgturnstile-drivers-")
	if err != nil {
		return nil, err
	}
	c := &cluster{
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		sockDir: filepath.Join(dir, "sock"),
		logPath: filepath.Join(dir, "postgres.log"),
	}
	if err := os.Chmod(dir, 0o755); err != nil { // postgres must traverse it
		return c, err
	}
	for _, d := range []string{c.dataDir, c.sockDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return c, err
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return c, fmt.Errorf("running as root needs a postgres OS user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
		for _, d := range []string{c.dataDir, c.sockDir} {
			if err := os.Chown(d, uid, gid); err != nil {
				return c, err
			}
		}
	}
	initdb := exec.Command(filepath.Join(pgBinDir, "initdb"),
		"-D", c.dataDir, "-U", "postgres", "-E", "UTF8", "--no-locale", "--no-sync",
		"--auth-local=trust", "--auth-host=md5")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return c, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
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
	c.cmd = exec.Command(filepath.Join(pgBinDir, "postgres"),
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
			return fmt.Errorf("postgres exited during startup on port %d:\n%s", port, tailFile(c.logPath, 20))
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
			return fmt.Errorf("postgres not ready after 30s: %v\n%s", err, tailFile(c.logPath, 20))
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

// freePort returns a TCP port below 32768 (outside Linux's ephemeral range)
// that is free right now.
func freePort() (int, error) {
	for i := 0; i < 200; i++ {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("no free port found in 20000-31999")
}

func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
