package pooler

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// hasPool says whether SHOW POOLS lists db/user.
func hasPool(r *timingRig, db, user string) bool {
	for _, p := range r.svc.Console().Pools() {
		if p.Database == db && p.User == user {
			return true
		}
	}
	return false
}

// metricsMention says whether /metrics carries a series of db/user.
func metricsMention(r *timingRig, db, user string) bool {
	var b bytes.Buffer
	r.svc.WriteMetrics(&b)
	return strings.Contains(b.String(), `database="`+db+`",user="`+user+`"`)
}

// pool_idle_timeout frees a pool that has had no client and no server for
// that long, not before; its SHOW POOLS row and Prometheus series go; the
// next client gets a fresh pool that works.
func TestTimingPoolIdleTimeoutFreesPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_idle_timeout = 5\nserver_idle_timeout = 1\nautodb_idle_timeout = 0\n")
		c := r.connect("u", nil)
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query: %+v", rep)
		}
		c.close()
		// The server goes at ~1.1 s (server_idle_timeout); the pool is
		// unused from then, so it stays until ~6.1 s.
		r.sleepUntil(5 * time.Second)
		if !hasPool(r, "db", "u") || !metricsMention(r, "db", "u") {
			t.Fatalf("pool freed before pool_idle_timeout: SHOW POOLS %+v", r.svc.Console().Pools())
		}
		if n := len(r.serverPIDs()); n != 0 {
			t.Fatalf("%d servers left after server_idle_timeout", n)
		}
		r.sleepUntil(7 * time.Second)
		if hasPool(r, "db", "u") {
			t.Fatalf("pool still listed after pool_idle_timeout: %+v", r.svc.Console().Pools())
		}
		if metricsMention(r, "db", "u") {
			t.Fatalf("freed pool's series still in /metrics")
		}
		// PgBouncer's line (janitor.c): unused since ~1.1 s, freed at the
		// first janitor pass past 6.1 s.
		if !strings.Contains(r.log.String(), "cleaning up idle pool for user u on db db because: pool idle timeout (age= 5s)") {
			t.Errorf("no cleaning up line in the log:\n%s", r.log.String())
		}
		c2 := r.connect("u", nil)
		if rep := c2.query("SELECT 2"); !rep.ready || rep.err != nil {
			t.Fatalf("query on the fresh pool: %+v", rep)
		}
		if !hasPool(r, "db", "u") || !metricsMention(r, "db", "u") {
			t.Fatalf("fresh pool not listed")
		}
	})
}

// A pool with a client is never freed, however long the client idles.
func TestTimingPoolIdleTimeoutKeepsUsedPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\npool_idle_timeout = 2\nserver_idle_timeout = 1\n")
		c := r.connect("u", nil)
		r.sleepUntil(10 * time.Second)
		if !hasPool(r, "db", "u") {
			t.Fatalf("pool of a connected client freed")
		}
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query: %+v", rep)
		}
	})
}

// autodb_idle_timeout frees a database served from "*" once its pools are
// unused that long: it leaves SHOW DATABASES, and its next use logs
// "registered new auto-database" again. pool_idle_timeout is off.
func TestTimingAutodbIdleTimeoutFreesDatabase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "autodb_idle_timeout = 5\nserver_idle_timeout = 1\n[databases]\n* = host=fake.invalid port=5432 dbname=fake\n")
		listed := func() bool {
			for _, d := range r.svc.Console().Databases() {
				if d.Name == "auto" {
					return true
				}
			}
			return false
		}
		c := connectTo(r, "auto")
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query: %+v", rep)
		}
		c.close()
		r.sleepUntil(5 * time.Second)
		if !listed() || !hasPool(r, "auto", "u") {
			t.Fatalf("auto-database freed before autodb_idle_timeout")
		}
		r.sleepUntil(7 * time.Second)
		if listed() || hasPool(r, "auto", "u") || metricsMention(r, "auto", "u") {
			t.Fatalf("auto-database still there after autodb_idle_timeout")
		}
		if !strings.Contains(r.log.String(), "level=WARN msg=\"dropping database 'auto' as it does not exist anymore or inactive auto-database\"") {
			t.Errorf("no dropping database line in the log:\n%s", r.log.String())
		}
		c2 := connectTo(r, "auto")
		if rep := c2.query("SELECT 2"); !rep.ready || rep.err != nil {
			t.Fatalf("query after re-registration: %+v", rep)
		}
		if n := strings.Count(r.log.String(), "registered new auto-database: auto"); n != 2 {
			t.Fatalf("%d registrations logged; want 2:\n%s", n, r.log.String())
		}
	})
}

// The janitor never frees a pinned pool (a login between poolFor and
// counting itself in it): only after unpin, and then a lookup gets a new
// pool.
func TestPoolFreePinned(t *testing.T) {
	cfg := parseTimingConfig(t, "pool_idle_timeout = 1\n")
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	db := cfg.Databases["db"]
	p, err := svc.poolFor(db, "u")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	svc.freeUnusedPools(t0)
	svc.freeUnusedPools(t0.Add(time.Hour))
	if q, _ := svc.poolFor(db, "u"); q != p {
		t.Fatalf("pinned pool freed")
	}
	svc.unpin(p)
	svc.unpin(p)
	svc.freeUnusedPools(t0.Add(2 * time.Hour))
	svc.freeUnusedPools(t0.Add(3 * time.Hour))
	q, _ := svc.poolFor(db, "u")
	if q == p {
		t.Fatalf("unpinned unused pool not freed")
	}
	p.mu.Lock()
	freed := p.freed
	p.mu.Unlock()
	if !freed {
		t.Fatalf("freed pool not marked freed")
	}
	if slices.Contains(svc.dbLimits["db"].Members(), p) {
		t.Fatalf("freed pool still in its database's limiter")
	}
	// A lookup between two passes (a login that failed after poolFor)
	// restarts the unused time.
	svc.unpin(q)
	svc.freeUnusedPools(t0.Add(4 * time.Hour))
	if r, _ := svc.poolFor(db, "u"); r != q {
		t.Fatalf("pool freed at the pass that first found it unused")
	}
	svc.unpin(q)
	svc.freeUnusedPools(t0.Add(5 * time.Hour))
	if r, _ := svc.poolFor(db, "u"); r != q {
		t.Fatalf("pool freed although looked up since the last pass")
	}
	svc.unpin(q)
}

// Clients log in, query and leave while the janitor frees the pool every
// few ticks: each logs in to the pool SHOW POOLS lists (never a freed
// one) and its queries work. Run with -race.
func TestTimingPoolIdleTimeoutRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\npool_idle_timeout = 0.2\nserver_idle_timeout = 0.1\n")
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for round := 0; round < 20; round++ {
			for i := 0; i < 3; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := r.connectQuiet("u")
					if c == nil {
						errs <- "login failed"
						return
					}
					defer c.close()
					if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
						errs <- "query failed"
						return
					}
					if p := r.pool("u"); p.ClActive+p.ClWaiting == 0 {
						errs <- "client not counted in the listed pool"
					}
				}()
			}
			time.Sleep(time.Duration(round%4) * 150 * time.Millisecond)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		// Everyone left: the pool goes once more.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if hasPool(r, "db", "u") {
			t.Fatalf("pool left after the last client")
		}
	})
}

// connectQuiet logs user in to "db" like connect, from any goroutine: nil
// if the login failed; the caller closes the client.
func (r *timingRig) connectQuiet(user string) *pipeClient {
	mine, theirs := net.Pipe()
	r.svc.serveConn(theirs)
	pc := &pipeClient{conn: mine, fe: pgproto3.NewFrontend(mine, mine)}
	pc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: 196608, Parameters: map[string]string{"user": user, "database": "db"}})
	if err := pc.fe.Flush(); err != nil {
		return nil
	}
	if rep := pc.readReply(); !rep.ready || rep.err != nil {
		pc.close()
		return nil
	}
	return pc
}
