//go:build linux

package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The router at scale (issue 34's "Done when"): over 100,000 routed
// inserts, the same keys of the three key types through the simple
// protocol, the extended protocol with text parameters and the extended
// protocol with binary ones, then 0 rows on a wrong database and every
// row read back through the router. Where a key belongs is Postgres' own
// answer (rig.expected: its PARTITION BY HASH); where each row landed is
// read on each database directly. The inserts run on several connections
// at once, most of them in pipelines (a pgx.Batch: one Query of many
// statements on the simple protocol, one Sync on the extended one) of
// keys that Postgres places on one database, since a pipeline is one
// transaction and two shards in one are refused.

// scaleKeys is the number of distinct keys of each type; each goes in
// through every path, so the test routes 3 × 3 × scaleKeys inserts.
const scaleKeys = 11200

// scalePath is one way in: a pgx mode, and the v its rows carry.
type scalePath struct {
	name string
	mode pgx.QueryExecMode
	v    int
}

var scalePaths = []scalePath{
	{"simple", pgx.QueryExecModeSimpleProtocol, 1},
	{"extended-text", pgx.QueryExecModeExec, 2},
	{"extended-binary", pgx.QueryExecModeCacheStatement, 3},
}

// scaleJob is a pipeline (or, with one key, a lone statement) of inserts
// of one colo whose keys Postgres places on one database.
type scaleJob struct {
	colo string
	keys []string
	// kind: the binary path's statement for these keys: "int8", "int4",
	// "int2" (org keys by their range), "text", "uuid".
	kind string
}

// orgScaleKeys are distinct bigint keys: the extremes, 0 and ±1, and
// random ones, some in int2 and int4 range (the binary path sends those
// as 2- and 4-byte integers).
func orgScaleKeys(r *rand.Rand, n int) []string {
	seen := map[int64]bool{}
	var out []string
	add := func(k int64) {
		if !seen[k] {
			seen[k] = true
			out = append(out, strconv.FormatInt(k, 10))
		}
	}
	for _, k := range []int64{0, 1, -1, 42, -7, 1000000007, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32,
		math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt16, math.MinInt16, math.MaxInt16 + 1, math.MinInt16 - 1} {
		add(k)
	}
	for len(out) < n {
		switch len(out) % 10 {
		case 0:
			add(int64(r.IntN(1<<16)) - 1<<15)
		case 1:
			add(int64(int32(r.Uint32())))
		default:
			add(r.Int64() - r.Int64())
		}
	}
	return out
}

// tenantScaleKeys are distinct text keys: the empty string, quotes,
// backslashes, comment and dollar-quote lookalikes, multi-byte UTF-8,
// whitespace, a long one, and random ones.
func tenantScaleKeys(r *rand.Rand, n int) []string {
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, k := range []string{"", " ", "'", "''", `\`, `\'`, "O'Reilly", "a'b''c", "$$", "$x$", "--", "-- x", "/*", "*/", "/* x */",
		"é", "日本語テキスト", "🙂🙃", "\t", "a\nb", " lead", "trail ", ";", "x; DROP TABLE tenants", "NULL", "null",
		strings.Repeat("long-é-", 60), "E'x'", `"quoted"`, "?", "$1", "%s"} {
		add(k)
	}
	for len(out) < n {
		switch len(out) % 4 {
		case 0:
			add(fmt.Sprintf("tenant-%d-é", r.Uint32()))
		case 1:
			add(fmt.Sprintf("t'%d'日本", r.Uint32()))
		case 2:
			add(strconv.FormatUint(r.Uint64(), 36))
		default:
			add(fmt.Sprintf(`t\%d--/*`, r.Uint32()))
		}
	}
	return out
}

// devScaleKeys are distinct uuids in Postgres' canonical text form.
func devScaleKeys(r *rand.Rand, n int) []string {
	seen := map[string]bool{}
	var out []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	add("00000000-0000-0000-0000-000000000000")
	add("ffffffff-ffff-ffff-ffff-ffffffffffff")
	for len(out) < n {
		add(fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff))
	}
	return out
}

func uuidBytes(s string) [16]byte {
	var b [16]byte
	h := strings.ReplaceAll(s, "-", "")
	for i := range b {
		v, _ := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		b[i] = byte(v)
	}
	return b
}

// scaleJobs splits keys (placed by want) into jobs: the first lone keys
// one statement each, the rest in pipelines of batch keys of one
// database.
func scaleJobs(colo string, keys []string, want map[string]string, lone, batch int, kind func(string) string) []scaleJob {
	var jobs []scaleJob
	for _, k := range keys[:lone] {
		jobs = append(jobs, scaleJob{colo: colo, keys: []string{k}, kind: kind(k)})
	}
	groups := map[string][]string{}
	for _, k := range keys[lone:] {
		g := want[k] + "/" + kind(k)
		groups[g] = append(groups[g], k)
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.Sort(names)
	for _, g := range names {
		ks := groups[g]
		for len(ks) > 0 {
			n := min(batch, len(ks))
			jobs = append(jobs, scaleJob{colo: colo, keys: ks[:n], kind: kind(ks[0])})
			ks = ks[n:]
		}
	}
	return jobs
}

func orgKind(k string) string {
	n, _ := strconv.ParseInt(k, 10, 64)
	switch {
	case n >= math.MinInt16 && n <= math.MaxInt16:
		return "int2"
	case n >= math.MinInt32 && n <= math.MaxInt32:
		return "int4"
	}
	return "int8"
}

// scaleInsertSQL is the insert of one key for path p: $1 the key.
func scaleInsertSQL(colo string, p scalePath) string {
	switch colo {
	case "org":
		return fmt.Sprintf("INSERT INTO files (org_id, name, v) VALUES ($1, '%s', %d)", p.name, p.v)
	case "tenant":
		return fmt.Sprintf("INSERT INTO tenants (name, v) VALUES ($1, %d)", p.v)
	}
	if p.mode == pgx.QueryExecModeExec {
		// Exec mode sends a string as text of no declared type.
		return fmt.Sprintf("INSERT INTO devices (id, v) VALUES ($1::uuid, %d)", p.v)
	}
	return fmt.Sprintf("INSERT INTO devices (id, v) VALUES ($1, %d)", p.v)
}

// scaleArg is the key as pgx gets it on path p: an int64 for bigint keys
// (a bare literal on the simple protocol, text or binary int8 on the
// extended one), a pgtype.UUID on the binary path, else the string.
func scaleArg(colo, k string, p scalePath) any {
	switch {
	case colo == "org":
		n, _ := strconv.ParseInt(k, 10, 64)
		return n
	case colo == "dev" && p.mode == pgx.QueryExecModeCacheStatement:
		return pgtype.UUID{Bytes: uuidBytes(k), Valid: true}
	}
	return k
}

// binaryStmts are the binary path's statements pgx cannot make: a text
// key and int2/int4 keys in binary format (pgx sends strings as text and
// binds bigint parameters as 8 bytes). They are prepared with the
// parameter's type on each connection.
var binaryStmts = map[string]struct {
	sql string
	oid uint32
}{
	"int2": {"INSERT INTO files (org_id, name, v) VALUES ($1, 'extended-binary', 3)", pgtype.Int2OID},
	"int4": {"INSERT INTO files (org_id, name, v) VALUES ($1, 'extended-binary', 3)", pgtype.Int4OID},
	"text": {"INSERT INTO tenants (name, v) VALUES ($1, 3)", pgtype.TextOID},
}

func binaryParam(kind, k string) []byte {
	n, _ := strconv.ParseInt(k, 10, 64)
	switch kind {
	case "int2":
		return binary.BigEndian.AppendUint16(nil, uint16(n))
	case "int4":
		return binary.BigEndian.AppendUint32(nil, uint32(n))
	}
	return []byte(k)
}

// runScaleJob inserts a job's keys on conn by path p.
func runScaleJob(ctx context.Context, conn *pgx.Conn, p scalePath, j scaleJob) error {
	if _, ok := binaryStmts[j.kind]; ok && p.mode == pgx.QueryExecModeCacheStatement {
		name := "scale_" + j.kind
		if len(j.keys) == 1 {
			tag, err := conn.PgConn().ExecPrepared(ctx, name, [][]byte{binaryParam(j.kind, j.keys[0])}, []int16{1}, nil).Close()
			if err == nil && tag.RowsAffected() != 1 {
				err = fmt.Errorf("%s: %d rows", tag, tag.RowsAffected())
			}
			return err
		}
		b := &pgconn.Batch{}
		for _, k := range j.keys {
			b.ExecPrepared(name, [][]byte{binaryParam(j.kind, k)}, []int16{1}, nil)
		}
		res, err := conn.PgConn().ExecBatch(ctx, b).ReadAll()
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		if len(res) != len(j.keys) {
			return fmt.Errorf("%d results for %d statements", len(res), len(j.keys))
		}
		return nil
	}
	sql := scaleInsertSQL(j.colo, p)
	if len(j.keys) == 1 {
		tag, err := conn.Exec(ctx, sql, scaleArg(j.colo, j.keys[0], p))
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("%s: %d rows", tag, tag.RowsAffected())
		}
		return err
	}
	b := &pgx.Batch{}
	for _, k := range j.keys {
		b.Queue(sql, scaleArg(j.colo, k, p))
	}
	br := conn.SendBatch(ctx, b)
	for range j.keys {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return err
		}
		if tag.RowsAffected() != 1 {
			br.Close()
			return fmt.Errorf("%s: %d rows", tag, tag.RowsAffected())
		}
	}
	return br.Close()
}

// landedRow is a row found on a database directly.
type landedRow struct {
	db string
	v  int
}

// landedRows reads, on each database directly, every row of table: its
// key (as text) and v.
func (rig *shardRig) landedRows(t *testing.T, table, column string) map[string][]landedRow {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	got := map[string][]landedRow{}
	for name, conn := range rig.direct {
		rows, err := conn.Query(ctx, fmt.Sprintf("SELECT %s::text, v FROM %s", column, table))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			var v int
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			got[k] = append(got[k], landedRow{name, v})
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// checkLanded holds every key to one row per v of vs, each on the
// database Postgres places the key on, and nothing else in the table.
// It returns the rows on a wrong database.
func checkLanded(t *testing.T, what string, keys []string, want map[string]string, got map[string][]landedRow, vs []int) int {
	t.Helper()
	wrong, bad := 0, 0
	for _, k := range keys {
		rows := got[k]
		var seen []int
		misplaced := 0
		for _, r := range rows {
			if r.db != want[k] {
				misplaced++
			}
			seen = append(seen, r.v)
		}
		slices.Sort(seen)
		wrong += misplaced
		if misplaced > 0 || !slices.Equal(seen, vs) {
			bad++
			if bad <= 5 {
				t.Errorf("%s key %q: rows %v, want v %v on %s", what, k, rows, vs, want[k])
			}
		}
	}
	if len(got) != len(keys) {
		t.Errorf("%s: %d keys inserted, %d keys in the tables", what, len(keys), len(got))
	}
	if bad > 0 {
		t.Errorf("%s: %d keys not as they should be, %d rows on a wrong database", what, bad, wrong)
	}
	return wrong
}

func TestShardRouteScale(t *testing.T) {
	rig := startShardRig(t, nil)
	ctx := ctxT(t, 5*time.Minute)
	r := rand.New(rand.NewPCG(34, 100000))
	keys := map[string][]string{
		"org":    orgScaleKeys(r, scaleKeys),
		"tenant": tenantScaleKeys(r, scaleKeys),
		"dev":    devScaleKeys(r, scaleKeys),
	}
	want := map[string]map[string]string{}
	for colo, ks := range keys {
		want[colo] = rig.expected(t, colo, ks)
		if len(want[colo]) != len(ks) {
			t.Fatalf("%s: Postgres placed %d of %d keys", colo, len(want[colo]), len(ks))
		}
	}
	kinds := map[string]func(string) string{
		"org":    orgKind,
		"tenant": func(string) string { return "text" },
		"dev":    func(string) string { return "uuid" },
	}

	// Each path: 3 connections taking jobs (300 lone statements of each
	// type, the rest in pipelines of 100) from the path's own queue.
	const workers, lone, batch = 3, 300, 100
	start := time.Now()
	var (
		mu       sync.Mutex
		inserted = map[string]int{} // path/colo → rows
		failed   []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(failed) < 10 {
			failed = append(failed, err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range scalePaths {
		queue := make(chan scaleJob, 64)
		conns := make([]*pgx.Conn, workers)
		for i := range conns {
			conns[i] = rig.connect(t, p.mode)
			if p.mode == pgx.QueryExecModeCacheStatement {
				for kind, st := range binaryStmts {
					if _, err := conns[i].PgConn().Prepare(ctx, "scale_"+kind, st.sql, []uint32{st.oid}); err != nil {
						t.Fatalf("prepare %s: %v", kind, err)
					}
				}
			}
		}
		for _, conn := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range queue {
					if err := runScaleJob(ctx, conn, p, j); err != nil {
						fail(fmt.Errorf("%s %s %s %d keys (first %q): %w", p.name, j.colo, j.kind, len(j.keys), j.keys[0], err))
						cancel()
						continue
					}
					mu.Lock()
					inserted[p.name+"/"+j.colo] += len(j.keys)
					mu.Unlock()
				}
			}()
		}
		go func() {
			defer close(queue)
			for _, colo := range []string{"org", "tenant", "dev"} {
				for _, j := range scaleJobs(colo, keys[colo], want[colo], lone, batch, kinds[colo]) {
					select {
					case queue <- j:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range failed {
		t.Error(err)
	}
	if len(failed) > 0 {
		t.FailNow()
	}
	total := 0
	for _, p := range scalePaths {
		var per []string
		for _, colo := range []string{"org", "tenant", "dev"} {
			n := inserted[p.name+"/"+colo]
			total += n
			per = append(per, fmt.Sprintf("%s %d", colo, n))
			if n != len(keys[colo]) {
				t.Errorf("%s %s: %d inserts, want %d", p.name, colo, n, len(keys[colo]))
			}
		}
		t.Logf("%s: %s inserts (%d of each type alone, the rest in pipelines of up to %d)", p.name, strings.Join(per, ", "), lone, batch)
	}
	t.Logf("%d routed inserts (%d keys of each type through each of %d paths) in %v", total, scaleKeys, len(scalePaths), time.Since(start).Round(time.Millisecond))
	if total < 100000 {
		t.Fatalf("%d routed inserts, want at least 100,000", total)
	}

	// Ground truth: where the rows are, read on each database.
	wrong := 0
	for _, c := range []struct{ colo, table, column string }{{"org", "files", "org_id"}, {"tenant", "tenants", "name"}, {"dev", "devices", "id"}} {
		wrong += checkLanded(t, c.colo, keys[c.colo], want[c.colo], rig.landedRows(t, c.table, c.column), []int{1, 2, 3})
	}
	t.Logf("rows on a wrong database: %d", wrong)
	if t.Failed() {
		t.FailNow()
	}

	// Every row reads back through the router: each key's three rows, by
	// a query keyed by it, in pipelines of one database's keys, the paths
	// taking turns. (Indexes first, made on each database directly, so
	// that the reads are not table scans.)
	for name, dc := range rig.direct {
		for _, ddl := range []string{"CREATE INDEX ON files (org_id)", "CREATE INDEX ON tenants (name)", "CREATE INDEX ON devices (id)"} {
			if _, err := dc.Exec(ctx, ddl); err != nil {
				t.Fatalf("%s: %s: %v", name, ddl, err)
			}
		}
	}
	start = time.Now()
	readSQL := map[string]string{
		"org":    "SELECT v FROM files WHERE org_id = $1",
		"tenant": "SELECT v FROM tenants WHERE name = $1",
		"dev":    "SELECT v FROM devices WHERE id = $1",
	}
	ctx, cancel = context.WithCancel(ctxT(t, 5*time.Minute))
	defer cancel()
	var read, short int
	var jobs []scaleJob
	for _, colo := range []string{"org", "tenant", "dev"} {
		jobs = append(jobs, scaleJobs(colo, keys[colo], want[colo], 0, batch, func(string) string { return "" })...)
	}
	queue := make(chan int)
	for w := range 3 * workers {
		p := scalePaths[w%len(scalePaths)]
		conn := rig.connect(t, p.mode)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range queue {
				j := jobs[i]
				b := &pgx.Batch{}
				for _, k := range j.keys {
					sql := readSQL[j.colo]
					if j.colo == "dev" && p.mode == pgx.QueryExecModeExec {
						sql = strings.Replace(sql, "$1", "$1::uuid", 1)
					}
					b.Queue(sql, scaleArg(j.colo, k, p))
				}
				br := conn.SendBatch(ctx, b)
				for _, k := range j.keys {
					rows, err := br.Query()
					var vs []int
					if err == nil {
						vs, err = pgx.CollectRows(rows, pgx.RowTo[int])
					}
					if err != nil {
						fail(fmt.Errorf("read back %s %q (%s): %w", j.colo, k, p.name, err))
						cancel()
						break
					}
					slices.Sort(vs)
					mu.Lock()
					read += len(vs)
					if !slices.Equal(vs, []int{1, 2, 3}) {
						short++
						if short <= 5 {
							failed = append(failed, fmt.Errorf("read back %s %q (%s): v %v, want [1 2 3]", j.colo, k, p.name, vs))
						}
					}
					mu.Unlock()
				}
				if err := br.Close(); err != nil && ctx.Err() == nil {
					fail(fmt.Errorf("read back %s (%s): %w", j.colo, p.name, err))
					cancel()
				}
			}
		}()
	}
	for i := range jobs {
		select {
		case queue <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(queue)
	wg.Wait()
	for _, err := range failed {
		t.Error(err)
	}
	t.Logf("%d rows read back through the router in %v; %d keys without their three rows", read, time.Since(start).Round(time.Millisecond), short)
	if read != total || short > 0 {
		t.Fatalf("read back %d rows of %d", read, total)
	}
}
