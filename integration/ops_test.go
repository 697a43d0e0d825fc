//go:build linux

package integration

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/pgturnstile/pgturnstile/internal/pgtest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// signal sends sig to the pooler.
func (p *Pooler) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v: %v", sig, err)
	}
}

// waitExit waits up to d for the pooler to exit on its own and returns its
// exit code; the cleanup then has nothing to stop. ok is false on timeout.
func (p *Pooler) waitExit(t testing.TB, d time.Duration) (code int, ok bool) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		return 0, false
	}
	p.stopped.Store(true)
	poolersMu.Lock()
	delete(poolers, p)
	poolersMu.Unlock()
	for _, bad := range []string{"panic:", "WARNING: DATA RACE", "fatal error:"} {
		if p.LogContains(bad) {
			t.Errorf("pooler log contains %q:\n%s", bad, p.Log())
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("pooler log:\n%s", p.Log())
	}
	return p.cmd.ProcessState.ExitCode(), true
}

// waitLog waits until the pooler's log contains s more than n times.
func (p *Pooler) waitLog(t testing.TB, s string, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for strings.Count(p.Log(), s) <= n {
		if time.Now().After(deadline) {
			t.Fatalf("pooler did not log %q within %v; log:\n%s", s, d, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pgbenchScript writes a custom pgbench script and returns its path.
func pgbenchScript(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.sql")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pgbenchProcessedRE and pgbenchFailedRE are in pgbench_test.go.

func pgbenchCount(t testing.TB, re *regexp.Regexp, out string) int {
	t.Helper()
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("pgbench output lacks %q:\n%s", re, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestReloadUnderLoad: 50 pgbench clients in transaction mode while the
// config is reloaded (console RELOAD and SIGHUP) with new values: no
// transaction fails, no client is dropped. Bad files (a bad value, an
// unknown key) are rejected whole with their line and the old settings stay.
func TestReloadUnderLoad(t *testing.T) {
	settings := func(kv ...string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return iniSettings(withConsoleUsers(m), "")
	}
	p := startPooler(t, settings(), opsUserlist)
	admin := adminConsole(t, p)
	script := pgbenchScript(t, "BEGIN;\nSELECT pg_sleep(0.002);\nCOMMIT;\n")

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := pgbench(t, benchPass, "-n", "-c", "50", "-j", "2", "-T", "5", "-f", script,
			"-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", benchUser, benchDB)
		done <- result{out, err}
	}()
	poolSize := func() string {
		return show(t, admin, "SHOW CONFIG").one(t, "key", "default_pool_size")["value"]
	}

	time.Sleep(time.Second)
	p.WriteConfig(settings("default_pool_size", "10"), opsUserlist)
	if tag := adminExec(t, admin, "RELOAD"); tag != "RELOAD" {
		t.Errorf("RELOAD tag %q", tag)
	}
	if v := poolSize(); v != "10" {
		t.Errorf("default_pool_size after RELOAD = %s, want 10", v)
	}
	time.Sleep(700 * time.Millisecond)
	p.WriteConfig(settings("default_pool_size", "15"), opsUserlist)
	p.Reload()
	if v := poolSize(); v != "15" {
		t.Errorf("default_pool_size after SIGHUP = %s, want 15", v)
	}

	// A bad value, by console RELOAD: F0000, the line in the detail.
	time.Sleep(500 * time.Millisecond)
	bad := settings("default_pool_size", "abc", "max_client_conn", "99")
	p.WriteConfig(bad, opsUserlist)
	e := adminExecErr(t, admin, "RELOAD", "F0000", "RELOAD failed, see logs for additional details")
	if want := fmt.Sprintf("pgbouncer.ini:%d", lineOf(bad, "default_pool_size = abc")); !strings.Contains(e.Detail, want) {
		t.Errorf("RELOAD detail %q does not name %s", e.Detail, want)
	}
	cfg := show(t, admin, "SHOW CONFIG")
	if v := cfg.one(t, "key", "default_pool_size")["value"]; v != "15" {
		t.Errorf("default_pool_size after a rejected RELOAD = %s, want 15", v)
	}
	if v := cfg.one(t, "key", "max_client_conn")["value"]; v != "100" {
		t.Errorf("max_client_conn after a rejected RELOAD = %s, want 100 (the file is rejected whole)", v)
	}

	// An unknown key, by SIGHUP: "RELOAD failed" and the line in the log.
	time.Sleep(500 * time.Millisecond)
	bad = settings("default_pool_size", "12", "no_such_setting", "1")
	p.WriteConfig(bad, opsUserlist)
	failed := strings.Count(p.Log(), "RELOAD failed")
	p.signal(t, syscall.SIGHUP)
	p.waitLog(t, "RELOAD failed", failed, 5*time.Second)
	if want := fmt.Sprintf("pgbouncer.ini:%d", lineOf(bad, "no_such_setting = 1")); !p.WaitLog(want, 5*time.Second) {
		t.Errorf("log does not name %s:\n%s", want, p.Log())
	}
	if v := poolSize(); v != "15" {
		t.Errorf("default_pool_size after a rejected SIGHUP = %s, want 15", v)
	}
	p.WriteConfig(settings("default_pool_size", "15"), opsUserlist)

	r := <-done
	if r.err != nil {
		t.Fatalf("pgbench: %v\n%s", r.err, r.out)
	}
	processed := pgbenchCount(t, pgbenchProcessedRE, r.out)
	failedTx := pgbenchCount(t, pgbenchFailedRE, r.out)
	t.Logf("pgbench: %d transactions, %d failed", processed, failedTx)
	if failedTx != 0 || processed < 100 || strings.Contains(r.out, "aborted") {
		t.Errorf("pgbench under RELOAD:\n%s", r.out)
	}
	p.Alive(t)
}

// TestSIGINTUnderLoad: SIGINT (SHUTDOWN WAIT_FOR_SERVERS) while pgbench
// runs and a client holds a transaction open: the open transaction can
// still commit, new logins are refused, every transaction pgbench counts
// committed (and nothing else did), and the process exits 0.
func TestSIGINTUnderLoad(t *testing.T) {
	su := directSuperuser(t, benchDB)
	ctx := ctxT(t, 60*time.Second)
	for _, q := range []string{"DROP TABLE IF EXISTS sigint_log", "CREATE TABLE sigint_log (client int, at timestamptz DEFAULT now())",
		"ALTER TABLE sigint_log OWNER TO " + benchUser} {
		if _, err := su.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	holder := connectPgx(t, p.ConnString(benchDB, benchUser, benchPass))
	if _, err := holder.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "INSERT INTO sigint_log (client) VALUES (-1)"); err != nil {
		t.Fatal(err)
	}

	script := pgbenchScript(t, "BEGIN;\nINSERT INTO sigint_log (client) VALUES (:client_id);\nSELECT pg_sleep(0.02);\nCOMMIT;\n")
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := pgbench(t, benchPass, "-n", "-c", "10", "-j", "2", "-T", "20", "-f", script,
			"-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", benchUser, benchDB)
		done <- result{out, err}
	}()
	time.Sleep(1500 * time.Millisecond)
	p.signal(t, syscall.SIGINT)
	p.waitLog(t, "got SIGINT", 0, 2*time.Second)

	// No new logins while it waits for the held server.
	time.Sleep(200 * time.Millisecond)
	_, err := tryConnectPgx(t, pgxConfig(t, p.App()))
	if err == nil {
		t.Error("a new login was accepted after SIGINT")
	} else if !strings.Contains(err.Error(), "pooler is shutting down") && !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("login after SIGINT: %v; want FATAL pooler is shutting down, or connection refused", err)
	} else {
		t.Logf("login after SIGINT: %v", err)
	}
	if _, ok := p.waitExit(t, 300*time.Millisecond); ok {
		t.Fatal("the pooler exited while a transaction was open (WAIT_FOR_SERVERS)")
	}
	// The open transaction finishes.
	if _, err := holder.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("open transaction after SIGINT: %v", err)
	}
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Errorf("COMMIT after SIGINT: %v", err)
	}
	code, ok := p.waitExit(t, 5*time.Second)
	if !ok {
		p.DumpGoroutines()
		t.Fatalf("pooler still running 5s after the last transaction ended")
	}
	if code != 0 {
		t.Errorf("exit code %d after SIGINT, want 0", code)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Error("the listener still accepts after exit")
	}

	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pgbench did not end within 10s of the pooler's exit")
	}
	t.Logf("pgbench (exit %v):\n%s", r.err, r.out)
	processed := pgbenchCount(t, pgbenchProcessedRE, r.out)
	var committed, held int64
	if err := su.QueryRow(ctx, "SELECT count(*) FILTER (WHERE client >= 0), count(*) FILTER (WHERE client = -1) FROM sigint_log").Scan(&committed, &held); err != nil {
		t.Fatal(err)
	}
	if held != 1 {
		t.Errorf("the held transaction's row: %d, want 1 (committed after SIGINT)", held)
	}
	if processed == 0 || int64(processed) != committed {
		t.Errorf("pgbench counted %d transactions, %d rows committed: every transaction must commit and be reported, or neither", processed, committed)
	}
}

// TestSIGQUITAndSecondSIGINT: SIGQUIT exits at once (within 1 s) even with
// a transaction open; so does a second SIGINT.
func TestSIGQUITAndSecondSIGINT(t *testing.T) {
	for _, sigs := range [][]syscall.Signal{{syscall.SIGQUIT}, {syscall.SIGINT, syscall.SIGINT}} {
		t.Run(fmt.Sprint(sigs), func(t *testing.T) {
			p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
			c := connectPgx(t, p.App())
			if _, err := c.Exec(ctxT(t, 10*time.Second), "BEGIN"); err != nil {
				t.Fatal(err)
			}
			queryInt(t, c, "SELECT 1")
			for i, s := range sigs {
				if i > 0 {
					if _, ok := p.waitExit(t, 300*time.Millisecond); ok {
						t.Fatal("exited on the first SIGINT with a transaction open")
					}
				}
				p.signal(t, s)
			}
			start := time.Now()
			code, ok := p.waitExit(t, time.Second)
			if !ok {
				t.Fatalf("pooler still running 1s after %v", sigs)
			}
			t.Logf("exited with %d after %v", code, time.Since(start))
			if _, err := c.Exec(ctxT(t, 5*time.Second), "SELECT 1"); err == nil {
				t.Error("client still served after the pooler exited")
			}
		})
	}
}

// TestNotifySocket: with NOTIFY_SOCKET the pooler sends READY=1 once its
// listener accepts, RELOADING=1 (with MONOTONIC_USEC) and READY=1 around a
// SIGHUP reload, and STOPPING=1 at SIGTERM.
func TestNotifySocket(t *testing.T) {
	needPG(t)
	dir, err := os.MkdirTemp("", "ntf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sockPath := filepath.Join(dir, "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	type msg struct {
		text      string
		connectOK error // for READY=1: a login right after it arrived
	}
	msgs := make(chan msg, 16)
	connstr := fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=%s password=%s sslmode=disable connect_timeout=5", port, appDB, appUser, appPassword)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ln.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			m := msg{text: string(buf[:n])}
			if strings.HasPrefix(m.text, "READY=1") {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				m.connectOK = func() error {
					defer cancel()
					conn, err := pgx.Connect(ctx, connstr)
					if err != nil {
						return err
					}
					defer conn.Close(context.Background())
					var one int
					return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
				}()
			}
			msgs <- m
		}
	}()
	next := func(what string) msg {
		t.Helper()
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("notify socket closed waiting for %s", what)
			}
			t.Logf("NOTIFY: %q", m.text)
			return m
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s on NOTIFY_SOCKET within 5s", what)
		}
		return msg{}
	}

	p := startPoolerEnv(t, iniSettings(withConsoleUsers(map[string]string{"listen_port": strconv.Itoa(port)}), ""), opsUserlist,
		[]string{"NOTIFY_SOCKET=" + sockPath})
	m := next("READY=1")
	if !strings.HasPrefix(m.text, "READY=1") {
		t.Fatalf("first message %q, want READY=1", m.text)
	}
	if m.connectOK != nil {
		t.Errorf("login right after READY=1 failed: %v", m.connectOK)
	}

	p.Reload()
	m = next("RELOADING=1")
	lines := strings.Split(m.text, "\n")
	if lines[0] != "RELOADING=1" || len(lines) < 2 || !strings.HasPrefix(lines[1], "MONOTONIC_USEC=") {
		t.Fatalf("reload message %q, want RELOADING=1\\nMONOTONIC_USEC=…", m.text)
	}
	usec, err := strconv.ParseInt(strings.TrimPrefix(lines[1], "MONOTONIC_USEC="), 10, 64)
	var ts syscall.Timespec
	_ = clockMonotonic(&ts)
	now := ts.Nano() / 1000
	if err != nil || usec <= 0 || usec > now || now-usec > 10_000_000 {
		t.Errorf("MONOTONIC_USEC=%d, CLOCK_MONOTONIC now %d µs: want a recent reading of the same clock", usec, now)
	}
	if m = next("READY=1 after the reload"); !strings.HasPrefix(m.text, "READY=1") {
		t.Errorf("after RELOADING=1: %q, want READY=1", m.text)
	}

	p.Stop() // SIGTERM
	if m = next("STOPPING=1"); !strings.HasPrefix(m.text, "STOPPING=1") {
		t.Errorf("at SIGTERM: %q, want STOPPING=1", m.text)
	}
}

// metricValue is a sample's value whatever its type.
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// clockMonotonic reads CLOCK_MONOTONIC, the clock MONOTONIC_USEC is on.
func clockMonotonic(ts *syscall.Timespec) error {
	const clockMonotonicID = 1
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonicID, uintptr(unsafe.Pointer(ts)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// TestMetrics: /metrics parses as Prometheus text (expfmt) and its
// counters equal SHOW STATS, its pool gauges SHOW POOLS, when idle.
func TestMetrics(t *testing.T) {
	needPG(t)
	p := startPoolerWithMetrics(t, nil, "")
	addr := p.metricsAddr
	admin := adminConsole(t, p)

	c := connectPgx(t, p.App())
	for i := 0; i < 3; i++ {
		for _, q := range []string{"BEGIN", "SELECT 1", "COMMIT"} {
			if _, err := c.Exec(ctxT(t, 10*time.Second), q); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 4; i++ {
		queryInt(t, c, "SELECT 2")
	}
	o := connectPgx(t, p.ConnString(otherDB, appUser, appPassword))
	queryInt(t, o, "SELECT 3")

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	stats := show(t, admin, "SHOW STATS")
	pools := show(t, admin, "SHOW POOLS")

	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("/metrics does not parse as Prometheus text: %v\n%s", err, body)
	}
	value := func(name string, labels map[string]string) (float64, bool) {
		f := families[name]
		if f == nil {
			return 0, false
		}
	metrics:
		for _, m := range f.Metric {
			got := map[string]string{}
			for _, lp := range m.Label {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return metricValue(m), true
		}
		return 0, false
	}
	var untyped []string
	seen := map[string]bool{}
	wantType := func(name string, typ dto.MetricType) {
		t.Helper()
		if f := families[name]; f == nil {
			t.Errorf("no %s in /metrics", name)
		} else if f.GetType() != typ && !seen[name] {
			seen[name] = true
			untyped = append(untyped, fmt.Sprintf("%s (%v, want %v)", name, f.GetType(), typ))
		}
	}

	for _, db := range []string{appDB, otherDB} {
		row := stats.one(t, "database", db)
		for _, c := range []struct {
			name, column string
			perUnit      float64 // SHOW STATS' unit in the metric's: times are µs there, seconds here
		}{
			{"pgturnstile_transactions_total", "total_xact_count", 1},
			{"pgturnstile_queries_total", "total_query_count", 1},
			{"pgturnstile_received_bytes_total", "total_received", 1},
			{"pgturnstile_sent_bytes_total", "total_sent", 1},
			{"pgturnstile_transaction_time_seconds_total", "total_xact_time", 1e-6},
			{"pgturnstile_query_time_seconds_total", "total_query_time", 1e-6},
			{"pgturnstile_wait_time_seconds_total", "total_wait_time", 1e-6},
		} {
			wantType(c.name, dto.MetricType_COUNTER)
			v, ok := value(c.name, map[string]string{"database": db, "user": appUser})
			if !ok || int64(math.Round(v/c.perUnit)) != num(t, row, c.column) {
				t.Errorf("%s{database=%q,user=app} = %v (found %v), SHOW STATS %s = %s", c.name, db, v, ok, c.column, row[c.column])
			}
		}
	}
	if v, _ := value("pgturnstile_transactions_total", map[string]string{"database": appDB}); v != 7 {
		t.Errorf("pgturnstile_transactions_total{database=appdb} = %v, want 7", v)
	}
	if v, _ := value("pgturnstile_queries_total", map[string]string{"database": appDB}); v != 13 {
		t.Errorf("pgturnstile_queries_total{database=appdb} = %v, want 13", v)
	}

	for _, db := range []string{appDB, otherDB} {
		row := pools.one(t, "database", db, "user", appUser)
		for _, g := range [][2]string{
			{"pgturnstile_pool_clients_active", "cl_active"},
			{"pgturnstile_pool_clients_waiting", "cl_waiting"},
			{"pgturnstile_pool_servers_active", "sv_active"},
			{"pgturnstile_pool_servers_idle", "sv_idle"},
			{"pgturnstile_pool_servers_login", "sv_login"},
		} {
			wantType(g[0], dto.MetricType_GAUGE)
			v, ok := value(g[0], map[string]string{"database": db, "user": appUser})
			if !ok || int64(v) != num(t, row, g[1]) {
				t.Errorf("%s{database=%q,user=app} = %v (found %v), SHOW POOLS %s = %s", g[0], db, v, ok, g[1], row[g[1]])
			}
		}
	}

	// The query duration histogram counted every query (as a typed
	// histogram, or as untyped _bucket/_sum/_count series). The
	// console's own queries, which SHOW STATS counts in its pgbouncer row
	// as PgBouncer does, reach no server and are not in the histogram.
	var queries, count int64
	for _, r := range stats.rows {
		if r["database"] != "pgbouncer" {
			queries += num(t, r, "total_query_count")
		}
	}
	if f := families["pgturnstile_query_duration_seconds"]; f != nil {
		wantType("pgturnstile_query_duration_seconds", dto.MetricType_HISTOGRAM)
		for _, m := range f.Metric {
			count += int64(m.GetHistogram().GetSampleCount())
		}
	} else if f := families["pgturnstile_query_duration_seconds_count"]; f != nil {
		untyped = append(untyped, "pgturnstile_query_duration_seconds (no # TYPE histogram)")
		for _, m := range f.Metric {
			count += int64(metricValue(m))
		}
	} else {
		t.Errorf("no pgturnstile_query_duration_seconds histogram in /metrics")
	}
	if count != queries {
		t.Errorf("pgturnstile_query_duration_seconds counted %d queries, SHOW STATS %d", count, queries)
	}
	if len(untyped) > 0 {
		t.Errorf("/metrics has no # TYPE metadata for: %s", strings.Join(untyped, "; "))
	}

	// Server closes by reason: RECONNECT closes appdb's idle server.
	adminExec(t, admin, "RECONNECT appdb")
	queryInt(t, c, "SELECT 1")
	resp, err = http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	families, err = parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	closes := 0.0
	if f := families["pgturnstile_server_closes_total"]; f != nil {
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == "reason" {
					t.Logf("server closes: reason=%q %v", lp.GetValue(), metricValue(m))
					closes += metricValue(m)
				}
			}
		}
	}
	if closes < 1 {
		t.Errorf("pgturnstile_server_closes_total{reason} sums to %v after RECONNECT closed a server", closes)
	}
}
