//go:build linux

package integration

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	pgbenchProcessedRE = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
	pgbenchFailedRE    = regexp.MustCompile(`number of failed transactions: (\d+)`)
	pgbenchTPSRE       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
)

// wantPgbenchClean checks a pgbench run's summary: transactions were
// processed, none failed, no client aborted.
func wantPgbenchClean(t testing.TB, out string) {
	t.Helper()
	m := pgbenchProcessedRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no 'number of transactions actually processed' in pgbench output")
	}
	if n, _ := strconv.Atoi(m[1]); n <= 0 {
		t.Errorf("processed %d transactions, want > 0", n)
	}
	if m := pgbenchFailedRE.FindStringSubmatch(out); m == nil || m[1] != "0" {
		t.Errorf("failed transactions: %v, want 0", m)
	}
	if strings.Contains(out, "aborted") || strings.Contains(out, "pgbench: error") {
		t.Errorf("a pgbench client lost its connection or failed")
	}
}

// TestPgbenchTransactionMode: pgbench -c 100 -j 2 -T 10 in both -M simple and
// -M extended through the pooler in transaction mode with
// default_pool_size=20: no failed transaction, and pg_stat_activity never
// shows more than 20 backends for benchdb/bench.
func TestPgbenchTransactionMode(t *testing.T) {
	c := needPG(t)
	waitNoBackends(t, benchDB, benchUser)
	out, err := pgbench(t, benchPass, "-i", "-q", "-s", "1", "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", benchUser, benchDB)
	if err != nil {
		t.Fatalf("pgbench -i (direct): %v\n%s", err, out)
	}

	p := startPooler(t, iniSettings(map[string]string{
		"default_pool_size": "20",
		"max_client_conn":   "150",
	}, ""), testUserlist)

	for _, mode := range []string{"simple", "extended"} {
		t.Run(mode, func(t *testing.T) {
			// No waitNoBackends: the pooler keeps its idle servers.
			if p.dumped.Load() {
				t.Skip("the pooler was stuck in the previous run and killed for a goroutine dump")
			}
			s := sampleBackends(t, benchDB, benchUser, 100*time.Millisecond)
			// If pgbench outlives -T 10 by far, it is stuck: snapshot what
			// the backends are doing while it still hangs.
			snapshot := make(chan string, 1)
			snapTimer := time.AfterFunc(20*time.Second, func() {
				snapshot <- activitySnapshot(benchDB)
				p.DumpGoroutines() // the stacks land in the pooler log
			})
			out, err := pgbench(t, benchPass, "-c", "100", "-j", "2", "-T", "10", "-P", "2", "-M", mode,
				"-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", benchUser, benchDB)
			if !snapTimer.Stop() {
				t.Logf("pg_stat_activity for %s 20 s into the run:\n%s", benchDB, <-snapshot)
			}
			maxSeen, samples := s.stop(t)
			t.Logf("pgbench -M %s:\n%s", mode, out)
			t.Logf("max backends for %s/%s: %d over %d samples", benchDB, benchUser, maxSeen, samples)
			if err != nil {
				t.Fatalf("pgbench -M %s: %v", mode, err)
			}
			wantPgbenchClean(t, out)
			if m := pgbenchTPSRE.FindStringSubmatch(out); m != nil {
				t.Logf("MEASURED pgbench -c 100 -j 2 -T 10 -M %s through pgturnstile: tps=%s", mode, m[1])
			}
			if maxSeen > 20 {
				t.Errorf("pg_stat_activity showed %d backends for %s/%s, want <= 20 (default_pool_size)", maxSeen, benchDB, benchUser)
			}
			if maxSeen == 0 || samples < 50 {
				t.Errorf("sampler saw max=%d over %d samples; the run did not reach Postgres or was not sampled", maxSeen, samples)
			}
		})
	}
	if !p.dumped.Load() {
		p.Alive(t)
	}
}

// activitySnapshot lists the client backends of db with their state, wait
// event and query, for diagnosing a stuck run.
func activitySnapshot(db string) string {
	pg.monitorMu.Lock()
	defer pg.monitorMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := pg.monitor.Query(ctx, `SELECT pid, state, coalesce(wait_event_type || ':' || wait_event, ''),
		coalesce(backend_xid::text, ''), left(query, 80)
		FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' ORDER BY state, pid`, db)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var pid int32
		var state, wait, xid, query string
		if err := rows.Scan(&pid, &state, &wait, &xid, &query); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%d\t%s\t%s\txid=%s\t%s\n", pid, state, wait, xid, query)
	}
	return b.String()
}
