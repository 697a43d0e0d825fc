//go:build linux

package drivers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// pgxModes are the query exec modes of the matrix; the first is pgx's
// default.
var pgxModes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"cache_statement", pgx.QueryExecModeCacheStatement},
	{"cache_describe", pgx.QueryExecModeCacheDescribe},
	{"describe_exec", pgx.QueryExecModeDescribeExec},
	{"exec", pgx.QueryExecModeExec},
	{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
}

// TestPgx runs the scenarios with pgx v5 in each exec mode; the pipeline
// scenario is SendBatch. COPY (pgconn's CopyFrom/CopyTo, and pgx.CopyFrom's
// binary COPY) does not depend on the mode and runs in the default one.
func TestPgx(t *testing.T) {
	t.Parallel()
	for _, m := range pgxModes {
		t.Run(m.name, func(t *testing.T) {
			runBoth(t, "pgx "+m.name, func(t *testing.T, tg target) []string {
				connect := func(ctx context.Context) (*pgx.Conn, error) {
					cfg, err := pgx.ParseConfig(tg.connString())
					if err != nil {
						return nil, err
					}
					cfg.DefaultQueryExecMode = m.mode
					return pgx.ConnectConfig(ctx, cfg)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				cs, err := connectClients(ctx, connect)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.close()
				var out []string
				timed(t, &out, func() []string { return []string{pgxPrepared(ctx, cs)} })
				timed(t, &out, func() []string { return []string{pgxPipeline(ctx, cs)} })
				if m.mode == pgx.QueryExecModeCacheStatement {
					timed(t, &out, func() []string { return pgxCopy(ctx, cs[0]) })
				}
				timed(t, &out, func() []string { return []string{pgxError(ctx, cs)} })
				timed(t, &out, func() []string { return []string{pgxRows(ctx, cs[0])} })
				timed(t, &out, func() []string { return []string{pgxTypes(ctx, cs[0])} })
				return out
			})
		})
	}
}

type pgxConnect func(ctx context.Context) (*pgx.Conn, error)

// pgxClients are the run's numClients connections, client ids 1..n.
type pgxClients []*pgx.Conn

// connectClients opens numClients connections, closed when the test ends.
func connectClients(ctx context.Context, connect pgxConnect) (pgxClients, error) {
	cs := make(pgxClients, numClients)
	for i := range cs {
		c, err := connect(ctx)
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("connect client %d: %w", i+1, err)
		}
		cs[i] = c
	}
	return cs, nil
}

func (cs pgxClients) close() {
	for _, c := range cs {
		if c != nil {
			_ = c.Close(context.Background())
		}
	}
}

// each runs fn for every client concurrently; all errors are joined.
func (cs pgxClients) each(fn func(conn *pgx.Conn, id int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Go(func() { errs[i] = fn(c, i+1) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func pgxPrepared(ctx context.Context, cs pgxClients) string {
	var mu sync.Mutex
	ok := 0
	err := cs.each(func(conn *pgx.Conn, id int) error {
		// The insert is also prepared by name, once, before the first
		// transaction: every client uses the same name for the same text.
		if _, err := conn.Prepare(ctx, "prep_insert", prepInsertSQL); err != nil {
			return fmt.Errorf("client %d: prepare: %w", id, err)
		}
		for seq := 1; seq <= txnsPerClient; seq++ {
			tx, err := conn.Begin(ctx)
			if err != nil {
				return fmt.Errorf("client %d seq %d: begin: %w", id, seq, err)
			}
			var c, s int32
			if err := tx.QueryRow(ctx, prepSelectSQL, id, seq).Scan(&c, &s); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("client %d seq %d: select: %w", id, seq, err)
			}
			if c != int32(id) || s != int32(seq) {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("client %d seq %d: got (%d, %d)", id, seq, c, s)
			}
			if _, err := tx.Exec(ctx, "prep_insert", id, seq); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("client %d seq %d: insert: %w", id, seq, err)
			}
			if err := tx.Commit(ctx); err != nil {
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
	if err := cs[0].QueryRow(ctx, prepCheckSQL).Scan(&n, &d, &sum); err != nil {
		return errLine("prepared", err)
	}
	return line("prepared", "clients", numClients, "txns", numClients*txnsPerClient, "ok", ok,
		"rows", n, "distinct", d, "sum", sum)
}

func pgxPipeline(ctx context.Context, cs pgxClients) string {
	var mu sync.Mutex
	ok := 0
	err := cs.each(func(conn *pgx.Conn, id int) error {
		b := &pgx.Batch{}
		for k := 0; k < pipelineLength; k++ {
			i := k/2 + 1
			if k%2 == 0 {
				b.Queue(pipeInsertSQL, id, i, fmt.Sprintf("c%d-%d", id, i))
			} else {
				b.Queue(pipeSelectSQL, id, i)
			}
		}
		br := conn.SendBatch(ctx, b)
		for k := 0; k < pipelineLength; k++ {
			i := k/2 + 1
			if k%2 == 0 {
				if _, err := br.Exec(); err != nil {
					br.Close()
					return fmt.Errorf("client %d statement %d: %w", id, k, err)
				}
				continue
			}
			var v string
			if err := br.QueryRow().Scan(&v); err != nil {
				br.Close()
				return fmt.Errorf("client %d statement %d: %w", id, k, err)
			}
			if want := fmt.Sprintf("c%d-%d", id, i); v != want {
				br.Close()
				return fmt.Errorf("client %d statement %d: got %q, want %q", id, k, v, want)
			}
			mu.Lock()
			ok++
			mu.Unlock()
		}
		return br.Close()
	})
	if err != nil {
		return errLine("pipeline", err)
	}
	var n int64
	if err := cs[0].QueryRow(ctx, pipeCheckSQL).Scan(&n); err != nil {
		return errLine("pipeline", err)
	}
	return line("pipeline", "clients", numClients, "statements", pipelineLength, "ok", ok, "rows", n)
}

// pgxCopy: text COPY in from the file and out again with pgconn, then the
// first binaryCopyRows rows through pgx.CopyFrom (binary COPY) into
// copy_bin, copied out as text: both must give the file's bytes.
func pgxCopy(ctx context.Context, conn *pgx.Conn) []string {
	var out []string
	l, err := on(conn, func(conn *pgx.Conn) (string, error) {
		tag, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(copyBytes), "COPY copy_t FROM STDIN")
		if err != nil {
			return "", fmt.Errorf("copy from: %w", err)
		}
		if tag.RowsAffected() != bigRows {
			return "", fmt.Errorf("copy from: %s", tag)
		}
		var buf bytes.Buffer
		if _, err := conn.PgConn().CopyTo(ctx, &buf, copyOutSQL); err != nil {
			return "", fmt.Errorf("copy to: %w", err)
		}
		return copyResult("copy", buf.Bytes()), nil
	})
	if err != nil {
		l = errLine("copy", err)
	}
	out = append(out, l)

	l, err = on(conn, func(conn *pgx.Conn) (string, error) {
		n, err := conn.CopyFrom(ctx, pgx.Identifier{"copy_bin"}, []string{"id", "t", "n", "b", "ts"},
			pgx.CopyFromFunc(func() func() ([]any, error) {
				i := 0
				return func() ([]any, error) {
					if i == binaryCopyRows {
						return nil, nil
					}
					i++
					r := copyRowAt(i)
					var t any = r.t
					if r.tNull {
						t = nil
					}
					return []any{r.id, t, r.n, r.b, r.ts}, nil
				}
			}()))
		if err != nil {
			return "", fmt.Errorf("pgx.CopyFrom: %w", err)
		}
		if n != binaryCopyRows {
			return "", fmt.Errorf("pgx.CopyFrom copied %d rows", n)
		}
		var buf bytes.Buffer
		if _, err := conn.PgConn().CopyTo(ctx, &buf, strings.Replace(copyOutSQL, "copy_t", "copy_bin", 1)); err != nil {
			return "", fmt.Errorf("copy to: %w", err)
		}
		return copyResultN("copy_binary", buf.Bytes(), binaryCopyRows), nil
	})
	if err != nil {
		l = errLine("copy_binary", err)
	}
	return append(out, l)
}

func pgxError(ctx context.Context, cs pgxClients) string {
	var mu sync.Mutex
	own, rolledBack := 0, 0
	first, next := map[string]int{}, map[string]int{}
	err := cs.each(func(conn *pgx.Conn, id int) error {
		for r := 0; r < errorRounds; r++ {
			tx, err := conn.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, errInsertSQL, id); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, errFailSQL, id)
			code1, msg := pgCode(err)
			_, err = tx.Exec(ctx, "SELECT 1")
			code2, _ := pgCode(err)
			if err := tx.Rollback(ctx); err != nil {
				return fmt.Errorf("client %d: rollback: %w", id, err)
			}
			var n int64
			if err := conn.QueryRow(ctx, errCheckSQL, id).Scan(&n); err != nil {
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

func pgCode(err error) (code, msg string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.Message
	}
	if err == nil {
		return "none", ""
	}
	return "other", err.Error()
}

// codes prints a histogram of SQLSTATEs: just the code when there is one.
func codes(m map[string]int) string {
	if len(m) == 1 {
		for k := range m {
			return k
		}
	}
	return fmt.Sprint(m)
}

func pgxRows(ctx context.Context, conn *pgx.Conn) string {
	l, err := on(conn, func(conn *pgx.Conn) (string, error) {
		rows, err := conn.Query(ctx, rowsSQL)
		if err != nil {
			return "", err
		}
		h := sha256.New()
		n := 0
		var g int32
		var m string
		_, err = pgx.ForEachRow(rows, []any{&g, &m}, func() error {
			n++
			fmt.Fprintf(h, "%d|%s\n", g, m)
			return nil
		})
		return line("rows", "n", n, "sha256", hex.EncodeToString(h.Sum(nil)[:8])), err
	})
	if err != nil {
		return errLine("rows", err)
	}
	return l
}

func pgxTypes(ctx context.Context, conn *pgx.Conn) string {
	l, err := on(conn, func(conn *pgx.Conn) (string, error) {
		var num pgtype.Numeric
		if err := num.Scan(typesNumeric); err != nil {
			return "", err
		}
		var (
			t, textMD5, byteaMD5, numText, tsText string
			b                                     []byte
			n                                     pgtype.Numeric
			ts                                    time.Time
			chars                                 int
		)
		err := conn.QueryRow(ctx, typesSQL, typesText, typesBytea(), num, typesTime()).
			Scan(&t, &b, &n, &ts, &textMD5, &chars, &byteaMD5, &numText, &tsText)
		if err != nil {
			return "", err
		}
		nv, err := n.Value()
		if err != nil {
			return "", err
		}
		roundtrip := t == typesText && bytes.Equal(b, typesBytea()) && nv == typesNumeric && ts.Equal(typesTime())
		if !roundtrip {
			return "", fmt.Errorf("round trip: text %q, bytea %x, numeric %v, timestamptz %v", t, b, nv, ts)
		}
		return typesResult(textMD5, chars, byteaMD5, numText, tsText, roundtrip), nil
	})
	if err != nil {
		return errLine("types", err)
	}
	return l
}

// timed runs one scenario of a Go driver, appends its lines to out and logs
// how long it took.
func timed(t *testing.T, out *[]string, fn func() []string) {
	t.Helper()
	start := time.Now()
	lines := fn()
	t.Logf("%-12s %6v", scenarioOf(lines[0]), time.Since(start).Round(time.Millisecond))
	*out = append(*out, lines...)
}

// on runs fn with conn: it keeps the scenario bodies in one shape.
func on(conn *pgx.Conn, fn func(conn *pgx.Conn) (string, error)) (string, error) { return fn(conn) }
