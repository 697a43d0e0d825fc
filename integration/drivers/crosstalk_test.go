//go:build linux

package drivers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	crossClients    = 20
	crossIterations = 60
)

// TestNoCrossTalk: no client ever receives another client's result, error
// or statement. crossClients pgx clients (exec modes round-robin, each with
// application_name client-<id>) share a pool of 2 servers; each runs
// crossIterations random operations, and every row and every error that
// comes back must carry the client's own id and the query's nonce:
//
//   - a transaction selecting (id, nonce, application_name) with the
//     statement text every client uses;
//   - the client's own statement "mine", prepared at connect under the same
//     name by every client but with the client id in its text;
//   - tagged_fail(id) outside and inside a transaction (then ROLLBACK);
//   - a batch of five tagged selects;
//   - 50 rows, each tagged.
func TestNoCrossTalk(t *testing.T) {
	t.Parallel()
	runBoth(t, "pgx 20 clients, tagged", func(t *testing.T, tg target) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var rowsChecked, errsChecked atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, crossClients)
		for i := range crossClients {
			id := i + 1
			wg.Go(func() {
				errs[i] = crossClient(ctx, tg, id, pgxModes[i%len(pgxModes)].mode, &rowsChecked, &errsChecked)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return []string{errLine("no_cross_talk", err)}
		}
		return []string{line("no_cross_talk", "clients", crossClients, "iterations", crossIterations,
			"rows_checked", rowsChecked.Load(), "errors_checked", errsChecked.Load())}
	})
}

func crossClient(ctx context.Context, tg target, id int, mode pgx.QueryExecMode, rowsChecked, errsChecked *atomic.Int64) error {
	cfg, err := pgx.ParseConfig(tg.connString())
	if err != nil {
		return err
	}
	cfg.DefaultQueryExecMode = mode
	app := "client-" + strconv.Itoa(id)
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("client %d: connect: %w", id, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Prepare(ctx, "mine", fmt.Sprintf("SELECT %d::int AS client, $1::text AS nonce", id)); err != nil {
		return fmt.Errorf("client %d: prepare: %w", id, err)
	}
	rng := rand.New(rand.NewPCG(uint64(id), 42)) // same operations in every run
	seq := 0
	nonce := func() string { seq++; return fmt.Sprintf("n%d-%d-%d", id, seq, rng.Uint32()) }
	check := func(what string, gotID int32, gotNonce, wantNonce string) error {
		rowsChecked.Add(1)
		if int(gotID) != id || gotNonce != wantNonce {
			return fmt.Errorf("client %d: %s: got (%d, %q), want (%d, %q)", id, what, gotID, gotNonce, id, wantNonce)
		}
		return nil
	}
	checkErr := func(what string, err error) error {
		errsChecked.Add(1)
		code, msg := pgCode(err)
		if want := fmt.Sprintf("client %d failed", id); code != "P0001" || msg != want {
			return fmt.Errorf("client %d: %s: got error %s %q, want P0001 %q", id, what, code, msg, want)
		}
		return nil
	}
	const sharedSQL = "SELECT $1::int AS client, $2::text AS nonce"

	for it := 0; it < crossIterations; it++ {
		switch op := rng.IntN(5); op {
		case 0:
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			n := nonce()
			var c int32
			var gotN, gotApp string
			if err := tx.QueryRow(ctx, "SELECT $1::int, $2::text, current_setting('application_name')", id, n).Scan(&c, &gotN, &gotApp); err != nil {
				return fmt.Errorf("client %d: tx select: %w", id, err)
			}
			if err := check("tx select", c, gotN, n); err != nil {
				return err
			}
			if gotApp != app {
				return fmt.Errorf("client %d: application_name is %q", id, gotApp)
			}
			if err := tx.Commit(ctx); err != nil {
				return err
			}
		case 1:
			n := nonce()
			var c int32
			var gotN string
			if err := conn.QueryRow(ctx, "mine", n).Scan(&c, &gotN); err != nil {
				return fmt.Errorf("client %d: mine: %w", id, err)
			}
			if err := check("own statement", c, gotN, n); err != nil {
				return err
			}
		case 2:
			_, err := conn.Exec(ctx, "SELECT tagged_fail($1)", id)
			if err := checkErr("tagged_fail", err); err != nil {
				return err
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "SELECT tagged_fail($1)", id)
			if err := checkErr("tagged_fail in a transaction", err); err != nil {
				return err
			}
			if err := tx.Rollback(ctx); err != nil {
				return err
			}
		case 3:
			b := &pgx.Batch{}
			ns := make([]string, 5)
			for k := range ns {
				ns[k] = nonce()
				b.Queue(sharedSQL, id, ns[k])
			}
			br := conn.SendBatch(ctx, b)
			for k := range ns {
				var c int32
				var gotN string
				if err := br.QueryRow().Scan(&c, &gotN); err != nil {
					br.Close()
					return fmt.Errorf("client %d: batch: %w", id, err)
				}
				if err := check("batch", c, gotN, ns[k]); err != nil {
					br.Close()
					return err
				}
			}
			if err := br.Close(); err != nil {
				return err
			}
		case 4:
			n := nonce()
			rows, _ := conn.Query(ctx, "SELECT $1::int, $2::text || ':' || g FROM generate_series(1, 50) AS g", id, n)
			g := 0
			var c int32
			var gotN string
			_, err := pgx.ForEachRow(rows, []any{&c, &gotN}, func() error {
				g++
				return check("rows", c, gotN, n+":"+strconv.Itoa(g))
			})
			if err != nil {
				return fmt.Errorf("client %d: rows: %w", id, err)
			}
			if g != 50 {
				return fmt.Errorf("client %d: %d rows, want 50", id, g)
			}
		}
	}
	return nil
}
