//go:build linux

package integration

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestUnnamedStatementAcrossSyncs: drivers that Parse/Describe the unnamed
// statement in one Sync cycle and Bind/Execute it in the next (lib/pq in its
// default settings, pgx's describe-exec mode) keep working in transaction
// mode while other clients take the servers in between. The pooler recreates
// the client's unnamed statement on whichever server the second cycle gets.
func TestUnnamedStatementAcrossSyncs(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "2"}, ""), testUserlist)
	ctx := ctxT(t, 60*time.Second)

	db := connectPq(t, p.App()) // lib/pq defaults: no binary_parameters
	db.SetMaxOpenConns(6)

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	// Churn: simple queries that take the two servers between cycles and
	// replace their unnamed statements.
	stop := make(chan struct{})
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := connectPgx(t, p.App())
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Exec(ctx, "SELECT 'churn'", pgx.QueryExecModeSimpleProtocol); err != nil {
					errs <- fmt.Errorf("churn: %w", err)
					return
				}
			}
		}()
	}
	var clients sync.WaitGroup
	for id := 0; id < 6; id++ {
		clients.Add(2)
		go func(id int) {
			defer clients.Done()
			for i := 0; i < 100; i++ {
				var got string
				want := fmt.Sprintf("pq-%d-%d", id, i)
				if err := db.QueryRowContext(ctx, "SELECT $1::text || '-' || $2::int", fmt.Sprintf("pq-%d", id), i).Scan(&got); err != nil {
					errs <- fmt.Errorf("lib/pq client %d query %d: %w", id, i, err)
					return
				}
				if got != want {
					errs <- fmt.Errorf("lib/pq client %d got %q, want %q", id, got, want)
					return
				}
			}
		}(id)
		go func(id int) {
			defer clients.Done()
			c := connectPgx(t, p.App())
			for i := 0; i < 100; i++ {
				var got string
				want := fmt.Sprintf("pgx-%d-%d", id, i)
				err := c.QueryRow(ctx, "SELECT $1::text || '-' || $2::int", pgx.QueryExecModeDescribeExec, fmt.Sprintf("pgx-%d", id), i).Scan(&got)
				if err != nil {
					errs <- fmt.Errorf("pgx describe-exec client %d query %d: %w", id, i, err)
					return
				}
				if got != want {
					errs <- fmt.Errorf("pgx client %d got %q, want %q", id, got, want)
					return
				}
			}
		}(id)
	}
	clients.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
