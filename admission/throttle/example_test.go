package throttle_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgturnstile/pgturnstile/admission/throttle"
)

// A batch worker that tells pgturnstile it is low priority, throttles itself
// when the pooler sheds it, and retries sheds with backoff. It needs a running
// pgturnstile, so it has no Output and is only compiled.
func Example() {
	ctx := context.Background()

	// One Throttle per database the process talks to. A 20 s window forgets
	// an incident within about 20 s of the database recovering.
	th := throttle.New(throttle.Window(20*time.Second, 10))

	// The pooler learns the priority from the connection: options= is sent in
	// the startup packet, and pgturnstile consumes the pgturnstile.* settings.
	cfg, err := pgxpool.ParseConfig("host=127.0.0.1 port=6432 dbname=app user=batch " +
		"options='-c pgturnstile.priority=low -c pgturnstile.category=batch'")
	if err != nil {
		log.Fatal(err)
	}
	// The Tracer reports every statement's outcome to the Throttle.
	cfg.ConnConfig.Tracer = throttle.Tracer{Throttle: th}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// The client side learns the same class from the context.
	ctx = throttle.WithCategory(throttle.WithPriority(ctx, throttle.Low), "batch")

	err = th.Do(ctx, func(ctx context.Context) error {
		// A transaction is safe to retry: a shed arrives before it runs.
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE jobs SET state = 'done' WHERE id = $1", 42)
			return err
		})
	})

	// One code path for the pooler's sheds and the Throttle's own rejections.
	var pgErr *pgconn.PgError
	switch {
	case throttle.IsOverload(err):
		// An HTTP handler would answer 503 with a Retry-After here.
		log.Printf("database overloaded, try later: %v", err)
	case errors.As(err, &pgErr):
		log.Printf("query failed: %s %s", pgErr.Code, pgErr.Message)
	case err != nil:
		log.Print(err)
	}
}
