//go:build linux

package integration

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// TestCancel: SELECT pg_sleep(10) cancelled by the client ends with 57014
// within 1 s, the client's next query works, and a query another client is
// running on the same pool at the same time is not cancelled. Done twice:
// with pgx (context deadline → CancelRequest) and with psql (SIGINT).
func TestCancel(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "4"}, ""), testUserlist)

	// bystander runs SELECT pg_sleep(1.5) on its own connection while the
	// victim is cancelled, and reports its error (nil if not cancelled).
	bystander := func(t *testing.T) <-chan error {
		conn := connectPgx(t, p.App())
		ch := make(chan error, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err := conn.Exec(context.Background(), "SELECT pg_sleep(1.5)")
			ch <- err
		}()
		t.Cleanup(func() { <-done }) // runs before conn is closed
		return ch
	}
	// cancellingConn is a pgx conn that sends a CancelRequest when a
	// query's context ends. pgx's default only sets a deadline (and so loses
	// the connection); this gives the server 5 s to answer the cancel
	// before falling back to the deadline.
	cancellingConn := func(t *testing.T) *pgx.Conn {
		cfg := pgxConfig(t, p.App())
		cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 5 * time.Second}
		}
		conn, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}

	t.Run("pgx context", func(t *testing.T) {
		conn := cancellingConn(t)
		// Warm up: the pool has a server ready, so the cancel below hits a
		// query that is running on Postgres.
		if n := queryInt(t, conn, "SELECT 1"); n != 1 {
			t.Fatal(n)
		}
		other := bystander(t)
		time.Sleep(100 * time.Millisecond)

		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := conn.Exec(ctx, "SELECT pg_sleep(10)")
		elapsed := time.Since(start)
		wantPgError(t, err, "ERROR", "57014", "canceling statement due to user request")
		if elapsed > 1300*time.Millisecond { // 300 ms timeout + 1 s
			t.Errorf("cancelled query returned after %v, want within 1 s of the cancel", elapsed)
		}
		t.Logf("MEASURED pgx cancel: query returned %v after start (timeout 300ms)", elapsed)
		if n := queryInt(t, conn, "SELECT 5"); n != 5 {
			t.Errorf("next query after cancel: %d", n)
		}
		if err := <-other; err != nil {
			t.Errorf("bystander's pg_sleep(1.5) failed: %v", err)
		}
	})

	// The cancel arrives while the query still waits for a server (the
	// only one is held by an open transaction, released 1.2 s after the
	// cancel). Postgres semantics: the query ends with 57014, and the
	// pooler answers it itself, ending the wait, before the server is
	// free; it must not run its full 10 s.
	t.Run("pgx context while waiting for a server", func(t *testing.T) {
		p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
		holder := connectPgx(t, p.App())
		tx, err := holder.Begin(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctxT(t, 10*time.Second), "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		cfg := pgxConfig(t, p.App())
		cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 5 * time.Second}
		}
		conn, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var commitErr error
		commitDone := make(chan struct{})
		go func() {
			defer close(commitDone)
			time.Sleep(1500 * time.Millisecond)
			commitErr = tx.Commit(ctxT(t, 10*time.Second))
		}()
		t.Cleanup(func() { <-commitDone }) // before holder is closed
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = conn.Exec(ctx, "SELECT pg_sleep(10)")
		elapsed := time.Since(start)
		select {
		case <-commitDone:
			t.Error("the cancelled query ended only after the holder's COMMIT: the pooler did not end its wait")
		default:
		}
		t.Logf("MEASURED cancel of a waiting query: returned after %v: %v", elapsed, err)
		wantPgError(t, err, "ERROR", "57014", "")
		if elapsed > 1300*time.Millisecond {
			t.Errorf("cancelled query returned after %v, want within 1 s of the cancel", elapsed)
		}
		if n := queryInt(t, conn, "SELECT 6"); n != 6 {
			t.Errorf("next query after cancel: %d", n)
		}
		<-commitDone
		if commitErr != nil {
			t.Errorf("holder's COMMIT: %v", commitErr)
		}
	})

	t.Run("psql SIGINT", func(t *testing.T) {
		other := bystander(t)
		cmd := exec.Command(psqlPath, "-X", p.App()+" application_name=it-psql-cancel", "-c", "select pg_sleep(10)")
		cmd.Env = clientEnv(appPassword)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })

		// Wait until Postgres runs psql's query, so the SIGINT cancels a
		// running statement rather than the login.
		su := directSuperuser(t, "postgres")
		deadline := time.Now().Add(10 * time.Second)
		for {
			var n int
			err := su.QueryRow(ctxT(t, 5*time.Second), `SELECT count(*) FROM pg_stat_activity
				WHERE query = 'select pg_sleep(10)' AND state = 'active'`).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("psql's query never became active; stderr: %s", stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		start := time.Now()
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			elapsed := time.Since(start)
			t.Logf("MEASURED psql cancel: exited %v after SIGINT (%v)", elapsed, err)
			if elapsed > time.Second {
				t.Errorf("psql exited %v after SIGINT, want within 1 s", elapsed)
			}
			if !strings.Contains(stderr.String(), "canceling statement due to user request") {
				t.Errorf("psql stderr = %q, want it to contain %q", stderr.String(), "canceling statement due to user request")
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
				t.Errorf("psql exit: %v, want exit status 1 (query failed)", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("psql still running 5 s after SIGINT; stderr: %s", stderr.String())
		}
		if err := <-other; err != nil {
			t.Errorf("bystander's pg_sleep(1.5) failed: %v", err)
		}
		// Nothing is left running on the server.
		var n int
		_ = su.QueryRow(ctxT(t, 5*time.Second), `SELECT count(*) FROM pg_stat_activity WHERE query = 'select pg_sleep(10)' AND state = 'active'`).Scan(&n)
		if n != 0 {
			t.Errorf("%d backends still run psql's pg_sleep(10) after the cancel", n)
		}
	})
	// The pool still serves new clients.
	selectOne(t, p.App())
}
