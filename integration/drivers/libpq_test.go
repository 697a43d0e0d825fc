//go:build linux

package drivers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
)

// psqlPath is Debian's wrapper, which picks the newest client (15 in CI).
const psqlPath = "/usr/bin/psql"

// psqlRun runs psql -X -q -At against tg with args, stdin as its input.
func psqlRun(ctx context.Context, tg target, stdin string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, psqlPath, append([]string{"-X", "-q", "-At"}, args...)...)
	cmd.Env = tg.env()
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("psql %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(e.String()))
	}
	return o.String(), e.String(), err
}

// TestPsql runs the scenarios with psql (libpq, simple protocol). psql 15
// cannot send parameters or prepare at the protocol level, so there is no
// prepared scenario and types are sent as literals; its batch is one -c of
// pipelineLength statements, its COPY is \copy.
func TestPsql(t *testing.T) {
	t.Parallel()
	needTool(t, psqlPath)
	runBoth(t, "psql", func(t *testing.T, tg target) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var out []string
		timed(t, &out, func() []string { return []string{psqlBatch(ctx, tg)} })
		timed(t, &out, func() []string { return []string{psqlCopy(ctx, t, tg)} })
		timed(t, &out, func() []string { return []string{psqlError(ctx, tg)} })
		timed(t, &out, func() []string { return psqlRows(ctx, tg) })
		timed(t, &out, func() []string { return []string{psqlTypes(ctx, tg)} })
		return out
	})
}

// eachClient runs fn for client ids 1..numClients concurrently.
func eachClient(fn func(id int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, numClients)
	for i := range errs {
		wg.Go(func() { errs[i] = fn(i + 1) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// psqlBatch: each client sends pipelineLength statements (INSERT, SELECT of
// what it inserted, …) as one -c, that is one simple Query.
func psqlBatch(ctx context.Context, tg target) string {
	var mu sync.Mutex
	ok := 0
	err := eachClient(func(id int) error {
		var sb strings.Builder
		for k := 0; k < pipelineLength; k++ {
			i := k/2 + 1
			if k%2 == 0 {
				fmt.Fprintf(&sb, "INSERT INTO pipe_t (client, i, v) VALUES (%d, %d, 'c%d-%d'); ", id, i, id, i)
			} else {
				fmt.Fprintf(&sb, "SELECT v FROM pipe_t WHERE client = %d AND i = %d; ", id, i)
			}
		}
		stdout, _, err := psqlRun(ctx, tg, "", "-v", "ON_ERROR_STOP=1", "-c", sb.String())
		if err != nil {
			return err
		}
		got := strings.Split(strings.TrimSpace(stdout), "\n")
		for i, v := range got {
			if want := fmt.Sprintf("c%d-%d", id, i+1); v != want {
				return fmt.Errorf("client %d: result %d is %q, want %q", id, i, v, want)
			}
		}
		mu.Lock()
		ok += len(got)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return errLine("batch", err)
	}
	stdout, _, err := psqlRun(ctx, tg, "", "-c", pipeCheckSQL)
	if err != nil {
		return errLine("batch", err)
	}
	return line("batch", "clients", numClients, "statements", pipelineLength, "ok", ok, "rows", strings.TrimSpace(stdout))
}

func psqlCopy(ctx context.Context, t *testing.T, tg target) string {
	outPath := filepath.Join(t.TempDir(), "copy-out.txt")
	script := fmt.Sprintf("\\copy copy_t FROM '%s'\n\\copy (SELECT * FROM copy_t ORDER BY id) TO '%s'\n", copyFile(), outPath)
	if _, _, err := psqlRun(ctx, tg, script, "-v", "ON_ERROR_STOP=1", "-f", "-"); err != nil {
		return errLine("copy", err)
	}
	got, err := os.ReadFile(outPath)
	if err != nil {
		return errLine("copy", err)
	}
	return copyResult("copy", got)
}

var psqlErrRE = regexp.MustCompile(`(?m)^(first|next|count) (.*)$`)

// psqlError: one psql per client runs errorRounds rounds of the error
// scenario from a script, without ON_ERROR_STOP, echoing psql's
// LAST_ERROR_SQLSTATE and LAST_ERROR_MESSAGE.
func psqlError(ctx context.Context, tg target) string {
	var mu sync.Mutex
	own, rolledBack := 0, 0
	first, next := map[string]int{}, map[string]int{}
	err := eachClient(func(id int) error {
		var sb strings.Builder
		for r := 0; r < errorRounds; r++ {
			fmt.Fprintf(&sb, "BEGIN;\nINSERT INTO err_t (client) VALUES (%d);\nSELECT tagged_fail(%d);\n", id, id)
			sb.WriteString("\\echo first :LAST_ERROR_SQLSTATE :LAST_ERROR_MESSAGE\nSELECT 1;\n\\echo next :LAST_ERROR_SQLSTATE\nROLLBACK;\n")
			fmt.Fprintf(&sb, "\\echo count\nSELECT count(*) FROM err_t WHERE client = %d;\n", id)
		}
		stdout, _, err := psqlRun(ctx, tg, sb.String(), "-f", "-")
		if err != nil {
			return err
		}
		// "count" is echoed on its own line, the count follows.
		stdout = strings.ReplaceAll(stdout, "count\n", "count ")
		m := psqlErrRE.FindAllStringSubmatch(stdout, -1)
		if len(m) != 3*errorRounds {
			return fmt.Errorf("client %d: unexpected output:\n%s", id, stdout)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, kv := range m {
			switch kv[1] {
			case "first":
				code, msg, _ := strings.Cut(kv[2], " ")
				first[code]++
				if msg == fmt.Sprintf("client %d failed", id) {
					own++
				}
			case "next":
				next[kv[2]]++
			case "count":
				if kv[2] == "0" {
					rolledBack++
				}
			}
		}
		return nil
	})
	if err != nil {
		return errLine("error", err)
	}
	return line("error", "clients", numClients, "rounds", errorRounds, "first", codes(first),
		"own_message", own, "next", codes(next), "rolled_back", rolledBack)
}

// psqlRows: -A -F '|' prints exactly the "<g>|<md5>\n" lines the rows
// scenario hashes; rows_fetch does the same with FETCH_COUNT=1000, where
// psql reads through a cursor in a transaction.
func psqlRows(ctx context.Context, tg target) []string {
	var out []string
	for _, v := range []struct{ scenario, fetch string }{{"rows", "0"}, {"rows_fetch", "1000"}} {
		stdout, _, err := psqlRun(ctx, tg, "", "-v", "ON_ERROR_STOP=1", "-v", "FETCH_COUNT="+v.fetch, "-F", "|", "-c", rowsSQL)
		if err != nil {
			out = append(out, errLine(v.scenario, err))
			continue
		}
		sum := sha256.Sum256([]byte(stdout))
		out = append(out, line(v.scenario, "n", strings.Count(stdout, "\n"), "sha256", hex.EncodeToString(sum[:8])))
	}
	return out
}

// psqlTypes sends the values as literals (psql has no parameters) and
// checks the server's view of them.
func psqlTypes(ctx context.Context, tg target) string {
	lit := "'" + strings.ReplaceAll(typesText, "'", "''") + "'"
	q := fmt.Sprintf(`SELECT encode(convert_to(t, 'UTF8'), 'hex'), encode(b, 'hex'), n::text, ts::text,
	md5(t), char_length(t), md5(b), n::text, ts::text
	FROM (SELECT %s::text, '\x%s'::bytea, '%s'::numeric, '%s'::timestamptz) AS v(t, b, n, ts)`,
		lit, hex.EncodeToString(typesBytea()), typesNumeric, typesTimestamptz)
	stdout, _, err := psqlRun(ctx, tg, "", "-v", "ON_ERROR_STOP=1", "-F", "|", "-c", q)
	if err != nil {
		return errLine("types", err)
	}
	f := strings.Split(strings.TrimSuffix(stdout, "\n"), "|")
	if len(f) != 9 {
		return errLine("types", fmt.Errorf("unexpected output %q", stdout))
	}
	chars, _ := strconv.Atoi(f[5])
	roundtrip := f[0] == hex.EncodeToString([]byte(typesText)) && f[1] == hex.EncodeToString(typesBytea()) &&
		f[2] == typesNumeric && f[3] == typesTimestamptz
	return typesResult(f[4], chars, f[6], f[7], f[8], roundtrip)
}

// ---------------------------------------------------------------------------
// pgbench

var (
	pgbenchProcessedRE = regexp.MustCompile(`number of transactions actually processed: (\d+)(?:/(\d+))?`)
	pgbenchFailedRE    = regexp.MustCompile(`number of failed transactions: (\d+)`)
)

// pgbenchRun runs pgbench against tg and returns processed and failed
// transactions as printed.
func pgbenchRun(ctx context.Context, tg target, args ...string) (processed, failed string, out string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(pgtest.BinDir, "pgbench"), args...)
	cmd.Env = tg.env()
	cmd.WaitDelay = time.Second
	b, err := cmd.CombinedOutput()
	out = string(b)
	if err != nil {
		return "", "", out, fmt.Errorf("pgbench %s: %v\n%s", strings.Join(args, " "), err, lastLines(out, 20))
	}
	m := pgbenchProcessedRE.FindStringSubmatch(out)
	f := pgbenchFailedRE.FindStringSubmatch(out)
	if m == nil || f == nil {
		return "", "", out, fmt.Errorf("pgbench: no processed/failed counts in:\n%s", out)
	}
	processed = m[1]
	if m[2] != "" {
		processed += "/" + m[2]
	}
	return processed, f[1], out, nil
}

// TestPgbench runs custom scripts with pgbench in each -M mode:
// transactions is 10 clients × 100 transactions like the prepared scenario
// (with -M prepared, pgbench prepares each statement once per client under
// the same names P_0… in every client); pipelines is 10 clients × 5
// \startpipeline blocks of pipelineLength statements (extended and prepared
// only: pgbench refuses pipelines in simple mode).
func TestPgbench(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"simple", "extended", "prepared"} {
		t.Run(mode, func(t *testing.T) {
			runBoth(t, "pgbench -M "+mode, func(t *testing.T, tg target) []string {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				dir := t.TempDir()
				txn := filepath.Join(dir, "txn.sql")
				os.WriteFile(txn, []byte("BEGIN;\nSELECT :client_id AS client;\nINSERT INTO pgb_log (client, v) VALUES (:client_id, 1);\nCOMMIT;\n"), 0o644)
				var pipe strings.Builder
				pipe.WriteString("\\startpipeline\n")
				for i := 0; i < pipelineLength; i++ {
					pipe.WriteString("INSERT INTO pgb_log (client, v) VALUES (:client_id, 2);\n")
				}
				pipe.WriteString("\\endpipeline\n")
				pipePath := filepath.Join(dir, "pipe.sql")
				os.WriteFile(pipePath, []byte(pipe.String()), 0o644)

				var out []string
				timed(t, &out, func() []string {
					p, f, _, err := pgbenchRun(ctx, tg, "-n", "-M", mode, "-c", strconv.Itoa(numClients), "-j", "2",
						"-t", strconv.Itoa(txnsPerClient), "-f", txn)
					if err != nil {
						return []string{errLine("transactions", err)}
					}
					return []string{line("transactions", "clients", numClients, "processed", p, "failed", f,
						"rows", pgbLogCheck(ctx, tg, 1))}
				})
				if mode != "simple" {
					timed(t, &out, func() []string {
						p, f, _, err := pgbenchRun(ctx, tg, "-n", "-M", mode, "-c", strconv.Itoa(numClients), "-j", "2",
							"-t", "5", "-f", pipePath)
						if err != nil {
							return []string{errLine("pipelines", err)}
						}
						return []string{line("pipelines", "clients", numClients, "statements", pipelineLength,
							"processed", p, "failed", f, "rows", pgbLogCheck(ctx, tg, 2))}
					})
				}
				return out
			})
		})
	}
}

// pgbLogCheck summarises pgb_log's rows with v: count, clients, and the
// fewest and most rows of one client — read directly from Postgres.
func pgbLogCheck(ctx context.Context, tg target, v int) string {
	conn, err := pgx.Connect(ctx, target{port: pg.port, db: tg.db}.connString())
	if err != nil {
		return "ERROR " + err.Error()
	}
	defer conn.Close(ctx)
	var n, clients, lo, hi int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(c), 0), count(*), coalesce(min(c), 0), coalesce(max(c), 0)
		FROM (SELECT client, count(*) AS c FROM pgb_log WHERE v = $1 GROUP BY client) AS per`, v).Scan(&n, &clients, &lo, &hi)
	if err != nil {
		return "ERROR " + err.Error()
	}
	return fmt.Sprintf("%d per_client=%d..%d of=%d", n, lo, hi, clients)
}

// TestPgbenchPrepared50 is the load test: pgbench -M prepared
// -c 50 -j 2 -T 10 on pgbench's own tables, through pgturnstile in
// transaction mode with default_pool_size = 10: zero failed transactions.
func TestPgbenchPrepared50(t *testing.T) {
	t.Parallel()
	p := startPooler(t, 10)
	// Only through pgturnstile: a timed run's counts cannot be compared with
	// a direct one, and a second -c 50 run would double the CPU it takes.
	targets := []target{{name: "pgturnstile", port: p.port, db: "d_pgbench50_pooled"}}
	for _, tg := range targets {
		newDatabase(t, tg.db)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(pgtest.BinDir, "pgbench"), "-i", "-q", "-s", "1")
		cmd.Env = target{port: pg.port, db: tg.db}.env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pgbench -i: %v\n%s", err, out)
		}
		cancel()
	}
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			processed, failed, out, err := pgbenchRun(ctx, tg, "-M", "prepared", "-c", "50", "-j", "2", "-T", "10")
			ok := err == nil && failed == "0" && processed != "0"
			matrix.record("pgbench -M prepared -c 50 -T 10", "load", tg.name, ok)
			if !ok {
				t.Errorf("%s: pgbench -M prepared -c 50 -j 2 -T 10: processed=%s failed=%s err=%v\n%s", tg.name, processed, failed, err, lastLines(out, 25))
			} else {
				t.Logf("%s: processed=%s failed=%s", tg.name, processed, failed)
			}
		})
	}
	wg.Wait()
}
