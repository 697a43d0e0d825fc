//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// startStandby makes a streaming standby of primary (pg_basebackup -R as
// the postgres OS user, over the primary's Unix socket, where replication
// is trusted) and starts it on a free port; it is stopped and removed at
// the test's end.
func startStandby(t *testing.T, primary *cluster) *cluster {
	t.Helper()
	root, err := os.MkdirTemp("", "pgturnstile-standby-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: root, dataDir: filepath.Join(root, "data"), sockDir: filepath.Join(root, "sock"),
		logPath: filepath.Join(root, "postgres.log"), cred: primary.cred}
	t.Cleanup(c.stop)
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{c.dataDir, c.sockDir} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if c.cred != nil {
			if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	bb := exec.Command(filepath.Join(pgtest.BinDir, "pg_basebackup"), "-h", primary.sockDir,
		"-p", fmt.Sprint(primary.port), "-U", "postgres", "-D", c.dataDir, "-R", "-X", "stream", "-c", "fast")
	bb.Dir = root
	bb.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := bb.CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	if err := c.startOnFreePort(); err != nil {
		t.Fatalf("standby: %v", err)
	}
	return c
}

// promote runs pg_ctl promote -w on the standby c.
func (c *cluster) promote(t *testing.T) {
	t.Helper()
	cmd := exec.Command(filepath.Join(pgtest.BinDir, "pg_ctl"), "promote", "-w", "-t", "30", "-D", c.dataDir)
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl promote: %v\n%s", err, out)
	}
}

// foTx is one write transaction of a failover client: when it began,
// the port of the Postgres that committed it, its error.
type foTx struct {
	start time.Time
	port  int
	err   error
}

// TestFailoverFollowsPrimary: a database with host=primary,standby and
// target_session_attrs=read-write writes to the primary; the primary is
// stopped and the standby promoted (pg_ctl promote), with no change to the
// pooler's configuration. Clients writing in a loop see errors only for
// the transactions in flight when the primary stopped (those begun later
// wait for a server), and every transaction begun after the promotion
// commits on the new primary.
func TestFailoverFollowsPrimary(t *testing.T) {
	needPG(t)
	primary := startSecondCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	setup, err := pgx.Connect(ctx, primary.superuserConnString(appDB))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Exec(ctx, "CREATE TABLE fo (port int); ALTER TABLE fo OWNER TO "+appUser); err != nil {
		t.Fatal(err)
	}
	setup.Close(ctx)
	standby := startStandby(t, primary)

	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{"server_login_retry": "0.1"}),
		fmt.Sprintf("[databases]\nfo = host=127.0.0.1,127.0.0.1 port=%d,%d dbname=%s target_session_attrs=read-write\n",
			standby.port, primary.port, appDB)), opsUserlist)
	connstr := p.ConnString("fo", appUser, appPassword)

	const clients = 3
	var (
		mu   sync.Mutex
		txs  = make([][]foTx, clients)
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var conn *pgx.Conn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				tx := foTx{start: time.Now()}
				if conn == nil {
					cfg, err := pgx.ParseConfig(connstr)
					if err != nil {
						tx.err = err
					} else {
						cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
						conn, tx.err = pgx.ConnectConfig(ctx, cfg)
					}
				}
				if tx.err == nil {
					tx.err = pgx.BeginFunc(ctx, conn, func(tr pgx.Tx) error {
						if err := tr.QueryRow(ctx, "INSERT INTO fo SELECT inet_server_port() RETURNING port").Scan(&tx.port); err != nil {
							return err
						}
						_, err := tr.Exec(ctx, "SELECT pg_sleep(0.01)")
						return err
					})
				}
				if tx.err != nil && conn != nil {
					// The pooler closes a client whose server was lost
					// mid-transaction, as PgBouncer does: reconnect.
					conn.Close(context.Background())
					conn = nil
				}
				mu.Lock()
				txs[i] = append(txs[i], tx)
				mu.Unlock()
			}
		}(i)
	}
	// committed counts each client's transactions begun after since that
	// committed on port.
	waitCommitted := func(since time.Time, port, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // a failsafe, not a measurement
		for {
			ok := true
			mu.Lock()
			for _, list := range txs {
				c := 0
				for _, tx := range list {
					if tx.err == nil && tx.port == port && !tx.start.Before(since) {
						c++
					}
				}
				ok = ok && c >= n
			}
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("clients did not each commit %d transactions on port %d:\n%v\npooler log:\n%s", n, port, txs, p.Log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCommitted(time.Time{}, primary.port, 3)
	if !p.LogContains("target_session_attrs not met") {
		t.Errorf("the standby was not refused for read-write:\n%s", p.Log())
	}

	primary.stopServer()
	stopped := time.Now()
	standby.promote(t)
	promoted := time.Now()
	waitCommitted(promoted, standby.port, 3)
	close(stop)
	wg.Wait()

	var before, after, failed int
	for i, list := range txs {
		for _, tx := range list {
			switch {
			case tx.err != nil && tx.start.Before(stopped):
				failed++ // in flight when the primary stopped
			case tx.err != nil:
				t.Errorf("client %d: a transaction begun after the primary stopped failed: %v", i, tx.err)
			case tx.start.Before(promoted) && tx.port == primary.port:
				before++
			case !tx.start.Before(promoted) && tx.port == standby.port:
				after++
			case !tx.start.Before(promoted):
				t.Errorf("client %d: a transaction begun after the promotion committed on port %d, want %d", i, tx.port, standby.port)
			default:
				after++ // committed on the new primary while it was promoted
			}
		}
	}
	if failed > clients {
		t.Errorf("%d transactions failed across the failover, more than the %d in flight", failed, clients)
	}
	// The writes are on the new primary.
	conn, err := pgx.Connect(ctx, standby.superuserConnString(appDB))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM fo WHERE port = $1", standby.port).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < after {
		t.Errorf("the new primary has %d rows written on it, the clients committed %d there", n, after)
	}
	t.Logf("%d transactions on the old primary, %d failed across the failover, %d on the new primary", before, failed, after)
}
