//go:build linux

package integration

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestPipelinedBatch: a pgx batch of 50 pipelined queries in transaction
// mode returns all 50 correct results while 20 other clients share the same
// 2 servers. A second form sends a Sync after every query (50 Syncs in
// flight): the server goes idle 50 times and must not be handed to another
// client before the last ReadyForQuery.
func TestPipelinedBatch(t *testing.T) {
	needPG(t)
	// Backends of an earlier test's pooler may still be exiting.
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "2"}, ""), testUserlist)

	// 20 background clients keep both servers busy with short queries.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var bgQueries, bgErrors atomic.Int64
	bgErr := make(chan error, 20)
	for i := 0; i < 20; i++ {
		conn := connectPgx(t, p.App())
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for ctx.Err() == nil {
				var got int
				want := i*1000 + int(bgQueries.Load()%1000)
				qctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := conn.QueryRow(qctx, "SELECT $1::int + 0 FROM pg_sleep(0.001)", want).Scan(&got)
				cancel()
				if err == nil && got != want {
					err = fmt.Errorf("background client %d got %d, want %d", i, got, want)
				}
				if err != nil {
					bgErrors.Add(1)
					select {
					case bgErr <- err:
					default:
					}
					return
				}
				bgQueries.Add(1)
			}
		}(i)
	}
	t.Cleanup(func() { stop(); wg.Wait() })

	conn := connectPgx(t, p.App())
	// Let the background load get going so the pool is contended.
	time.Sleep(200 * time.Millisecond)

	t.Run("batch one Sync", func(t *testing.T) {
		for round := 0; round < 3; round++ {
			b := &pgx.Batch{}
			for i := 0; i < 50; i++ {
				b.Queue("SELECT $1::int", i)
			}
			br := conn.SendBatch(ctxT(t, 20*time.Second), b)
			for i := 0; i < 50; i++ {
				var got int
				if err := br.QueryRow().Scan(&got); err != nil {
					t.Fatalf("round %d result %d: %v", round, i, err)
				}
				if got != i {
					t.Fatalf("round %d result %d = %d", round, i, got)
				}
			}
			if err := br.Close(); err != nil {
				t.Fatalf("batch close: %v", err)
			}
		}
	})

	t.Run("pipeline Sync per query", func(t *testing.T) {
		for round := 0; round < 3; round++ {
			pl := conn.PgConn().StartPipeline(ctxT(t, 20*time.Second))
			for i := 0; i < 50; i++ {
				pl.SendQueryParams("SELECT $1::int, pg_backend_pid()", [][]byte{[]byte(strconv.Itoa(i))}, nil, nil, nil)
				pl.SendPipelineSync()
			}
			if err := pl.Flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
			for i := 0; i < 50; i++ {
				res, err := pl.GetResults()
				if err != nil {
					t.Fatalf("round %d result %d: %v", round, i, err)
				}
				rr, ok := res.(*pgconn.ResultReader)
				if !ok {
					t.Fatalf("round %d result %d: got %T, want *pgconn.ResultReader", round, i, res)
				}
				r := rr.Read()
				if r.Err != nil {
					t.Fatalf("round %d result %d: %v", round, i, r.Err)
				}
				if len(r.Rows) != 1 || string(r.Rows[0][0]) != strconv.Itoa(i) {
					t.Fatalf("round %d result %d: rows %q", round, i, r.Rows)
				}
				res, err = pl.GetResults()
				if _, ok := res.(*pgconn.PipelineSync); err != nil || !ok {
					t.Fatalf("round %d sync %d: %T %v", round, i, res, err)
				}
			}
			if err := pl.Close(); err != nil {
				t.Fatalf("pipeline close: %v", err)
			}
		}
	})

	// After the pipelines the connection is in a clean state.
	if n := queryInt(t, conn, "SELECT 7"); n != 7 {
		t.Errorf("SELECT 7 = %d", n)
	}
	stop()
	wg.Wait()
	select {
	case err := <-bgErr:
		t.Errorf("%d background client(s) failed, first: %v", bgErrors.Load(), err)
	default:
	}
	if bgQueries.Load() < 20 {
		t.Errorf("background clients ran only %d queries; the pool was not shared", bgQueries.Load())
	}
	t.Logf("background queries while pipelining: %d", bgQueries.Load())
	if n := countBackends(t, appDB, appUser); n > 2 {
		t.Errorf("%d backends for app/appdb, want <= 2", n)
	}
}
