//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMaxClientConn: with max_client_conn = 3 the fourth client is refused
// with PgBouncer's FATAL 08P01, and a slot freed by a leaving client is
// usable again.
func TestMaxClientConn(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"max_client_conn": "3"}, ""), testUserlist)
	var conns []interface{ Close(context.Context) error }
	for i := 0; i < 3; i++ {
		c := connectPgx(t, p.App())
		if n := queryInt(t, c, "SELECT $1::int", i); n != int64(i) {
			t.Fatalf("client %d: %d", i, n)
		}
		conns = append(conns, c)
	}
	_, err := tryConnectPgx(t, pgxConfig(t, p.App()))
	wantPgError(t, err, "FATAL", "08P01", "no more connections allowed (max_client_conn)")

	_ = conns[0].Close(context.Background())
	// The pooler notices the close asynchronously; retry briefly.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := tryConnectPgx(t, pgxConfig(t, p.App()))
		if err == nil {
			if n := queryInt(t, c, "SELECT 1"); n != 1 {
				t.Fatal(n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot 5 s after a client left: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestQueryWaitTimeout: with the only server held by an open transaction, a
// second client's query fails with PgBouncer's query_wait_timeout (08P01)
// after about query_wait_timeout seconds.
func TestQueryWaitTimeout(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{
		"default_pool_size":  "1",
		"query_wait_timeout": "1",
	}, ""), testUserlist)

	holder := connectPgx(t, p.App())
	tx, err := holder.Begin(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t, 10*time.Second), "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	waiter := connectPgx(t, p.App())
	start := time.Now()
	_, err = waiter.Exec(ctxT(t, 15*time.Second), "SELECT 1")
	elapsed := time.Since(start)
	wantPgError(t, err, "FATAL", "08P01", "query_wait_timeout")
	t.Logf("MEASURED query_wait_timeout=1 fired after %v", elapsed)
	if elapsed < 900*time.Millisecond || elapsed > 3*time.Second {
		t.Errorf("query_wait_timeout=1 fired after %v, want 1-3 s", elapsed)
	}

	if err := tx.Commit(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("holder's COMMIT: %v", err)
	}
	selectOne(t, p.App())
}

// holdGroup is n clients of one connection string that each run
// SELECT pg_sleep(sleep) at the same time.
type holdGroup struct {
	connstr string
	n       int
}

// holdConcurrently runs every group's clients at once (connecting first, so
// the pooler's client-side limits are not what is measured) and returns the
// errors of the sleeps.
func holdConcurrently(t *testing.T, sleep time.Duration, groups ...holdGroup) []error {
	t.Helper()
	type job struct {
		exec func(context.Context) error
	}
	var jobs []job
	for _, g := range groups {
		for i := 0; i < g.n; i++ {
			c := connectPgx(t, g.connstr)
			jobs = append(jobs, job{func(ctx context.Context) error {
				_, err := c.Exec(ctx, fmt.Sprintf("SELECT pg_sleep(%g)", sleep.Seconds()))
				return err
			}})
		}
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errs[i] = j.exec(ctx)
		}()
	}
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	return failed
}

// withDBParams appends connstring params to one [databases] line of ini.
func withDBParams(ini, db, params string) string {
	line := fmt.Sprintf("%s = host=127.0.0.1 port=@PGPORT@ dbname=%s", db, db)
	if !strings.Contains(ini, line+"\n") {
		panic("withDBParams: no line for " + db)
	}
	return strings.Replace(ini, line+"\n", line+" "+params+"\n", 1)
}

// TestServerCaps: each limit on server connections caps what
// pg_stat_activity shows while more clients than the cap run pg_sleep at
// once, and every client still gets its answer (waiting, not failing).
func TestServerCaps(t *testing.T) {
	needPG(t)
	type backendCap struct {
		db, user string // what to count; "" = any
		want     int
	}
	cases := []struct {
		name   string
		ini    string
		sleep  time.Duration
		groups func(p *Pooler) []holdGroup
		caps   []backendCap
	}{
		{
			name: "reserve_pool",
			ini: iniSettings(map[string]string{
				"default_pool_size":    "2",
				"reserve_pool_size":    "1",
				"reserve_pool_timeout": "0.3",
			}, ""),
			sleep:  1500 * time.Millisecond,
			groups: func(p *Pooler) []holdGroup { return []holdGroup{{p.App(), 5}} },
			caps:   []backendCap{{appDB, appUser, 3}},
		},
		{
			name: "max_db_connections global",
			ini: iniSettings(map[string]string{
				"default_pool_size":  "10",
				"max_db_connections": "2",
			}, ""),
			sleep: 700 * time.Millisecond,
			groups: func(p *Pooler) []holdGroup {
				return []holdGroup{{p.App(), 2}, {p.ConnString(appDB, md5User, md5Password), 2}}
			},
			caps: []backendCap{{appDB, "", 2}},
		},
		{
			name: "max_db_connections per database",
			ini: withDBParams(iniSettings(map[string]string{
				"default_pool_size": "10",
			}, ""), appDB, "max_db_connections=2"),
			sleep: 700 * time.Millisecond,
			groups: func(p *Pooler) []holdGroup {
				return []holdGroup{{p.App(), 2}, {p.ConnString(appDB, md5User, md5Password), 2}, {p.ConnString(otherDB, appUser, appPassword), 3}}
			},
			caps: []backendCap{{appDB, "", 2}, {otherDB, appUser, 3}},
		},
		{
			name: "max_user_connections global",
			ini: iniSettings(map[string]string{
				"default_pool_size":    "10",
				"max_user_connections": "2",
			}, ""),
			sleep: 700 * time.Millisecond,
			groups: func(p *Pooler) []holdGroup {
				return []holdGroup{{p.App(), 2}, {p.ConnString(otherDB, appUser, appPassword), 2}}
			},
			caps: []backendCap{{"", appUser, 2}},
		},
		{
			name: "max_user_connections in [users]",
			ini: iniSettings(map[string]string{
				"default_pool_size": "10",
			}, "[users]\n"+appUser+" = max_user_connections=2"),
			sleep: 700 * time.Millisecond,
			groups: func(p *Pooler) []holdGroup {
				return []holdGroup{{p.App(), 2}, {p.ConnString(otherDB, appUser, appPassword), 2}, {p.ConnString(appDB, md5User, md5Password), 3}}
			},
			caps: []backendCap{{"", appUser, 2}, {appDB, md5User, 3}},
		},
		{
			name: "[pools] pool_size",
			ini: iniSettings(map[string]string{
				"default_pool_size": "10",
			}, "[pools]\n"+appUser+"."+appDB+" = pool_size=2"),
			sleep: 700 * time.Millisecond,
			groups: func(p *Pooler) []holdGroup {
				return []holdGroup{{p.App(), 4}, {p.ConnString(otherDB, appUser, appPassword), 4}}
			},
			caps: []backendCap{{appDB, appUser, 2}, {otherDB, appUser, 4}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			waitNoBackends(t, appDB, "")
			waitNoBackends(t, otherDB, "")
			p := startPooler(t, tc.ini, testUserlist)
			samplers := make([]*backendSampler, len(tc.caps))
			for i, c := range tc.caps {
				samplers[i] = sampleBackends(t, c.db, c.user, 20*time.Millisecond)
			}
			start := time.Now()
			errs := holdConcurrently(t, tc.sleep, tc.groups(p)...)
			elapsed := time.Since(start)
			for i, c := range tc.caps {
				maxSeen, samples := samplers[i].stop(t)
				t.Logf("db=%q user=%q: max %d backends over %d samples (cap %d); all clients done in %v", c.db, c.user, maxSeen, samples, c.want, elapsed)
				if maxSeen != c.want {
					t.Errorf("db=%q user=%q: pg_stat_activity peaked at %d backends, want exactly %d", c.db, c.user, maxSeen, c.want)
				}
			}
			for _, err := range errs {
				t.Errorf("a client's pg_sleep failed: %v", err)
			}
		})
	}
}
