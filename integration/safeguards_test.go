//go:build linux

package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Connection safeguards: paced server creation after churn, pool warming,
// and bounded exhaust of servers whose client left mid-result.

// startPoolerWithMetrics starts the pooler with metrics_addr on a free
// port (added to settings, with the console users) and waits until it
// serves /metrics.
func startPoolerWithMetrics(t testing.TB, settings map[string]string, extra string) *Pooler {
	t.Helper()
	addr := metricsAddr(t)
	s := withConsoleUsers(map[string]string{"metrics_addr": addr})
	for k, v := range settings {
		s[k] = v
	}
	p := startPooler(t, iniSettings(s, extra), opsUserlist)
	p.waitLog(t, "metrics listening on "+addr, 0, 5*time.Second)
	p.metricsAddr = addr
	return p
}

// metricsAddr returns a free 127.0.0.1 address for metrics_addr.
func metricsAddr(t testing.TB) string {
	t.Helper()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// scrapeMetrics GETs /metrics and parses it.
func scrapeMetrics(addr string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	return parser.TextToMetricFamilies(resp.Body)
}

// metricSum adds the samples of family name whose labels include want.
func metricSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
samples:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, lp := range m.Label {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue samples
			}
		}
		sum += metricValue(m)
	}
	return sum
}

func mustScrape(t testing.TB, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := scrapeMetrics(addr)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// poolerBackendsSQL lists the backends the pooler opened for otherdb as
// app (the tests here use that pair alone, after waitNoBackends).
const poolerBackendsSQL = `SELECT pid FROM pg_stat_activity
WHERE backend_type = 'client backend' AND datname = $1 AND usename = $2 AND pid <> pg_backend_pid()`

func backendPIDs(t testing.TB, su *pgx.Conn, db, user string) map[int32]bool {
	t.Helper()
	rows, err := su.Query(ctxT(t, 10*time.Second), poolerBackendsSQL, db, user)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]bool{}
	for _, p := range pids {
		out[p] = true
	}
	return out
}

// TestChurn: every server of a pool is terminated by Postgres at once. The
// pool refills to min_pool_size through its create bucket: in any window Δ
// of the sampled connect counter, connects ≤ rate·Δ + burst (+1), and the
// clients looping on the pool see no error beyond the transactions that
// were running on the terminated backends.
func TestChurn(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	const (
		poolSize = 8
		rate     = 10.0
		burst    = 2.0
		clients  = 4
	)
	addr := metricsAddr(t)
	ini := iniSettings(withConsoleUsers(map[string]string{
		"metrics_addr":         addr,
		"server_connect_rate":  "10",
		"server_connect_burst": "2",
	}), fmt.Sprintf("[databases]\nchurn = host=127.0.0.1 port=@PGPORT@ dbname=%s user=%s pool_size=%d min_pool_size=%d\n",
		otherDB, appUser, poolSize, poolSize))
	p := startPooler(t, ini, opsUserlist)
	p.waitLog(t, "metrics listening on "+addr, 0, 5*time.Second)
	admin := adminConsole(t, p)
	su := directSuperuser(t, appDB)

	// Warmed before the listener admitted us: 8 servers, paced (2 at
	// once, then one per 100 ms).
	if n := len(show(t, admin, "SHOW SERVERS").where("database", "churn")); n != poolSize {
		t.Fatalf("SHOW SERVERS lists %d churn servers right after start, want %d (warming)", n, poolSize)
	}
	before := backendPIDs(t, su, otherDB, appUser)
	if len(before) != poolSize {
		t.Fatalf("%d backends in Postgres after warming, want %d", len(before), poolSize)
	}

	// Clients loop on SELECT 1; an error ends that connection (the pooler
	// closes a client whose server died mid-transaction) and it reconnects.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var errs, queries atomic.Int64
	var errMu sync.Mutex
	var errList []string
	var wg sync.WaitGroup
	connstr := p.ConnString("churn", appUser, appPassword)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				conn, err := pgx.Connect(ctx, connstr)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
						errMu.Lock()
						errList = append(errList, "connect: "+err.Error())
						errMu.Unlock()
					}
					continue
				}
				for ctx.Err() == nil {
					var one int
					if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
						if ctx.Err() == nil {
							errs.Add(1)
							errMu.Lock()
							errList = append(errList, err.Error())
							errMu.Unlock()
						}
						break
					}
					queries.Add(1)
				}
				conn.Close(context.Background())
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)

	// Sample the connect counters every 100 ms. Each sample keeps the
	// times just before and after its scrape: the counter was read
	// between them, so end(j) − start(i) bounds the true window.
	type sample struct {
		start, end         time.Time
		connects, attempts float64
	}
	var samples []sample
	var sampleErr error
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			start := time.Now()
			fams, err := scrapeMetrics(addr)
			if err != nil {
				sampleErr = err
				return
			}
			samples = append(samples, sample{start, time.Now(),
				metricSum(fams, "pgturnstile_server_connects_total", map[string]string{"database": "churn"}),
				metricSum(fams, "pgturnstile_server_connect_attempts_total", map[string]string{"database": "churn"})})
			select {
			case <-sampling:
				return
			case <-tick.C:
			}
		}
	}()
	time.Sleep(250 * time.Millisecond)

	var killed int64
	if err := su.QueryRow(ctxT(t, 10*time.Second), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND datname = $1 AND usename = $2`, otherDB, appUser).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	if killed != poolSize {
		t.Fatalf("terminated %d backends, want %d", killed, poolSize)
	}

	// The pool comes back to min_pool_size with new backends only.
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := backendPIDs(t, su, otherDB, appUser)
		fresh := 0
		for pid := range now {
			if !before[pid] {
				fresh++
			}
		}
		if fresh == poolSize && len(now) == poolSize {
			t.Logf("pool back to %d fresh backends %v after the kill", poolSize, time.Since(killedAt).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			for _, q := range []string{"SHOW CLIENTS", "SHOW SERVERS", "SHOW POOLS"} {
				for _, r := range show(t, admin, q).rows {
					t.Logf("at the deadline, %s: %v", q, r)
				}
			}
			t.Fatalf("10 s after the kill: %d backends, %d of them new; want %d new", len(now), fresh, poolSize)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitPool(t, admin, "churn", appUser, 10*time.Second, "back to 8 servers", func(r map[string]string) bool {
		return num(t, r, "sv_active")+num(t, r, "sv_idle") == poolSize && num(t, r, "sv_login") == 0
	})
	servers := show(t, admin, "SHOW SERVERS").where("database", "churn")
	if len(servers) != poolSize {
		t.Errorf("SHOW SERVERS lists %d churn servers after the refill, want %d", len(servers), poolSize)
	}
	time.Sleep(500 * time.Millisecond)
	close(sampling)
	<-sampled
	stop()
	wg.Wait()
	if sampleErr != nil {
		t.Fatal(sampleErr)
	}

	// Rate check over every pair of samples. Attempts, counted when the
	// token is taken (each is a connection Postgres sees), get no slack.
	// connects_total counts logins when they complete: the logins in
	// flight when a window opens (at most server_max_parallel_connects, 4
	// by default) may all complete inside it, however late a loaded
	// machine lets them finish, so completions get that much slack.
	if len(samples) < 10 {
		t.Fatalf("only %d samples", len(samples))
	}
	first, last := samples[0], samples[len(samples)-1]
	if got := last.connects - first.connects; got < poolSize {
		t.Fatalf("%v connects while sampling, want at least the %d replacements", got, poolSize)
	}
	worst := map[string]float64{"connects": -1e9, "attempts": -1e9}
	for i := range samples {
		for j := i + 1; j < len(samples); j++ {
			window := samples[j].end.Sub(samples[i].start).Seconds()
			for _, c := range []struct {
				what  string
				n     float64
				slack float64
			}{
				{"connects", samples[j].connects - samples[i].connects, 4},
				{"attempts", samples[j].attempts - samples[i].attempts, 0},
			} {
				excess := c.n - (rate*window + burst)
				worst[c.what] = max(worst[c.what], excess)
				if excess > c.slack {
					t.Errorf("%v %s in a window of %.3fs: more than rate·Δ + burst (%.2f) + %v",
						c.n, c.what, window, rate*window+burst, c.slack)
				}
			}
		}
	}
	fams := mustScrape(t, addr)
	wait := metricSum(fams, "pgturnstile_server_connect_wait_seconds_total", map[string]string{"database": "churn"})
	t.Logf("%d samples; connects %v→%v; worst excess over rate·Δ+burst: connects %.2f, attempts %.2f; token wait %.3fs; %d queries, %d client errors %v",
		len(samples), first.connects, last.connects, worst["connects"], worst["attempts"], wait, queries.Load(), errs.Load(), errList)
	if wait <= 0 {
		t.Errorf("pgturnstile_server_connect_wait_seconds_total = %v; the refill of %d servers with burst %v must have waited", wait, poolSize, burst)
	}
	if queries.Load() == 0 {
		t.Fatal("the clients ran no query")
	}
	// Each terminated backend fails at most the one transaction it was
	// running: its client gets the backend's FATAL 57P01. The 8 kills land
	// over tens of milliseconds, so a client that reconnected meanwhile may
	// start a transaction on a backend whose termination is still on its
	// way, and one client can see more than one such error. Anything else
	// (a wait timeout while the pool refills, a failed login) is an error
	// the safeguards caused.
	if n := errs.Load(); n > killed {
		t.Errorf("%d client errors, want at most %d (one per terminated backend): %v", n, killed, errList)
	}
	for _, e := range errList {
		if !strings.Contains(e, "SQLSTATE 57P01") {
			t.Errorf("client error other than the terminated backend's FATAL 57P01: %s", e)
		}
	}
}

// TestWarm: a forced-user database with min_pool_size = 3 has its servers
// before the first client, and gets them back through the create bucket
// after PAUSE/RESUME.
func TestWarm(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	ini := iniSettings(withConsoleUsers(nil), fmt.Sprintf("[databases]\nwarm = host=127.0.0.1 port=@PGPORT@ dbname=%s user=%s min_pool_size=3 pool_size=5\n", otherDB, appUser))
	p := startPooler(t, ini, opsUserlist)
	admin := adminConsole(t, p)
	if n := len(show(t, admin, "SHOW SERVERS").where("database", "warm")); n != 3 {
		t.Fatalf("SHOW SERVERS lists %d warm servers as soon as the pooler accepts clients, want 3:\n%s", n, show(t, admin, "SHOW SERVERS"))
	}
	if n := countBackends(t, otherDB, appUser); n != 3 {
		t.Errorf("%d backends in Postgres after warming, want 3", n)
	}
	if !p.LogContains("pool warming: 3/3 servers") {
		t.Errorf("no warming line in the log:\n%s", p.Log())
	}

	adminExec(t, admin, "PAUSE warm")
	waitPool(t, admin, "warm", appUser, 10*time.Second, "empty while paused", func(r map[string]string) bool {
		return num(t, r, "sv_idle")+num(t, r, "sv_active")+num(t, r, "sv_login") == 0
	})
	adminExec(t, admin, "RESUME warm")
	waitPool(t, admin, "warm", appUser, 10*time.Second, "warmed to min_pool_size after RESUME", func(r map[string]string) bool {
		return num(t, r, "sv_idle") == 3
	})
	waitBackends(t, otherDB, appUser, 10*time.Second, "3", func(n int) bool { return n == 3 })
	selectOne(t, p.ConnString("warm", appUser, appPassword))
}

// TestBoundedExhaust: a client that leaves in the middle of a 1,000,000-row
// result, and one that leaves during pg_sleep(30) in a transaction: the
// only server is drained, its query cancelled, rolled back and reused (same
// backend pid) well before the query would have ended, the next client
// finds it clean, and both drains count as cancelled.
func TestBoundedExhaust(t *testing.T) {
	needPG(t)
	addr := metricsAddr(t)
	p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{
		"metrics_addr":      addr,
		"default_pool_size": "1",
	}), ""), opsUserlist)
	p.waitLog(t, "metrics listening on "+addr, 0, 5*time.Second)
	su := directSuperuser(t, appDB)
	drains := func(outcome string) float64 {
		return metricSum(mustScrape(t, addr), "pgturnstile_server_drain_total", map[string]string{"database": appDB, "outcome": outcome})
	}

	connect := func() *pgconn.PgConn {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pc, err := pgconn.Connect(ctx, p.App())
		if err != nil {
			t.Fatal(err)
		}
		return pc
	}
	backendPID := func(pc *pgconn.PgConn) string {
		r := pc.ExecParams(ctxT(t, 10*time.Second), "SELECT pg_backend_pid()", nil, nil, nil, nil).Read()
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return string(r.Rows[0][0])
	}
	// next is the following client: it waits for the pool's only server
	// (query_wait_timeout is 20 s; the drain must take far less) and must
	// get the same backend, outside any transaction.
	next := func(what, pid string, left time.Time) {
		t.Helper()
		c := connectPgx(t, p.App())
		defer c.Close(context.Background())
		var got int64
		var noTx bool
		if err := c.QueryRow(ctxT(t, 10*time.Second),
			"SELECT pg_backend_pid(), txid_current_if_assigned() IS NULL").Scan(&got, &noTx); err != nil {
			t.Fatalf("%s: next client: %v", what, err)
		}
		took := time.Since(left)
		t.Logf("%s: next client on pid %d %v after the first left", what, got, took.Round(time.Millisecond))
		if fmt.Sprint(got) != pid {
			t.Errorf("%s: next client runs on backend %d, want the drained one %s (reused, not closed)", what, got, pid)
		}
		if !noTx {
			t.Errorf("%s: next client sees a transaction id assigned: a transaction was carried over", what)
		}
		_, err := c.Exec(ctxT(t, 10*time.Second), "SAVEPOINT x")
		wantPgError(t, err, "ERROR", "25P01", "SAVEPOINT can only be used in transaction blocks")
		if took > 10*time.Second {
			t.Errorf("%s: server back after %v, want well within 10 s", what, took)
		}
	}

	cancelledBefore, closedBefore := drains("cancelled"), drains("closed")

	// 1. Mid-result: read a few rows of a million, then drop the socket.
	pc := connect()
	pid := backendPID(pc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	mrr := pc.Exec(ctx, "SELECT generate_series(1, 1000000)")
	if !mrr.NextResult() {
		t.Fatalf("no result: %v", mrr.Close())
	}
	rr := mrr.ResultReader()
	for i := 0; i < 5; i++ {
		if !rr.NextRow() {
			_, err := rr.Close()
			t.Fatalf("row %d: %v", i, err)
		}
	}
	cancel()
	pc.Conn().Close()
	next("mid-result", pid, time.Now())
	waitMetric(t, func() bool { return drains("cancelled") == cancelledBefore+1 }, "one cancelled drain after the mid-result client left")

	// 2. In a transaction, during pg_sleep(30).
	pc = connect()
	pid = backendPID(pc)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := pc.Exec(ctx, "BEGIN; SELECT txid_current()").ReadAll(); err != nil {
		t.Fatal(err)
	}
	cancel()
	// Send the query on the raw socket and leave without reading: the
	// backend is sleeping when the client goes.
	q := "SELECT pg_sleep(30)"
	msg := append([]byte{'Q', 0, 0, 0, byte(4 + len(q) + 1)}, q...)
	if _, err := pc.Conn().Write(append(msg, 0)); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, func() bool {
		return queryInt(t, su, "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'", q) == 1
	}, "the backend running pg_sleep")
	pc.Conn().Close()
	next("pg_sleep", pid, time.Now())
	waitMetric(t, func() bool { return drains("cancelled") == cancelledBefore+2 }, "two cancelled drains after the pg_sleep client left")

	fams := mustScrape(t, addr)
	if n := drains("closed"); n != closedBefore {
		t.Errorf("pgturnstile_server_drain_total{outcome=closed} went from %v to %v; no drain should have closed its server", closedBefore, n)
	}
	if n := metricSum(fams, "pgturnstile_server_drain_rollbacks_total", map[string]string{"database": appDB}); n < 1 {
		t.Errorf("pgturnstile_server_drain_rollbacks_total = %v, want the pg_sleep transaction rolled back", n)
	}
	if n := metricSum(fams, "pgturnstile_server_drain_cancels_total", map[string]string{"database": appDB, "result": "sent"}); n < 2 {
		t.Errorf("pgturnstile_server_drain_cancels_total{result=sent} = %v, want 2", n)
	}
	if strings.Contains(p.Log(), "client disconnect while server was not ready") {
		t.Errorf("a drain closed its server:\n%s", p.Log())
	}
}

// waitMetric polls cond every 50 ms for up to 10 s.
func waitMetric(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
