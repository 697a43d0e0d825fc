//go:build linux

package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The seed's resharding path, under load, with 0 client errors at each
// step (issue 36): the logical phase (every shard a role on the one old
// host, seeing its rows through the views `pgturnstile shard views`
// prints); a rollback to unsharded and forward again, each one map change
// and a RELOAD; a move that fails (its target is no [databases] entry of
// the instances) and resumes on the old mapping; then logical shards 4-7
// moved to a second host by `pgturnstile shard move` through the two
// instances' consoles, with logical replication from the old host; then
// the way back — the range moved back to the old host (replicated the
// other way) and the cluster rolled back to unsharded.
//
// Ground truth is Postgres': each key's logical shard is its partition
// in a table PARTITION BY HASH with MODULUS 8; where rows are is read on
// each host directly, each acked write by its (client, seq).

const lpFile = `
[[cluster]]
name = "lp"
default_database = "lp_main"
logical_shards = 8
views = %t

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [ { range = "0-3", database = %q }, { range = "4-7", database = %q } ]
`

const lpKeys = 1000

type lpWrite struct {
	client, seq int
	key         int64
}

type lpLoad struct {
	stop   atomic.Bool
	wg     sync.WaitGroup
	acked  atomic.Int64
	mu     sync.Mutex
	writes []lpWrite
	errs   []string
}

func TestShardLogicalPhaseAndMove(t *testing.T) {
	needPG(t)
	ctx := ctxT(t, 5*time.Minute)
	old := startPublishingCluster(t)
	newHost := startPublishingCluster(t) // it publishes too, for the way back
	for _, h := range []*cluster{old, newHost} {
		if _, err := connectPgx(t, h.directConnString(appDB, appUser, appPassword)).Exec(ctx,
			"CREATE TABLE files (org_id bigint NOT NULL, client int NOT NULL, seq int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (client, seq))"); err != nil {
			t.Fatal(err)
		}
	}
	oldSU := connectPgx(t, old.superuserConnString(appDB))

	// The truth: each key's logical shard, Postgres' partition.
	shardOf := map[int64]int{}
	for _, s := range []string{
		"CREATE TABLE truth (k bigint) PARTITION BY HASH (k)",
		"CREATE TABLE truth_0 PARTITION OF truth FOR VALUES WITH (MODULUS 8, REMAINDER 0)",
		"CREATE TABLE truth_1 PARTITION OF truth FOR VALUES WITH (MODULUS 8, REMAINDER 1)",
		"CREATE TABLE truth_2 PARTITION OF truth FOR VALUES WITH (MODULUS 8, REMAINDER 2)",
		"CREATE TABLE truth_3 PARTITION OF truth FOR VALUES WITH (MODULUS 8, REMAINDER 3)",
		"CREATE TABLE truth_4 PARTITION OF truth FOR VALUES WITH (MODULUS 8, REMAINDER 4)",
		"CREATE TABLE truth_5 PARTITION OF truth FOR VALUES WITH (MODULUS 8, REMAINDER 5)",
		"CREATE TABLE truth_6 PARTITION OF truth FOR VALUES WITH (MODULUS 8, REMAINDER 6)",
		"CREATE TABLE truth_7 PARTITION OF truth FOR VALUES WITH (MODULUS 8, REMAINDER 7)",
		fmt.Sprintf("INSERT INTO truth SELECT generate_series(1, %d)", lpKeys),
	} {
		if _, err := oldSU.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	rows, err := oldSU.Query(ctx, "SELECT k, right(tableoid::regclass::text, 1)::int FROM truth")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k int64
		var rem int
		if err := rows.Scan(&k, &rem); err != nil {
			t.Fatal(err)
		}
		shardOf[k] = rem
	}
	if rows.Err() != nil || len(shardOf) != lpKeys {
		t.Fatalf("truth: %d keys, %v", len(shardOf), rows.Err())
	}
	upper := func(k int64) bool { return shardOf[k] >= 4 }

	// The logical phase: the views' SQL and [databases] lines, from the
	// binary, run on the old host.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "shards.toml")
	writeMap := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	viewsMap := fmt.Sprintf(lpFile, true, "lp_s0", "lp_s1")
	writeMap(viewsMap)
	out, err := exec.Command(poolerBinary(t), "shard", "views", "--host", "127.0.0.1", "--port", strconv.Itoa(old.port), "--dbname", appDB, path).CombinedOutput()
	if err != nil {
		t.Fatalf("pgturnstile shard views: %v\n%s", err, out)
	}
	dbLines := applyViews(t, ctx, oldSU, out, "lp_s")
	extra := fmt.Sprintf("[databases]\nlp_main = host=127.0.0.1 port=%d dbname=%s\nlp_new = host=127.0.0.1 port=%d dbname=%s\n%s\n",
		old.port, appDB, newHost.port, appDB, strings.Join(dbLines, "\n"))
	var poolers []*Pooler
	var consoles []*pgx.Conn
	for range 2 {
		p := startPooler(t, iniSettings(withConsoleUsers(map[string]string{"shard_file": path, "default_pool_size": "10", "query_wait_timeout": "60"}), extra), opsUserlist)
		poolers = append(poolers, p)
		consoles = append(consoles, adminConsole(t, p))
	}
	reload := func(doc string) {
		t.Helper()
		writeMap(doc)
		for _, c := range consoles {
			if _, err := c.Exec(ctx, "RELOAD"); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The load: 30 clients insert one row each, keyed by a random key,
	// through both instances, extended protocol; a second load for the
	// way back numbers its clients from 100.
	load := &lpLoad{}
	startLoad := func(base int) {
		load = &lpLoad{}
		load := load
		for c := base; c < base+30; c++ {
			conn := connectPgx(t, poolers[c%2].ConnString("lp", appUser, appPassword))
			load.wg.Add(1)
			go func() {
				defer load.wg.Done()
				rnd := rand.New(rand.NewPCG(uint64(c), 7))
				for seq := 0; !load.stop.Load(); seq++ {
					k := int64(1 + rnd.IntN(lpKeys))
					if _, err := conn.Exec(ctx, "INSERT INTO files (org_id, client, seq) VALUES ($1, $2, $3)", k, c, seq); err != nil {
						load.mu.Lock()
						load.errs = append(load.errs, fmt.Sprintf("client %d, key %d: %v", c, k, err))
						load.mu.Unlock()
						return
					}
					load.acked.Add(1)
					load.mu.Lock()
					load.writes = append(load.writes, lpWrite{client: c, seq: seq, key: k})
					load.mu.Unlock()
				}
			}()
		}
	}
	startLoad(0)
	stopLoad := func() { load.stop.Store(true); load.wg.Wait() }
	defer stopLoad()
	// until lets the load run until n writes are acked in all, failing
	// at once on a client error.
	until := func(n int64, what string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for load.acked.Load() < n {
			load.mu.Lock()
			errs := len(load.errs)
			load.mu.Unlock()
			if errs > 0 {
				stopLoad()
				t.Fatalf("%s: %d client errors, first: %s", what, len(load.errs), load.errs[0])
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d writes acked, want %d", what, load.acked.Load(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s: %d writes acked so far, 0 errors", what, load.acked.Load())
	}

	// 1. The logical phase.
	until(100000, "logical phase")
	// Each row is visible only through its own shard's views.
	for _, s := range []struct {
		schema string
		upper  bool
	}{{"lp_s0", false}, {"lp_s1", true}} {
		rows, err := oldSU.Query(ctx, "SELECT DISTINCT org_id FROM "+s.schema+".files")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var k int64
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			if n++; upper(k) != s.upper {
				t.Errorf("key %d (Postgres' shard %d) is visible through %s's views", k, shardOf[k], s.schema)
			}
		}
		if rows.Err() != nil || n == 0 {
			t.Fatalf("%s's views: %d keys, %v", s.schema, n, rows.Err())
		}
	}
	// A direct insert through the wrong shard's role: the check option.
	var lowKey, highKey int64
	for k := int64(1); lowKey == 0 || highKey == 0; k++ {
		if upper(k) {
			highKey = k
		} else {
			lowKey = k
		}
	}
	s0 := connectPgx(t, old.directConnString(appDB, "lp_s0", "pw_lp_s0"))
	_, err = s0.Exec(ctx, "INSERT INTO files (org_id, client, seq) VALUES ($1, -1, 1)", highKey)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "44000" {
		t.Fatalf("key %d (shard %d) inserted as lp_s0: %v, want 44000 (WITH CHECK OPTION)", highKey, shardOf[highKey], err)
	}
	if _, err := s0.Exec(ctx, "INSERT INTO files (org_id, client, seq) VALUES ($1, -1, 1)", lowKey); err != nil {
		t.Fatalf("key %d (shard %d) inserted as lp_s0: %v", lowKey, shardOf[lowKey], err)
	}
	if _, err := oldSU.Exec(ctx, "DELETE FROM files WHERE client = -1"); err != nil {
		t.Fatal(err)
	}

	// 2. Rolled back to unsharded, and forward again: a map change and
	// a RELOAD each, under load.
	reload(fmt.Sprintf(lpFile, false, "lp_main", "lp_main"))
	until(load.acked.Load()+15000, "rolled back to unsharded")
	reload(viewsMap)
	until(load.acked.Load()+15000, "logical phase again")

	// 3. Logical shards 4-7 to the new host: it subscribes to the old
	// host's table.
	newSU := connectPgx(t, newHost.superuserConnString(appDB))
	// The publication of the range's rows alone, as the move's dry run
	// prints it: its row filter is the router's hash, so the new host
	// gets the rows of shards 4-7 and no other (checked at the end
	// against Postgres' partitions).
	out, err = exec.Command(poolerBinary(t), "shard", "move", "--dry-run", "--cluster", "lp", "--colo", "org", "--range", "4-7", "--to", "lp_new",
		"--shard-file", path, "--console", "host=127.0.0.1", "--no-replication-wait").CombinedOutput()
	i := strings.Index(string(out), "CREATE PUBLICATION")
	if err != nil || i < 0 {
		t.Fatalf("shard move --dry-run: %v\n%s", err, out)
	}
	if _, err := oldSU.Exec(ctx, string(out[i:])); err != nil {
		t.Fatalf("%s: %v", out[i:], err)
	}
	if _, err := newSU.Exec(ctx, fmt.Sprintf("CREATE SUBSCRIPTION lpsub CONNECTION 'host=127.0.0.1 port=%d user=postgres dbname=%s' PUBLICATION move_org_4_7 WITH (synchronous_commit = on)",
		old.port, appDB)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); queryInt(t, newSU, "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'") != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the subscription did not copy the table within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	move := func(to string, source *cluster, sub string) (string, error) {
		args := []string{"shard", "move", "--cluster", "lp", "--colo", "org", "--range", "4-7", "--to", to,
			"--shard-file", path, "--source", source.superuserConnString(appDB), "--subscription", sub}
		for _, p := range poolers {
			args = append(args, "--console", fmt.Sprintf("host=127.0.0.1 port=%d dbname=pgbouncer user=%s password=%s sslmode=disable", p.Port, adminUser, adminPass))
		}
		out, err := exec.Command(poolerBinary(t), args...).CombinedOutput()
		t.Logf("shard move --to %s: %v\n%s", to, err, out)
		return string(out), err
	}
	// A move whose target the instances do not know: RELOAD keeps the
	// old map, the move puts the file back and resumes. No client sees
	// an error, the range stays where it was.
	if text, err := move("lp_nosuch", old, "lpsub"); err == nil || !strings.Contains(text, "RELOAD failed") || !strings.Contains(text, "old map back in force") || !strings.Contains(text, "resumed on the old mapping") {
		t.Fatalf("a move to an unknown database: %v", err)
	}
	for i, c := range consoles {
		if sh := show(t, c, "SHOW SHARDS"); len(sh.where("range", "4-7", "database", "lp_s1", "state", "running")) != 1 {
			t.Fatalf("p%d after the failed move: %v", i+1, sh.rows)
		}
	}
	until(load.acked.Load()+5000, "after the failed move")
	text, err := move("lp_new", old, "lpsub")
	if err != nil {
		t.Fatalf("shard move: %v", err)
	}
	m := movePublishedRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the move's output lacks the publication:\n%s", text)
	}
	published, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range consoles {
		if sh := show(t, c, "SHOW SHARDS"); len(sh.where("range", "4-7", "database", "lp_new", "state", "running")) != 1 {
			t.Errorf("p%d after the move: %v", i+1, sh.rows)
		}
	}
	until(load.acked.Load()+15000, "after the move")
	stopLoad()
	if len(load.errs) > 0 {
		t.Fatalf("%d client errors, first: %s", len(load.errs), load.errs[0])
	}

	// Every acked write is on the host that owns its key now (the upper
	// range's older rows came to the new host by replication), exactly
	// once; no write of the upper range committed on the old host after
	// the new map's publication.
	type id struct{ client, seq int }
	onHost := func(conn *pgx.Conn) map[id]int64 {
		rows, err := conn.Query(ctx, "SELECT client, seq, org_id FROM public.files")
		if err != nil {
			t.Fatal(err)
		}
		got := map[id]int64{}
		for rows.Next() {
			var i id
			var k int64
			if err := rows.Scan(&i.client, &i.seq, &k); err != nil {
				t.Fatal(err)
			}
			got[i] = k
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return got
	}
	oldRows, newRows := onHost(oldSU), onHost(newSU)
	var lowAcked, highAcked, missing int
	for _, w := range load.writes {
		owner := oldRows
		if upper(w.key) {
			owner, highAcked = newRows, highAcked+1
		} else {
			lowAcked++
		}
		if k, ok := owner[id{w.client, w.seq}]; !ok || k != w.key {
			if missing++; missing <= 5 {
				t.Errorf("write %+v (shard %d) is not on its owner (%d, %v)", w, shardOf[w.key], k, ok)
			}
		}
	}
	countOn := func(rows map[id]int64, wantUpper bool) int {
		n := 0
		for _, k := range rows {
			if upper(k) == wantUpper {
				n++
			}
		}
		return n
	}
	if n := countOn(oldRows, false); n != lowAcked {
		t.Errorf("the old host holds %d rows of shards 0-3; %d were acked", n, lowAcked)
	}
	if n := countOn(newRows, true); n != highAcked {
		t.Errorf("the new host holds %d rows of shards 4-7; %d were acked", n, highAcked)
	}
	if n := countOn(newRows, false); n != 0 {
		t.Errorf("the new host holds %d rows of shards 0-3: the publication's row filter let them through", n)
	}
	var upperKeys []int64
	for k := range shardOf {
		if upper(k) {
			upperKeys = append(upperKeys, k)
		}
	}
	late := queryInt(t, oldSU, "SELECT count(*) FROM public.files WHERE org_id = ANY($1) AND at >= $2", upperKeys, published)
	if late != 0 {
		t.Errorf("%d writes of shards 4-7 committed on the old host after the publication", late)
	}
	t.Logf("%d writes acked, 0 client errors: %d of shards 0-3 on the old host, %d of shards 4-7 on the new host", len(load.writes), lowAcked, highAcked)
	first := load.writes

	// 4. The way back, under load again: shards 4-7 return to the old
	// host (its lp_s1 views), then the cluster to unsharded. The
	// forward subscription goes first (on PostgreSQL 15 a subscription
	// each way would send every change back); the range's rows on the
	// old host, which no traffic reaches, are emptied, and the old host
	// subscribes to the new one's range, copying it whole.
	if _, err := newSU.Exec(ctx, "DROP SUBSCRIPTION lpsub"); err != nil {
		t.Fatal(err)
	}
	// The forward publication too: its row filter is on org_id, which
	// the table's replica identity (its key, client and seq) lacks, so
	// Postgres refuses a DELETE while it publishes the table.
	if _, err := oldSU.Exec(ctx, "DROP PUBLICATION move_org_4_7"); err != nil {
		t.Fatal(err)
	}
	if _, err := oldSU.Exec(ctx, "DELETE FROM public.files WHERE org_id = ANY($1)", upperKeys); err != nil {
		t.Fatal(err)
	}
	startLoad(100)
	out, err = exec.Command(poolerBinary(t), "shard", "move", "--dry-run", "--cluster", "lp", "--colo", "org", "--range", "4-7", "--to", "lp_s1",
		"--shard-file", path, "--console", "host=127.0.0.1", "--no-replication-wait").CombinedOutput()
	if i = strings.Index(string(out), "CREATE PUBLICATION"); err != nil || i < 0 {
		t.Fatalf("shard move --dry-run back: %v\n%s", err, out)
	}
	if _, err := newSU.Exec(ctx, string(out[i:])); err != nil {
		t.Fatalf("%s: %v", out[i:], err)
	}
	if _, err := oldSU.Exec(ctx, fmt.Sprintf("CREATE SUBSCRIPTION backsub CONNECTION 'host=127.0.0.1 port=%d user=postgres dbname=%s' PUBLICATION move_org_4_7 WITH (synchronous_commit = on)",
		newHost.port, appDB)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); queryInt(t, oldSU, "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'") != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the way back: the subscription did not copy the table within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	until(5000, "the way back, before the move")
	text, err = move("lp_s1", newHost, "backsub")
	if err != nil {
		t.Fatalf("shard move back: %v", err)
	}
	m = movePublishedRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the move back's output lacks the publication:\n%s", text)
	}
	if published, err = time.Parse(time.RFC3339Nano, m[1]); err != nil {
		t.Fatal(err)
	}
	until(load.acked.Load()+10000, "after the move back")
	reload(fmt.Sprintf(lpFile, false, "lp_main", "lp_main"))
	until(load.acked.Load()+10000, "unsharded again")
	stopLoad()
	if len(load.errs) > 0 {
		t.Fatalf("the way back: %d client errors, first: %s", len(load.errs), load.errs[0])
	}
	// Every acked write of both loads is on the old host, once; nothing
	// of shards 4-7 committed on the new host after the move back.
	oldRows = onHost(oldSU)
	missing = 0
	all := append(first, load.writes...)
	for _, w := range all {
		if k, ok := oldRows[id{w.client, w.seq}]; !ok || k != w.key {
			if missing++; missing <= 5 {
				t.Errorf("write %+v (shard %d) is not on the old host after the way back (%d, %v)", w, shardOf[w.key], k, ok)
			}
		}
	}
	if len(oldRows) != len(all) {
		t.Errorf("the old host holds %d rows; %d writes were acked", len(oldRows), len(all))
	}
	if late := queryInt(t, newSU, "SELECT count(*) FROM public.files WHERE org_id = ANY($1) AND at >= $2", upperKeys, published); late != 0 {
		t.Errorf("%d writes of shards 4-7 committed on the new host after the move back", late)
	}
	t.Logf("the way back: %d more writes acked, 0 client errors; all %d on the old host", len(load.writes), len(all))
}
