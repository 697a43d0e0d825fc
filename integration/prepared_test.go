//go:build linux

package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPgxDefaultModePreparedStatements: pgx's default query mode prepares
// named statements and caches them per connection. In transaction mode the
// pooler must make that work although every query may run on another
// server (DESIGN.md, "Behaviours users depend on"). Six unmodified pgx
// clients share two servers, each with its own set of cached statements.
func TestPgxDefaultModePreparedStatements(t *testing.T) {
	needPG(t)
	// Backends of an earlier test's pooler may still be exiting.
	waitNoBackends(t, appDB, appUser)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "2"}, ""), testUserlist)

	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for c := 0; c < 6; c++ {
		cfg, err := pgx.ParseConfig(p.App()) // default exec mode: cache_statement
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for round := 0; round < 10; round++ {
				for k := 0; k < 4; k++ {
					// A different statement text per (client, k).
					sql := fmt.Sprintf("SELECT $1::int + %d /* client %d */", k, c)
					var got int
					if err := conn.QueryRow(ctx, sql, round).Scan(&got); err != nil {
						errs <- fmt.Errorf("client %d round %d k %d: %w", c, round, k, err)
						return
					}
					if got != round+k {
						errs <- fmt.Errorf("client %d round %d k %d: got %d, want %d", c, round, k, got, round+k)
						return
					}
				}
				b := &pgx.Batch{}
				for i := 0; i < 5; i++ {
					b.Queue(fmt.Sprintf("SELECT $1::int * %d /* batch client %d */", i, c), round)
				}
				br := conn.SendBatch(ctx, b)
				for i := 0; i < 5; i++ {
					var got int
					if err := br.QueryRow().Scan(&got); err != nil || got != round*i {
						errs <- fmt.Errorf("client %d round %d batch %d: got %d, %v", c, round, i, got, err)
						br.Close()
						return
					}
				}
				if err := br.Close(); err != nil {
					errs <- fmt.Errorf("client %d batch close: %w", c, err)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := countBackends(t, appDB, appUser); n > 2 {
		t.Errorf("%d backends, want <= 2", n)
	}
}
