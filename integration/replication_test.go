//go:build linux

package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// replicationCluster starts a small cluster of its own with wal_level =
// logical and walsenders, trust for postgres over TCP (replication
// included), and a database repdb with a table t published as pub. The
// shared cluster is left as it is: wal_level needs a restart.
func replicationCluster(t *testing.T) *cluster {
	t.Helper()
	rc, err := initCluster()
	if rc != nil {
		t.Cleanup(rc.stop)
	}
	if err != nil {
		t.Fatalf("replication cluster: %v", err)
	}
	rc.extraArgs = []string{"-c", "wal_level=logical", "-c", "max_wal_senders=10", "-c", "max_replication_slots=10"}
	if err := rc.prependHBA([]string{
		"host all postgres 127.0.0.1/32 trust",
		"host replication postgres 127.0.0.1/32 trust",
	}); err != nil {
		t.Fatal(err)
	}
	if err := rc.startOnFreePort(); err != nil {
		t.Fatalf("replication cluster: %v", err)
	}
	ctx := ctxT(t, 30*time.Second)
	if _, err := rc.monitor.Exec(ctx, "CREATE DATABASE repdb"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, rc.superuserConnString("repdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range []string{
		"CREATE TABLE t (a int PRIMARY KEY)",
		"INSERT INTO t VALUES (1)",
		"CREATE PUBLICATION pub FOR TABLE t",
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return rc
}

// walsenders counts the cluster's walsender backends.
func walsenders(t *testing.T, rc *cluster) int {
	t.Helper()
	var n int
	if err := rc.monitor.QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitNoWalsenders waits until no walsender is left: the pooler closed
// each replication client's server with its client.
func waitNoWalsenders(t *testing.T, rc *cluster, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for walsenders(t, rc) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("walsenders still open 10 s after %s", after)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pgTool is a PostgreSQL client program run as the cluster's OS user, in
// dir (made for it), with libpq's environment for the pooler.
func pgTool(ctx context.Context, rc *cluster, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(pgtest.BinDir, name), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10", "PGSSLMODE=disable", "PGPASSWORD=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: rc.cred}
	// pg_basebackup -X stream forks a WAL streamer that keeps the output
	// pipe open after its parent is killed at the context's end: without
	// a bound, CombinedOutput would wait for it, and a stall would hang
	// the test to the package's timeout instead of failing it.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// toolDir makes a directory the cluster's OS user may write.
func toolDir(t *testing.T, rc *cluster, name string) string {
	t.Helper()
	dir := filepath.Join(rc.dir, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if rc.cred != nil {
		if err := os.Chown(dir, int(rc.cred.Uid), int(rc.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReplicationThroughPooler runs PostgreSQL's replication clients
// through the pooler (replication=true|database, PgBouncer 1.23): a base
// backup, WAL streaming into a slot, logical decoding, and a logical
// subscription on a second cluster whose connection is the pooler. The
// pool is in transaction mode: replication connections are not pooled
// whatever the mode, and each one's server is closed with it.
func TestReplicationThroughPooler(t *testing.T) {
	needPG(t)
	rc := replicationCluster(t)
	// Physical replication clients (pg_basebackup, pg_receivewal) ask
	// libpq for database "replication", whatever their conninfo says:
	// the pooler needs an entry for it, whose server database Postgres
	// ignores for a physical walsender. tcp_socket_buffer is PgBouncer's
	// suite's 4096: set after the handshake instead of before it, the
	// base backup stalled (TestSocketBufferBeforeHandshake).
	ini := fmt.Sprintf(`[databases]
repdb = host=127.0.0.1 port=%[1]d dbname=repdb
replication = host=127.0.0.1 port=%[1]d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = 0
unix_socket_dir =
auth_type = trust
auth_file = @AUTH_FILE@
pool_mode = transaction
default_pool_size = 4
query_wait_timeout = 20
tcp_socket_buffer = 4096
`, rc.port)
	p := startPooler(t, ini, `"postgres" ""`+"\n")
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=repdb sslmode=disable", p.Port)

	t.Run("pg_basebackup", func(t *testing.T) {
		dir := toolDir(t, rc, "basebackup")
		out, err := pgTool(ctxT(t, 120*time.Second), rc, dir, "pg_basebackup",
			"-d", conninfo, "-D", filepath.Join(dir, "data"), "--checkpoint=fast", "-X", "stream").CombinedOutput()
		if err != nil {
			t.Fatalf("pg_basebackup through the pooler: %v\n%s\npooler log:\n%s", err, out, p.Log())
		}
		for _, f := range []string{"PG_VERSION", "backup_manifest", "global/pg_control"} {
			if _, err := os.Stat(filepath.Join(dir, "data", f)); err != nil {
				t.Errorf("the base backup lacks %s: %v", f, err)
			}
		}
		waitNoWalsenders(t, rc, "pg_basebackup")
	})

	t.Run("pg_receivewal", func(t *testing.T) {
		if _, err := rc.monitor.Exec(ctxT(t, 10*time.Second), "SELECT pg_create_physical_replication_slot('wal_slot')"); err != nil {
			t.Fatal(err)
		}
		dir := toolDir(t, rc, "wal")
		cmd := pgTool(ctxT(t, 60*time.Second), rc, dir, "pg_receivewal",
			"-d", conninfo, "--slot=wal_slot", "-D", dir, "--no-loop", "--status-interval=1")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Streaming has begun once the segment being received exists.
		deadline := time.Now().Add(20 * time.Second)
		for {
			files, _ := filepath.Glob(filepath.Join(dir, "*.partial"))
			if len(files) > 0 {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("pg_receivewal wrote no segment in 20 s:\n%s\npooler log:\n%s", out.String(), p.Log())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if n := walsenders(t, rc); n != 1 {
			t.Errorf("%d walsenders while pg_receivewal streams, want 1", n)
		}
		cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Errorf("pg_receivewal after SIGINT: %v\n%s", err, out.String())
		}
		waitNoWalsenders(t, rc, "pg_receivewal")
	})

	t.Run("pg_recvlogical", func(t *testing.T) {
		// A logical slot belongs to its database.
		direct, err := pgx.Connect(ctxT(t, 10*time.Second), rc.superuserConnString("repdb"))
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close(context.Background())
		if _, err := direct.Exec(ctxT(t, 10*time.Second), "SELECT pg_create_logical_replication_slot('dec_slot', 'test_decoding')"); err != nil {
			t.Fatal(err)
		}
		dir := toolDir(t, rc, "logical")
		cmd := pgTool(ctxT(t, 60*time.Second), rc, dir, "pg_recvlogical",
			"-d", conninfo, "--slot=dec_slot", "--start", "--no-loop", "-f", "-")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cmd.Process.Kill()
			cmd.Wait()
		}()
		// The change is made through the pooler too, by an ordinary
		// client of the same pool.
		app := connectPgx(t, conninfo)
		if _, err := app.Exec(ctxT(t, 10*time.Second), "INSERT INTO t VALUES (2)"); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var got []string
		timeout := time.After(20 * time.Second)
		for done := false; !done; {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("pg_recvlogical ended after %q:\n%s\npooler log:\n%s", got, stderr.String(), p.Log())
				}
				got = append(got, l)
				done = strings.HasPrefix(l, "COMMIT")
			case <-timeout:
				t.Fatalf("pg_recvlogical decoded %q in 20 s:\n%s\npooler log:\n%s", got, stderr.String(), p.Log())
			}
		}
		if len(got) != 3 || !strings.HasPrefix(got[0], "BEGIN ") || got[1] != "table public.t: INSERT: a[integer]:2" {
			t.Errorf("pg_recvlogical decoded %q, want BEGIN, the INSERT of 2, COMMIT", got)
		}
	})

	t.Run("subscription", func(t *testing.T) {
		sub, err := initCluster()
		if sub != nil {
			t.Cleanup(sub.stop)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.startOnFreePort(); err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t, 60*time.Second)
		if _, err := sub.monitor.Exec(ctx, "CREATE TABLE t (a int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		if _, err := sub.monitor.Exec(ctx, fmt.Sprintf("CREATE SUBSCRIPTION s CONNECTION '%s' PUBLICATION pub", conninfo)); err != nil {
			t.Fatalf("CREATE SUBSCRIPTION through the pooler: %v\npooler log:\n%s", err, p.Log())
		}
		t.Cleanup(func() {
			// The apply worker would keep reconnecting to the pooler.
			sub.monitor.Exec(context.Background(), "ALTER SUBSCRIPTION s DISABLE")
		})
		waitRows := func(want int, what string) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for {
				var n int
				if err := sub.monitor.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == want {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the subscriber has %d rows, want %d\nsubscriber log:\n%s\npooler log:\n%s", what, n, want, pgtest.TailFile(sub.logPath, 20), p.Log())
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		// The initial copy (rows 1 and 2), then streamed changes.
		waitRows(2, "initial copy")
		app := connectPgx(t, conninfo)
		if _, err := app.Exec(ctx, "INSERT INTO t VALUES (3)"); err != nil {
			t.Fatal(err)
		}
		waitRows(3, "streamed insert")
	})
}
