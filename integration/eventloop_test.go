//go:build linux

package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestEventLoopUnderContention: 30 clients on 3 servers, half of them on
// the simple protocol and half on the extended one, each running
// autocommit queries whose answers Postgres computes from the client's
// own numbers. Every answer is the client's (no reply reaches another
// client, none is lost), most transactions run whole on the event loop
// (pgturnstile_event_loop_transactions_total: queued for a server there
// and relayed there), and afterwards no server is left active and no
// client waiting. Where the pooler has two pollers or more (GOMAXPROCS),
// clients dealt to the second at login move to the first between
// requests while it has room (pgturnstile_event_loop_moves_total), and
// their answers stay theirs.
func TestEventLoopUnderContention(t *testing.T) {
	needPG(t)
	waitNoBackends(t, appDB, appUser)
	p := startPoolerWithMetrics(t, map[string]string{"default_pool_size": "3", "event_loop": "1"}, "")

	const clients, queries = 30, 60
	conns := make([]*pgx.Conn, clients)
	for i := range conns {
		cfg := pgxConfig(t, p.App())
		if i%2 == 0 {
			cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		}
		c, err := tryConnectPgx(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close(context.Background()) })
	}
	before := admissionMetrics(t, p, "pgturnstile_event_loop_transactions_total ")
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range queries {
				want := int64(i*100000 + q)
				var got, rows int64
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := conn.QueryRow(ctx, "SELECT sum(g), count(*) FROM generate_series($1::bigint, $1::bigint + 2) g", want).Scan(&got, &rows)
				cancel()
				if err == nil && (got != 3*want+3 || rows != 3) {
					err = fmt.Errorf("client %d query %d: sum %d rows %d, want %d and 3", i, q, got, rows, 3*want+3)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	onLoop := admissionMetrics(t, p, "pgturnstile_event_loop_transactions_total ") - before
	if onLoop < clients*queries/2 {
		t.Errorf("the event loop ran %v of %d transactions, want at least half", onLoop, clients*queries)
	}
	t.Logf("MEASURED: %v of %d transactions ran whole on the event loop", onLoop, clients*queries)
	moves := admissionMetrics(t, p, "pgturnstile_event_loop_moves_total ")
	pollers := metricLines(t, p, "pgturnstile_event_loop_poller_load{")
	t.Logf("MEASURED: %v moves between %d pollers", moves, pollers)
	switch {
	case pollers == 0:
		t.Errorf("no pgturnstile_event_loop_poller_load lines: the pollers report no load")
	case pollers >= 2 && moves == 0:
		t.Errorf("%v moves between %d pollers; want the clients of the second poller moved to the first", moves, pollers)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		active, waiting := 0, 0
		for _, r := range consoleRows(t, p, adminUser, adminPass, "SHOW POOLS") {
			if r["database"] == nil || *r["database"] != appDB {
				continue
			}
			a, _ := strconv.Atoi(*r["sv_active"])
			w, _ := strconv.Atoi(*r["cl_waiting"])
			active, waiting = active+a, waiting+w
		}
		if active == 0 && waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the load: sv_active %d cl_waiting %d", active, waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metricLines counts the lines of p's /metrics that start with prefix.
func metricLines(t *testing.T, p *Pooler, prefix string) int {
	t.Helper()
	n := 0
	for _, line := range metricsLines(t, p) {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}
