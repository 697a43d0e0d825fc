//go:build linux

package integration

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// restartClientErrors are the errors a transaction in flight at a Postgres
// restart may see: its server ended under it (Postgres's FATAL 57P01, the
// pooler's "server conn crashed?", or the socket closed after either).
var restartClientErrors = []string{
	"terminating connection",
	"server closed the connection",
	"server conn crashed?",
	"unexpected EOF",
}

// loopClient is one client running short transactions through the pooler
// until stop, reconnecting when an error closed its connection.
type loopClient struct {
	okBefore, okAfter atomic.Int64 // transactions done before / after restartDone
	mu                sync.Mutex
	errs              []timedErr
}

type timedErr struct {
	at  time.Time
	err error
}

func (lc *loopClient) fail(err error) {
	lc.mu.Lock()
	lc.errs = append(lc.errs, timedErr{time.Now(), err})
	lc.mu.Unlock()
}

// run loops BEGIN; SELECT; COMMIT on connstr until stop is closed;
// restarted says whether a success counts as after the restart.
func (lc *loopClient) run(connstr string, stop <-chan struct{}, restarted *atomic.Bool) {
	cfg, err := pgx.ParseConfig(connstr)
	if err != nil {
		lc.fail(err)
		return
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if conn == nil || conn.IsClosed() {
			conn, err = pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				cancel()
				conn = nil
				lc.fail(err)
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var n int
			return tx.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'smoke'").Scan(&n)
		})
		cancel()
		switch {
		case err != nil:
			lc.fail(err)
		case restarted.Load():
			lc.okAfter.Add(1)
		default:
			lc.okBefore.Add(1)
		}
	}
}

// TestPostgresRestart: `pg_ctl restart -m fast` under 20 clients looping
// short transactions through the pooler (transaction mode,
// server_login_retry = 1). Only a transaction in flight when Postgres shut
// down fails, so each client sees at most one error, during the restart and
// of the kind "the server went away"; a client whose connection that error
// closed reconnects, and every client goes on completing transactions
// after Postgres is back: the clients that sent a transaction while
// Postgres was down waited for it (latency, not an error).
func TestPostgresRestart(t *testing.T) {
	c := needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"server_login_retry": "1"}, ""), testUserlist)

	const clients = 20
	stop := make(chan struct{})
	var restarted atomic.Bool
	lcs := make([]*loopClient, clients)
	var wg sync.WaitGroup
	for i := range lcs {
		lcs[i] = &loopClient{}
		wg.Add(1)
		go func(lc *loopClient) {
			defer wg.Done()
			lc.run(p.App(), stop, &restarted)
		}(lcs[i])
	}
	stopped := false
	stopClients := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopClients()

	// Every client is running transactions before the restart.
	waitFor(t, 10*time.Second, "every client to complete a transaction", func() bool {
		for _, lc := range lcs {
			if lc.okBefore.Load() == 0 {
				return false
			}
		}
		return true
	})
	restartStart := time.Now()
	if err := c.restartFast(); err != nil {
		t.Fatalf("restarting Postgres: %v", err)
	}
	restartDone := time.Now()
	restarted.Store(true)
	t.Logf("Postgres restarted in %v", restartDone.Sub(restartStart))

	// Each client completes transactions after the restart: the ones that
	// waited through it first (server_login_retry), then more.
	waitFor(t, 20*time.Second, "every client to complete 10 transactions after the restart", func() bool {
		for _, lc := range lcs {
			if lc.okAfter.Load() < 10 {
				return false
			}
		}
		return true
	})
	stopClients()

	var before, after, nerr int64
	for i, lc := range lcs {
		before += lc.okBefore.Load()
		after += lc.okAfter.Load()
		nerr += int64(len(lc.errs))
		if len(lc.errs) > 1 {
			t.Errorf("client %d: %d errors, want at most 1 (the transaction in flight at the restart): %v", i, len(lc.errs), lc.errs)
		}
		for _, e := range lc.errs {
			if e.at.Before(restartStart) || e.at.After(restartDone) {
				t.Errorf("client %d: error %v after the restart began, outside the restart [0, %v]: %v",
					i, e.at.Sub(restartStart), restartDone.Sub(restartStart), e.err)
			}
			if !isServerGone(e.err) {
				t.Errorf("client %d: error of the wrong kind (want the server going away): %v", i, e.err)
			}
		}
	}
	t.Logf("%d clients: %d transactions before the restart, %d after, %d errors (transactions in flight at the restart)",
		clients, before, after, nerr)
	p.Alive(t)
}

// isServerGone reports whether err is one of restartClientErrors.
func isServerGone(err error) bool {
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, s := range restartClientErrors {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}
