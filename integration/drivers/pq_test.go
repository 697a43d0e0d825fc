//go:build linux

package drivers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"
)

// TestPq runs the scenarios with lib/pq through database/sql, in its
// default settings. lib/pq has no pipelining: its batch is one simple Query
// of pipelineLength statements. COPY FROM STDIN is lib/pq's CopyIn (rows as
// Go values); lib/pq cannot COPY TO STDOUT, so the rows are read back with
// SELECT and rendered in COPY's text format, which must give the file's
// bytes.
func TestPq(t *testing.T) {
	t.Parallel()
	runBoth(t, "lib/pq", func(t *testing.T, tg target) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		db, err := sql.Open("postgres", tg.connString())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(numClients)
		db.SetMaxIdleConns(numClients)
		cs := make([]*sql.Conn, numClients)
		for i := range cs {
			if cs[i], err = db.Conn(ctx); err != nil {
				t.Fatalf("client %d: %v", i+1, err)
			}
			defer cs[i].Close()
		}
		var out []string
		timed(t, &out, func() []string { return []string{pqPrepared(ctx, cs)} })
		timed(t, &out, func() []string { return []string{pqBatch(ctx, cs)} })
		timed(t, &out, func() []string { return []string{pqCopy(ctx, cs[0])} })
		timed(t, &out, func() []string { return []string{pqError(ctx, cs)} })
		timed(t, &out, func() []string { return []string{pqRows(ctx, cs[0])} })
		timed(t, &out, func() []string { return []string{pqTypes(ctx, cs[0])} })
		return out
	})
}

func eachConn(cs []*sql.Conn, fn func(conn *sql.Conn, id int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Go(func() { errs[i] = fn(c, i+1) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pqPrepared prepares both statements once per client (lib/pq names them
// per connection, so every client uses the same names for the same texts)
// and runs them in txnsPerClient explicit transactions.
func pqPrepared(ctx context.Context, cs []*sql.Conn) string {
	var mu sync.Mutex
	ok := 0
	err := eachConn(cs, func(conn *sql.Conn, id int) error {
		sel, err := conn.PrepareContext(ctx, prepSelectSQL)
		if err != nil {
			return fmt.Errorf("client %d: prepare: %w", id, err)
		}
		defer sel.Close()
		ins, err := conn.PrepareContext(ctx, prepInsertSQL)
		if err != nil {
			return fmt.Errorf("client %d: prepare: %w", id, err)
		}
		defer ins.Close()
		for seq := 1; seq <= txnsPerClient; seq++ {
			if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
				return fmt.Errorf("client %d seq %d: begin: %w", id, seq, err)
			}
			var c, s int
			if err := sel.QueryRowContext(ctx, id, seq).Scan(&c, &s); err != nil {
				return fmt.Errorf("client %d seq %d: select: %w", id, seq, err)
			}
			if c != id || s != seq {
				return fmt.Errorf("client %d seq %d: got (%d, %d)", id, seq, c, s)
			}
			if _, err := ins.ExecContext(ctx, id, seq); err != nil {
				return fmt.Errorf("client %d seq %d: insert: %w", id, seq, err)
			}
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				return fmt.Errorf("client %d seq %d: commit: %w", id, seq, err)
			}
			mu.Lock()
			ok++
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return errLine("prepared", err)
	}
	var n, d, sum int64
	if err := cs[0].QueryRowContext(ctx, prepCheckSQL).Scan(&n, &d, &sum); err != nil {
		return errLine("prepared", err)
	}
	return line("prepared", "clients", numClients, "txns", numClients*txnsPerClient, "ok", ok,
		"rows", n, "distinct", d, "sum", sum)
}

// pqBatch: each client sends pipelineLength INSERTs in one simple Query.
func pqBatch(ctx context.Context, cs []*sql.Conn) string {
	err := eachConn(cs, func(conn *sql.Conn, id int) error {
		var sb strings.Builder
		for i := 1; i <= pipelineLength; i++ {
			fmt.Fprintf(&sb, "INSERT INTO pipe_t (client, i, v) VALUES (%d, %d, 'c%d-%d');\n", id, i, id, i)
		}
		_, err := conn.ExecContext(ctx, sb.String())
		return err
	})
	if err != nil {
		return errLine("batch", err)
	}
	var n, good int64
	if err := cs[0].QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE v = 'c' || client || '-' || i) FROM pipe_t").Scan(&n, &good); err != nil {
		return errLine("batch", err)
	}
	return line("batch", "clients", numClients, "statements", pipelineLength, "rows", n, "ok", good)
}

func pqCopy(ctx context.Context, conn *sql.Conn) string {
	err := func() error {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		stmt, err := tx.PrepareContext(ctx, "COPY copy_t (id, t, n, b, ts) FROM STDIN")
		if err != nil {
			return err
		}
		for i := 1; i <= bigRows; i++ {
			r := copyRowAt(i)
			var t any = r.t
			if r.tNull {
				t = nil
			}
			if _, err := stmt.ExecContext(ctx, r.id, t, r.n, r.b, r.ts); err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
		}
		if _, err := stmt.ExecContext(ctx); err != nil {
			return err
		}
		if err := stmt.Close(); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if err != nil {
		return errLine("copy", fmt.Errorf("copy in: %w", err))
	}
	rows, err := conn.QueryContext(ctx, "SELECT id, t, n::text, b, ts FROM copy_t ORDER BY id")
	if err != nil {
		return errLine("copy", err)
	}
	defer rows.Close()
	var sb strings.Builder
	for rows.Next() {
		var r copyRow
		var t sql.NullString
		if err := rows.Scan(&r.id, &t, &r.n, &r.b, &r.ts); err != nil {
			return errLine("copy", err)
		}
		r.t, r.tNull = t.String, !t.Valid
		r.copyText(&sb)
	}
	if err := rows.Err(); err != nil {
		return errLine("copy", err)
	}
	return copyResult("copy", []byte(sb.String()))
}

func pqCode(err error) (code, msg string) {
	var pe *pq.Error
	if errors.As(err, &pe) {
		return string(pe.Code), pe.Message
	}
	if err == nil {
		return "none", ""
	}
	return "other", err.Error()
}

func pqError(ctx context.Context, cs []*sql.Conn) string {
	var mu sync.Mutex
	own, rolledBack := 0, 0
	first, next := map[string]int{}, map[string]int{}
	err := eachConn(cs, func(conn *sql.Conn, id int) error {
		for r := 0; r < errorRounds; r++ {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, errInsertSQL, id); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, errFailSQL, id)
			code1, msg := pqCode(err)
			_, err = tx.ExecContext(ctx, "SELECT 1")
			code2, _ := pqCode(err)
			if err := tx.Rollback(); err != nil {
				return fmt.Errorf("client %d: rollback: %w", id, err)
			}
			var n int64
			if err := conn.QueryRowContext(ctx, errCheckSQL, id).Scan(&n); err != nil {
				return fmt.Errorf("client %d: after rollback: %w", id, err)
			}
			mu.Lock()
			first[code1]++
			next[code2]++
			if msg == fmt.Sprintf("client %d failed", id) {
				own++
			}
			if n == 0 {
				rolledBack++
			}
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return errLine("error", err)
	}
	return line("error", "clients", numClients, "rounds", errorRounds, "first", codes(first),
		"own_message", own, "next", codes(next), "rolled_back", rolledBack)
}

func pqRows(ctx context.Context, conn *sql.Conn) string {
	rows, err := conn.QueryContext(ctx, rowsSQL)
	if err != nil {
		return errLine("rows", err)
	}
	defer rows.Close()
	h := sha256.New()
	n := 0
	for rows.Next() {
		var g int
		var m string
		if err := rows.Scan(&g, &m); err != nil {
			return errLine("rows", err)
		}
		n++
		fmt.Fprintf(h, "%d|%s\n", g, m)
	}
	if err := rows.Err(); err != nil {
		return errLine("rows", err)
	}
	return line("rows", "n", n, "sha256", hex.EncodeToString(h.Sum(nil)[:8]))
}

func pqTypes(ctx context.Context, conn *sql.Conn) string {
	var (
		t, n, textMD5, byteaMD5, numText, tsText string
		b                                        []byte
		ts                                       time.Time
		chars                                    int
	)
	err := conn.QueryRowContext(ctx, typesSQL, typesText, typesBytea(), typesNumeric, typesTime()).
		Scan(&t, &b, &n, &ts, &textMD5, &chars, &byteaMD5, &numText, &tsText)
	if err != nil {
		return errLine("types", err)
	}
	if t != typesText || !bytes.Equal(b, typesBytea()) || n != typesNumeric || !ts.Equal(typesTime()) {
		return errLine("types", fmt.Errorf("round trip: text %q, bytea %x, numeric %v, timestamptz %v", t, b, n, ts))
	}
	return typesResult(textMD5, chars, byteaMD5, numText, tsText, true)
}
