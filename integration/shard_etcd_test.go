//go:build linux

package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgturnstile/pgturnstile/internal/etcdtest"
	"github.com/pgturnstile/pgturnstile/shard/etcdsource"
)

// The shard map in etcd (issue 36, item 3), with the real binary, a real
// etcd (in the test's process) and real PostgreSQL: two pgturnstile
// instances watch one etcd; before any map a cluster's client is refused
// (57P03) while a plain database is served; map A puts every logical shard
// on etcd_s0, map B moves them to etcd_s1 and is in force on both instances
// within a second, rows landing where each map says (read on each database
// directly); an invalid map is refused and the old one kept; etcd stopped
// and started again: traffic goes on, and the instances catch up with the
// next map. A client loops keyed inserts through all of it with 0 errors.

const etcdPrefix = "/itest"

func etcdMap(db string) []byte {
	return fmt.Appendf(nil, `
[[cluster]]
name = "etcdapp"
default_database = "etcd_main"
logical_shards = 4

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [ { range = "0-3", database = %q } ]
`, db)
}

func TestShardEtcdFleet(t *testing.T) {
	pgc := needPG(t)
	etcd := etcdtest.Start(t)
	ctx := ctxT(t, 4*time.Minute)
	su := directSuperuser(t, "postgres")
	direct := map[string]*pgx.Conn{}
	for _, db := range []string{"etcd_main", "etcd_s0", "etcd_s1"} {
		scratchDatabase(t, ctx, su, db, appUser)
		conn := connectPgx(t, pgc.directConnString(db, appUser, appPassword))
		if _, err := conn.Exec(ctx, "CREATE TABLE files (org_id bigint, v int)"); err != nil {
			t.Fatal(err)
		}
		direct[db] = conn
	}
	// rowsOn counts, on each database directly, the rows of key k.
	rowsOn := func(k int) map[string]int64 {
		out := map[string]int64{}
		for db, conn := range direct {
			out[db] = queryInt(t, conn, "SELECT count(*) FROM files WHERE org_id = $1", k)
		}
		return out
	}
	extra := fmt.Sprintf("[databases]\netcd_main = host=127.0.0.1 port=%d dbname=etcd_main\netcd_s0 = host=127.0.0.1 port=%d dbname=etcd_s0\netcd_s1 = host=127.0.0.1 port=%d dbname=etcd_s1\n",
		pgc.port, pgc.port, pgc.port)
	start := func(instance string) *Pooler {
		ini := iniSettings(withConsoleUsers(map[string]string{
			"shard_source": "etcd", "shard_etcd_endpoints": etcd.Endpoint(), "shard_etcd_prefix": etcdPrefix,
			"shard_etcd_instance": instance,
		}), extra)
		// No "*" entry: a cluster's name must not reach a database of
		// that name while no map has come.
		ini = strings.Replace(ini, "* = host=127.0.0.1 port=@PGPORT@\n", "", 1)
		return startPooler(t, ini, opsUserlist)
	}
	cli, err := etcdsource.NewClient(etcdsource.ClientConfig{Endpoints: []string{etcd.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	publish := func(doc []byte) int64 {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rev, err := etcdsource.Publish(pctx, cli, etcdPrefix, doc)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	// served is the revision SHOW SHARDS names (0: no map).
	served := func(console *pgx.Conn) int64 {
		sh := show(t, console, "SHOW SHARDS")
		if len(sh.rows) == 0 {
			return 0
		}
		rev, _ := strconv.ParseInt(sh.rows[0]["revision"], 10, 64)
		return rev
	}
	// waitServed polls SHOW SHARDS until it names rev, and says how long.
	waitServed := func(console *pgx.Conn, rev int64, within time.Duration, what string) time.Duration {
		t.Helper()
		t0 := time.Now()
		for served(console) != rev {
			if time.Since(t0) > within {
				t.Fatalf("%s: revision %d not served within %v (serving %d)", what, rev, within, served(console))
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(t0)
	}

	p1 := start("p1")
	c1 := adminConsole(t, p1)
	// No map yet: the cluster's name is refused, a database is served.
	_, err = tryConnectPgx(t, pgxConfig(t, p1.ConnString("etcdapp", appUser, appPassword)))
	wantPgError(t, err, "FATAL", "57P03", "no such database: etcdapp (no shard map from etcd yet)")
	selectOne(t, p1.ConnString("etcd_main", appUser, appPassword))
	if !p1.LogContains("no map at /itest/map yet") {
		t.Errorf("the log does not say there is no map yet:\n%s", p1.Log())
	}

	revA := publish(etcdMap("etcd_s0"))
	t.Logf("map A in force on p1 %v after its put", waitServed(c1, revA, time.Second, "map A on p1"))
	if sh := show(t, c1, "SHOW SHARDS"); sh.rows[0]["source"] != "etcd:/itest/map" || sh.rows[0]["database"] != "etcd_s0" {
		t.Fatalf("SHOW SHARDS: %v", sh.rows)
	}
	app := connectPgx(t, p1.ConnString("etcdapp", appUser, appPassword))
	if _, err := app.Exec(ctx, "INSERT INTO files (org_id, v) VALUES (42, 1)"); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(42); got["etcd_s0"] != 1 || got["etcd_s1"] != 0 || got["etcd_main"] != 0 {
		t.Fatalf("key 42 under map A: %v", got)
	}

	// A second instance starts with map A in force, and the fleet is
	// seen converged from etcd and from either console.
	p2 := start("p2")
	c2 := adminConsole(t, p2)
	waitServed(c2, revA, 5*time.Second, "map A on p2")
	waitFleet := func(rev int64, n int, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := etcdsource.ReadStatus(sctx, cli, etcdPrefix)
			cancel()
			if err == nil && st.MapRevision == rev && len(st.Instances) == n && st.Converged() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: fleet not converged on %d with %d instances: %+v, %v", what, rev, n, st, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFleet(revA, 2, "map A")
	inst := show(t, c1, "SHOW SHARD_INSTANCES")
	if len(inst.rows) != 2 || len(inst.where("instance", "p1", "self", "yes", "converged", "yes", "revision", fmt.Sprint(revA))) != 1 ||
		len(inst.where("instance", "p2", "self", "no", "converged", "yes", "listen", p2.Addr())) != 1 {
		t.Fatalf("SHOW SHARD_INSTANCES on p1: %v", inst.rows)
	}

	// A client loops keyed inserts (keys from 1000 up) through p1 from
	// here to the end: no error, whatever happens to the map or etcd.
	var stop atomic.Bool
	var loopErrs []error
	var loops atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	defer func() { stop.Store(true); wg.Wait() }() // also when the test fails
	go func() {
		defer wg.Done()
		conn, err := pgx.ConnectConfig(ctx, pgxConfig(t, p1.ConnString("etcdapp", appUser, appPassword)))
		if err != nil {
			loopErrs = append(loopErrs, err)
			return
		}
		defer conn.Close(context.Background())
		for k := 1000; !stop.Load(); k++ {
			if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, v) VALUES ($1, 2)", k); err != nil {
				loopErrs = append(loopErrs, err)
				return
			}
			loops.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// Map B moves every logical shard to etcd_s1: in force on both
	// instances within a second of the put.
	revB := publish(etcdMap("etcd_s1"))
	t0 := time.Now()
	waitServed(c1, revB, time.Second, "map B on p1")
	waitServed(c2, revB, time.Second-time.Since(t0), "map B on p2")
	t.Logf("map B in force on both instances %v after its put", time.Since(t0))
	if _, err := app.Exec(ctx, "INSERT INTO files (org_id, v) VALUES (43, 1)"); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(43); got["etcd_s1"] != 1 || got["etcd_s0"] != 0 {
		t.Fatalf("key 43 under map B: %v", got)
	}
	waitFleet(revB, 2, "map B")

	// An invalid map (a database that is no [databases] entry) is
	// refused by both; B stays in force and traffic goes on.
	revBad := publish(etcdMap("etcd_nowhere"))
	for _, p := range []*Pooler{p1, p2} {
		if !p.WaitLog(fmt.Sprintf("revision %d of /itest/map refused, revision %d kept", revBad, revB), 5*time.Second) {
			t.Fatalf("no refusal in the log:\n%s", p.Log())
		}
	}
	if served(c1) != revB || served(c2) != revB {
		t.Fatal("a refused map changed the map served")
	}
	// Each instance's record names the refusal (written just after it
	// is logged), and SHOW SHARD_INSTANCES shows the fleet behind the
	// newest revision.
	for deadline := time.Now().Add(5 * time.Second); ; {
		inst := show(t, c1, "SHOW SHARD_INSTANCES")
		rows := inst.where("rejected_revision", fmt.Sprint(revBad), "revision", fmt.Sprint(revB), "converged", "no")
		if len(rows) == 2 && strings.Contains(rows[0]["rejected"], `no database "etcd_nowhere"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SHOW SHARD_INSTANCES after the refusal: %v", inst.rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := app.Exec(ctx, "INSERT INTO files (org_id, v) VALUES (44, 1)"); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(44); got["etcd_s1"] != 1 {
		t.Fatalf("key 44 after the refused map: %v", got)
	}

	// etcd stopped: both instances say so and serve map B.
	etcd.Stop()
	for _, p := range []*Pooler{p1, p2} {
		if !p.WaitLog("lost etcd", 10*time.Second) {
			t.Fatalf("the loss of etcd is not logged:\n%s", p.Log())
		}
	}
	before := loops.Load()
	time.Sleep(time.Second)
	if _, err := app.Exec(ctx, "INSERT INTO files (org_id, v) VALUES (45, 1)"); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(45); got["etcd_s1"] != 1 {
		t.Fatalf("key 45 without etcd: %v", got)
	}
	if served(c1) != revB || loops.Load() == before {
		t.Fatalf("without etcd: serving %d, %d inserts in a second", served(c1), loops.Load()-before)
	}

	// etcd back: the next map (A again) reaches both.
	etcd.Restart()
	for _, p := range []*Pooler{p1, p2} {
		if !p.WaitLog("etcd is back", 10*time.Second) {
			t.Fatalf("the return of etcd is not logged:\n%s", p.Log())
		}
	}
	revA2 := publish(etcdMap("etcd_s0"))
	waitServed(c1, revA2, 2*time.Second, "map A again on p1")
	waitServed(c2, revA2, 2*time.Second, "map A again on p2")
	waitFleet(revA2, 2, "after etcd's return")
	if _, err := app.Exec(ctx, "INSERT INTO files (org_id, v) VALUES (46, 1)"); err != nil {
		t.Fatal(err)
	}
	if got := rowsOn(46); got["etcd_s0"] != 1 || got["etcd_s1"] != 0 {
		t.Fatalf("key 46 after catching up: %v", got)
	}

	stop.Store(true)
	wg.Wait()
	if len(loopErrs) != 0 || loops.Load() < 100 {
		t.Fatalf("the looping client: %d inserts, errors %v", loops.Load(), loopErrs)
	}
	// Every looped row is on one database, none lost.
	var total int64
	for _, conn := range direct {
		total += queryInt(t, conn, "SELECT count(*) FROM files WHERE v = 2")
	}
	if total != loops.Load() {
		t.Fatalf("%d looped rows on the databases, %d inserted", total, loops.Load())
	}

	// An instance that stops takes its record with it. (SIGTERM waits
	// for its clients: the console's first.)
	c2.Close(ctx)
	p2.Stop()
	waitFleet(revA2, 1, "after p2 stopped")
}
