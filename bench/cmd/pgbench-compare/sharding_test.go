//go:build linux

package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
	"github.com/pgturnstile/pgturnstile/shard"
)

// TestShardFile: the maps the tool writes are valid shard files (package
// shard's own loader, against the ini's databases), with the cluster,
// default database, ranges and colocation the workloads assume.
func TestShardFile(t *testing.T) {
	for n, wantRanges := range map[int][]string{1: {"0-255"}, 2: {"0-127", "128-255"}} {
		dbs := shardDatabases(n)
		if len(dbs) != n || dbs[0] != benchDB || (n == 2 && dbs[1] != shardDB2) {
			t.Fatalf("shardDatabases(%d) = %v", n, dbs)
		}
		text := shardFileText(dbs)
		for i, r := range wantRanges {
			if want := "{ range = \"" + r + "\", database = \"" + dbs[i] + "\" }"; !strings.Contains(text, want) {
				t.Errorf("%d-shard map lacks %s:\n%s", n, want, text)
			}
		}
		m, err := shard.Parse([]byte(text), "shards.toml", dbs)
		if err != nil {
			t.Fatalf("%d-shard map: %v\n%s", n, err, text)
		}
		cl := m.Cluster(shardCluster)
		if cl == nil || cl.DefaultDatabase != benchDB || cl.LogicalShards != shardLogical || len(m.Clusters()) != 1 {
			t.Fatalf("%d-shard map: cluster %+v", n, cl)
		}
		for _, tb := range shardTables {
			if _, key, _, ok := cl.Lookup(nil, []byte(tb[0])); !ok || key != tb[1] {
				t.Errorf("%d-shard map: %s is not keyed by %s (%q, %v)", n, tb[0], tb[1], key, ok)
			}
		}
		// A database the ini does not have is an error: the map names
		// only the ones the ini gets.
		if n == 2 {
			if _, err := shard.Parse([]byte(text), "shards.toml", dbs[:1]); err == nil {
				t.Error("two-shard map without bench_s1 in [databases]: no error")
			}
		}
	}
}

// params is a Bind's text parameters.
type params []string

func (p params) Param(i int) (value []byte, binary, null, ok bool) {
	if i >= len(p) {
		return nil, false, false, false
	}
	return []byte(p[i]), false, false, true
}

// TestShardRoutes: under the maps the tool writes, pgbench's select-only
// statement and every statement of the aid-keyed TPC-B-like script route
// by aid, as pgbench sends them with -M simple (values in the text) and
// -M extended (Parse with $n, then Bind): one transaction stays on one
// database, the two-shard map uses both, and the one-shard map only
// bench. pgbench_tellers and pgbench_branches (left out of the script)
// are in no colocation.
func TestShardRoutes(t *testing.T) {
	var stmts []string
	for line := range strings.SplitSeq(tpcbAidScript, "\n") {
		if line != "" && !strings.HasPrefix(line, `\`) && line != "BEGIN;" && line != "END;" {
			stmts = append(stmts, line)
		}
	}
	if len(stmts) != 3 || !strings.Contains(tpcbAidScript, "\nBEGIN;\n") || !strings.HasSuffix(tpcbAidScript, "\nEND;\n") {
		t.Fatalf("script statements: %q", stmts)
	}
	for _, s := range stmts {
		if strings.Contains(s, "pgbench_tellers") || strings.Contains(s, "pgbench_branches") {
			t.Errorf("the script touches a table keyed by another column: %s", s)
		}
	}
	selectOnly := "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"
	vars := regexp.MustCompile(`:(aid|bid|tid|delta)\b`)
	for _, n := range []int{1, 2} {
		dbs := shardDatabases(n)
		m, err := shard.Parse([]byte(shardFileText(dbs)), "shards.toml", dbs)
		if err != nil {
			t.Fatal(err)
		}
		r := shard.NewRouter(m.Cluster(shardCluster))
		used := map[string]int{}
		for aid := 1; aid <= 2000; aid++ {
			vals := map[string]string{":aid": strconv.Itoa(aid), ":bid": "1", ":tid": "7", ":delta": strconv.Itoa(2500 - aid*3)}
			var where string
			for _, s := range append([]string{selectOnly}, stmts...) {
				// -M simple: the values in the text.
				text := vars.ReplaceAllStringFunc(s, func(v string) string { return vals[v] })
				d := r.Route([]byte(text), shard.Pin{}, false)
				if d.Refused() || d.Source != shard.SourceLiteral || d.Database == "" {
					t.Fatalf("%d shards: %s: %+v", n, text, d)
				}
				// -M extended: $1, $2, … in the order of first use.
				var order []string
				ptext := vars.ReplaceAllStringFunc(s, func(v string) string {
					i := slices.Index(order, v)
					if i < 0 {
						order, i = append(order, v), len(order)
					}
					return "$" + strconv.Itoa(i+1)
				})
				pd, prep := r.Prepare([]byte(ptext), shard.Pin{}, false)
				if prep == nil || !pd.Pending {
					t.Fatalf("%d shards: %s: not decided at Bind: %+v", n, ptext, pd)
				}
				var ps params
				for _, v := range order {
					ps = append(ps, vals[v])
				}
				bd, err := prep.Bind(ps)
				if err != nil || bd.Database != d.Database {
					t.Fatalf("%d shards: %s with %v: %+v, %v; the literal form went to %s", n, ptext, ps, bd, err, d.Database)
				}
				if where == "" {
					where = d.Database
				} else if d.Database != where {
					t.Fatalf("%d shards: aid %d: %s on %s, the transaction on %s", n, aid, text, d.Database, where)
				}
			}
			used[where]++
		}
		if len(used) != n || (n == 2 && (used[benchDB] < 800 || used[shardDB2] < 800)) {
			t.Errorf("%d shards: transactions by database: %v", n, used)
		}
		for _, s := range []string{"UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 7", "SELECT count(*) FROM pgbench_branches"} {
			if d := r.Route([]byte(s), shard.Pin{}, false); d.Source != shard.SourceDefault || d.Database != benchDB {
				t.Errorf("%d shards: %s: %+v", n, s, d)
			}
		}
	}
}

// TestShardINI: the sharded pgturnstile's ini has the shards' [databases]
// entries in that section, shard_file pointing at the map the tool wrote,
// and a ready check through the cluster; the one-shard map adds no
// database. The unsharded pair member's ini has no shard_file.
func TestShardINI(t *testing.T) {
	dir := t.TempDir()
	e := &env{Env: &benchenv.Env{Dir: dir, PGPort: 5432}}
	io, err := e.shardINIOpts(2)
	if err != nil {
		t.Fatal(err)
	}
	ini, err := e.poolerINI(6432, io)
	if err != nil {
		t.Fatal(err)
	}
	dbSect, rest, ok := strings.Cut(ini, "\n[pgbouncer]\n")
	if !ok {
		t.Fatalf("no [pgbouncer]:\n%s", ini)
	}
	for _, want := range []string{"\nbench = host=127.0.0.1 port=5432 dbname=bench\n", "\nbench_s1 = host=127.0.0.1 port=5432 dbname=bench_s1\n"} {
		if !strings.Contains(dbSect, want) {
			t.Errorf("[databases] lacks %q:\n%s", want, ini)
		}
	}
	path := filepath.Join(dir, "shards-2.toml")
	if !strings.Contains(rest, "\nshard_file = "+path+"\n") || strings.Count(ini, "shard_file") != 1 || !strings.Contains(rest, "\ndefault_pool_size = 20\n") {
		t.Errorf("[pgbouncer]:\n%s", ini)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != shardFileText(shardDatabases(2)) {
		t.Errorf("%s: %v\n%s", path, err, b)
	}
	if !strings.Contains(io.Login.connString(6432), " dbname="+shardCluster+" ") || io.Login.User != benchUser {
		t.Errorf("ready check: %+v → %s", io.Login, io.Login.connString(6432))
	}
	if !strings.Contains(plainLogin.connString(6432), " dbname=bench ") {
		t.Errorf("plain login: %s", plainLogin.connString(6432))
	}

	io, err = e.shardINIOpts(1)
	if err != nil {
		t.Fatal(err)
	}
	if ini, err = e.poolerINI(6433, io); err != nil {
		t.Fatal(err)
	}
	if dbSect, _, _ := strings.Cut(ini, "\n[pgbouncer]\n"); strings.Count(dbSect, "host=") != 1 || !strings.Contains(ini, "shards-1.toml") {
		t.Errorf("one-shard ini:\n%s", ini)
	}
	if ini, _ = e.poolerINI(6434, iniOpts{}); strings.Contains(ini, "shard_file") || strings.Contains(ini, "bench_s1") {
		t.Errorf("unsharded ini:\n%s", ini)
	}
}

// TestShardWorkloads: the router's workloads, their maps, rounds and
// scripts; their keys are not caught by -only patterns of the others.
func TestShardWorkloads(t *testing.T) {
	want := map[string]struct {
		shards, clients int
		script          bool
		args            []string
	}{
		"shard1-simple-100":  {1, 100, false, []string{"-S", "-M", "simple"}},
		"shard1-ext-100":     {1, 100, false, []string{"-M", "extended", "-S"}},
		"shard2-tpcb-aid-50": {2, 50, true, []string{"-M", "simple"}},
	}
	o := options{rounds: 1, targetRounds: 2}
	seen := 0
	for _, w := range workloads() {
		ww, ok := want[w.Key]
		if !ok {
			if w.Shards != 0 || w.Script != "" {
				t.Errorf("%s: shards %d, script %q", w.Key, w.Shards, w.Script)
			}
			for _, k := range []string{"S-ext-100", "S-simple-100", "^S-", "S-ext|S-simple-500"} {
				for sk := range want {
					if regexp.MustCompile(k).MatchString(sk) {
						t.Errorf("-only %q matches %s", k, sk)
					}
				}
			}
			continue
		}
		seen++
		if w.Shards != ww.shards || w.Clients != ww.clients || (w.Script != "") != ww.script || !slices.Equal(w.Args, ww.args) || w.Setup != "" {
			t.Errorf("%s: %+v", w.Key, w)
		}
		if rounds := o.roundsOf(w.Key); (w.Shards == 1 && rounds != 2) || (w.Shards == 2 && rounds != 1) {
			t.Errorf("%s: %d rounds", w.Key, rounds)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d sharding workloads", seen, len(want))
	}
}

// TestPrepareScripts: a custom script is written to a file that pgbench
// gets with -f, and -s sets its :scale; the workload list is not changed.
func TestPrepareScripts(t *testing.T) {
	dir := t.TempDir()
	ws := workloads()
	before := slices.Clone(ws)
	got, err := prepareScripts(ws, dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range got {
		if w.Script == "" {
			if !slices.Equal(w.Args, before[i].Args) {
				t.Errorf("%s: args %v", w.Key, w.Args)
			}
			continue
		}
		path := filepath.Join(dir, w.Key+".sql")
		if want := append(slices.Clone(before[i].Args), "-f", path, "-s", "10"); !slices.Equal(w.Args, want) {
			t.Errorf("%s: args %v, want %v", w.Key, w.Args, want)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != w.Script {
			t.Errorf("%s: %v %q", path, err, b)
		}
		if !slices.Equal(ws[i].Args, before[i].Args) {
			t.Errorf("%s: the caller's args changed: %v", w.Key, ws[i].Args)
		}
	}
}

// TestShardReport: issue 34's criteria (one-shard map ÷ no shard_file,
// pair by pair) in the targets table, and the section's ratios.
func TestShardReport(t *testing.T) {
	o := options{rounds: 1, targetRounds: 2, duration: 2 * time.Second, scale: 1}
	mk := func(w, tg string, round int, tps, p50us, cpu float64) runResult {
		return runResult{Workload: w, Target: tg, Round: round, OK: true, TPS: tps, P50us: p50us, P99us: 2 * p50us, CPUus: cpu, PeakRSSKB: 10240, Txns: 100, WindowS: 1}
	}
	rs := []runResult{
		mk("shard1-simple-100", tBouncer, 1, 1000, 1000, 40), mk("shard1-simple-100", tTurnstile, 1, 1000, 1000, 50), mk("shard1-simple-100", tTurnShard, 1, 1000, 1010, 51),
		mk("shard1-simple-100", tBouncer, 2, 1000, 1000, 40), mk("shard1-simple-100", tTurnstile, 2, 1000, 1000, 50), mk("shard1-simple-100", tTurnShard, 2, 1000, 1000, 52),
		mk("shard1-ext-100", tBouncer, 1, 1000, 1000, 40), mk("shard1-ext-100", tTurnstile, 1, 1000, 1000, 50), mk("shard1-ext-100", tTurnShard, 1, 900, 1100, 60),
		mk("shard2-tpcb-aid-50", tBouncer, 1, 500, 4000, 80), mk("shard2-tpcb-aid-50", tTurnstile, 1, 500, 4000, 100), mk("shard2-tpcb-aid-50", tTurnShard, 1, 600, 3000, 120),
		{Workload: "shard1-ext-100", Target: tTurnShard, Round: 2, Err: "pgbench: exit status 2: ERROR: pgturnstile: cannot route", CPUus: math.NaN()},
	}
	var ws []workload
	for _, w := range workloads() {
		if w.Shards > 0 {
			ws = append(ws, w)
		}
	}
	rep := report(o, info{Bouncer: "PgBouncer 1.18.0"}, ws, rs, nil, nil)
	for _, want := range []string{
		"## Targets (issues 6, 22 and 34",
		"| issue 34: shard1-simple-100: pooler CPU µs/txn, one-shard map ÷ no shard_file ≤ 1.03 | 1.03 (1.02–1.04) | yes |",
		"| issue 34: shard1-simple-100: p50 (no extra round trip), one-shard map ÷ no shard_file ≤ 1.02 | 1.00 (1.00–1.01) | yes |",
		// A server error in any round leaves the target out.
		"| issue 34: shard1-ext-100: pooler CPU µs/txn, one-shard map ÷ no shard_file ≤ 1.03 | — | n/a |",
		"## Sharding router (issue 34)",
		"| TPC-B-like keyed by aid (simple-update), 50 clients, two-shard map | 1.20 | 0.75 | 0.75 | 1.20 | 1.50 | 1.20 | 1.25 | 1.00 |",
		"| TPC-B-like keyed by aid (simple-update), 50 clients, two-shard map | " + tTurnShard + " | 600 |",
		"0/2 ⚠ left out: other rounds failed with a server error",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q\n%s", want, rep)
		}
	}
	// The router's workloads are in their own section, not in the main
	// per-target table.
	_, tbl, _ := strings.Cut(rep, "## Results per target")
	if i := strings.Index(tbl, "\n## "); i >= 0 {
		tbl = tbl[:i]
	}
	if strings.Contains(tbl, "shard map") || strings.Contains(tbl, "shard2-") {
		t.Errorf("main per-target table has the router's workloads:\n%s", rep)
	}
}
