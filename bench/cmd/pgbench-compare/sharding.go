//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgturnstile/pgturnstile/bench/internal/benchenv"
)

// The sharding router's workloads (issue 34). Each runs on a fresh pair of
// pgturnstile instances started for it with the main ini: one without
// shard_file (the target tTurnstile, serving bench), and one with a
// shard_file (tTurnShard), which pgbench reaches as the cluster
// shardCluster; beside the main PgBouncer, all three interleaved in the
// same rounds.
//
//   - One-shard map (Shards 1): one colocation, every logical shard on
//     bench, the default database too, so the cluster's transactions run
//     on the same database and the same pool as the unsharded
//     pgturnstile's: the two differ by the router's work alone. Issue 34:
//     pooler CPU per transaction ≤ 1.03 and p50 ≤ 1.02 of the unsharded
//     one (no extra round trip).
//   - Two-shard map (Shards 2): logical shards 0-127 on bench, 128-255 on
//     shardDB2, a second database on the same PostgreSQL initialised by
//     pgbench -i at the same scale (each shard holds the full tables; the
//     rows whose keys route elsewhere are never touched). PgBouncer cannot
//     shard: it and the unsharded pgturnstile run the same script on bench
//     alone, so the comparison is the cost per transaction.

const (
	// tTurnShard is the pgturnstile with a shard_file, reached through
	// its cluster.
	tTurnShard = "pgturnstile, shard map"
	// shardCluster is the cluster's name: the database pgbench connects
	// to through tTurnShard.
	shardCluster = "bench_shards"
	// shardDB2 is the second shard's database (two-shard map).
	shardDB2 = "bench_s1"
	// shardLogical is the map's logical_shards.
	shardLogical = 256
	// shardColo names the colocation of the pgbench tables keyed by aid.
	shardColo = "account"
)

// shardTables are the colocation's tables and key columns: every table
// the aid-keyed script touches, each by the account.
var shardTables = [][2]string{{"pgbench_accounts", "aid"}, {"pgbench_history", "aid"}}

// tpcbAidScript is the two-shard workload's transaction: TPC-B's, with
// every statement keyed by the account, which is pgbench's own built-in
// "simple-update" (-N) written out. TPC-B proper also updates
// pgbench_tellers by tid and pgbench_branches by bid: keys drawn apart
// from aid, whose rows lie on another shard than the account's about half
// the time with two shards, which the router refuses (0A000) as a
// transaction across shards, by design. A schema sharded by account keeps
// every table a transaction writes in one colocation under the same key,
// so the tellers' and branches' updates are left out (as -N leaves them
// out), and pgbench_history, written with the account's aid, is in the
// colocation. bid and tid are still drawn and written into the history
// row, as pgbench does. :scale comes from pgbench's -s (prepareScripts).
const tpcbAidScript = `\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
`

// shardWorkloadKeys are the one-shard workloads issue 34's criteria are
// judged on: they run as many rounds as issue 6's target workloads, their
// bound (1.03) sitting well inside one round's noise on this machine.
var shardWorkloadKeys = []string{"shard1-simple-100", "shard1-ext-100"}

// shardDatabases are the [databases] entries the n-shard map spreads the
// logical shards over, the first also the cluster's default database.
func shardDatabases(n int) []string {
	if n <= 1 {
		return []string{benchDB}
	}
	dbs := []string{benchDB}
	for i := 1; i < n; i++ {
		dbs = append(dbs, fmt.Sprintf("bench_s%d", i))
	}
	return dbs
}

// shardFileText is the shard file of a map over dbs: cluster shardCluster,
// default database dbs[0], shardLogical logical shards split into equal
// ranges over dbs in order, one colocation of shardTables by bigint.
func shardFileText(dbs []string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# pgbench-compare: the %d-shard map (issue 34; docs/sharding.md).\n\n", len(dbs))
	p("[[cluster]]\nname = %q\ndefault_database = %q\nlogical_shards = %d\non_missing_key = \"error\"\n\n", shardCluster, dbs[0], shardLogical)
	var tables []string
	for _, t := range shardTables {
		tables = append(tables, fmt.Sprintf("%s = %q", t[0], t[1]))
	}
	p("[[cluster.colo]]\nname = %q\nkey_type = \"bigint\"\ntables = { %s }\nshards = [\n", shardColo, strings.Join(tables, ", "))
	per := shardLogical / len(dbs)
	for i, db := range dbs {
		last := (i+1)*per - 1
		if i == len(dbs)-1 {
			last = shardLogical - 1
		}
		p("  { range = \"%d-%d\", database = %q },\n", i*per, last, db)
	}
	p("]\n")
	return b.String()
}

// shardINIOpts writes the n-shard map's file into the temp dir and returns
// the ini of the pgturnstile that serves it: the [databases] entries of
// the shards besides bench, shard_file, and a ready check through the
// cluster.
func (e *env) shardINIOpts(n int) (iniOpts, error) {
	dbs := shardDatabases(n)
	path := filepath.Join(e.Dir, fmt.Sprintf("shards-%d.toml", n))
	if err := os.WriteFile(path, []byte(shardFileText(dbs)), 0o644); err != nil {
		return iniOpts{}, err
	}
	var extra strings.Builder
	for _, db := range dbs[1:] {
		fmt.Fprintf(&extra, "%s = host=127.0.0.1 port=%d dbname=%s\n", db, e.PGPort, db)
	}
	l := plainLogin
	l.DB = shardCluster
	return iniOpts{Databases: extra.String(), Extra: "shard_file = " + path + "\n", Login: l}, nil
}

// initShardDatabases creates the databases beyond bench that the n-shard
// map needs, owned by the bench role, and fills each with pgbench -i at
// scale, as bench is.
func (e *env) initShardDatabases(n, scale int) error {
	dbs := shardDatabases(n)[1:]
	if len(dbs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", e.SockDir, e.PGPort))
	if err != nil {
		return fmt.Errorf("connect as postgres: %v", err)
	}
	defer c.Close(context.Background())
	for _, db := range dbs {
		if err := benchenv.Exec(ctx, c, fmt.Sprintf("CREATE DATABASE %s OWNER %s", db, benchUser)); err != nil {
			return err
		}
		if err := e.pgbenchInitDB(db, scale); err != nil {
			return err
		}
	}
	return nil
}

// prepareScripts writes the custom script of each workload that has one
// into dir and gives pgbench "-f FILE -s scale" for it (pgbench sets
// :scale from -s for a custom script; 1 otherwise). The others are
// returned as they are.
func prepareScripts(ws []workload, dir string, scale int) ([]workload, error) {
	out := make([]workload, len(ws))
	for i, w := range ws {
		if w.Script != "" {
			path := filepath.Join(dir, w.Key+".sql")
			if err := os.WriteFile(path, []byte(w.Script), 0o644); err != nil {
				return nil, err
			}
			w.Args = append(slices.Clone(w.Args), "-f", path, "-s", strconv.Itoa(scale))
		}
		out[i] = w
	}
	return out, nil
}

// shardTargets starts w's fresh pair of pgturnstile instances (without and
// with the w.Shards-shard map) and warms each pool up to 20 server
// connections, through the cluster for the sharded one (which fills each
// shard's pool); the main PgBouncer stands beside them. A pooler that does
// not start is left out and its error returned in failed, by target name;
// the caller stops procs.
func (e *env) shardTargets(ctx context.Context, o options, w workload, pgb *benchenv.Proc, pooler, logDir string, logf func(string, ...any)) (targets []target, procs []*benchenv.Proc, failed map[string]string) {
	failed = map[string]string{}
	targets = []target{{Name: tBouncer, Port: pgb.Port, Proc: pgb}}
	shardIO, ierr := e.shardINIOpts(w.Shards)
	for _, k := range []struct {
		name, file, db string
		io             iniOpts
		err            error
	}{
		{tTurnstile, "shard-nomap", benchDB, iniOpts{}, nil},
		{tTurnShard, fmt.Sprintf("shard-map%d", w.Shards), shardCluster, shardIO, ierr},
	} {
		err := k.err
		var p *benchenv.Proc
		var envv []string
		pprofAddr := ""
		if err == nil && k.name == tTurnShard && o.shares != nil {
			var port int
			if port, err = benchenv.FreePort(); err == nil {
				pprofAddr = fmt.Sprintf("127.0.0.1:%d", port)
				envv = []string{"PGTURNSTILE_PPROF=" + pprofAddr}
			}
		}
		if err == nil {
			p, err = e.startPooler(fmt.Sprintf("%s-%s", k.file, w.Key), "pgturnstile", pooler, envv, k.io)
		}
		if err != nil {
			failed[k.name] = "did not start: " + err.Error()
			logf("%s: %s did not start: %s", w.Key, k.name, shorten(err.Error(), 300))
			continue
		}
		t := target{Name: k.name, Port: p.Port, Proc: p, DB: k.db, Pprof: pprofAddr}
		procs = append(procs, p)
		targets = append(targets, t)
		warm := workload{Key: "warm-up", Clients: 40, Args: []string{"-S"}}
		if r := runPgbench(ctx, logDir, 0, warm, t, max(min(o.duration/2, 2*time.Second), time.Second), 0); !r.OK {
			logf("warm-up through %s (%s): %s", t.Name, w.Key, r.Err)
		}
	}
	return targets, procs, failed
}

// shardCriteria are issue 34's criteria on the one-shard workloads: the
// pgturnstile with the one-shard map over the one without shard_file,
// pair by pair.
func shardCriteria(t table, o options) []criterion {
	var cs []criterion
	for _, key := range shardWorkloadKeys {
		n := o.roundsOf(key)
		cs = append(cs,
			criterion{what: fmt.Sprintf("%s: pooler CPU µs/txn, one-shard map ÷ no shard_file", key), bound: "≤ 1.03",
				fig: t.pairs(key, tTurnShard, tTurnstile, n, ratio(fCPU)), meets: func(x float64) bool { return x <= 1.03 }},
			criterion{what: fmt.Sprintf("%s: p50 (no extra round trip), one-shard map ÷ no shard_file", key), bound: "≤ 1.02",
				fig: t.pairs(key, tTurnShard, tTurnstile, n, ratio(fP50)), meets: func(x float64) bool { return x <= 1.02 }})
	}
	return cs
}

// shardSection is the report's section on the sharding router's
// workloads, where any ran.
func shardSection(t table, o options, ws []workload) string {
	var sw []workload
	for _, w := range ws {
		if w.Shards > 0 {
			sw = append(sw, w)
		}
	}
	if len(sw) == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Sharding router (issue 34)\n\n")
	p("Each of these workloads runs on a fresh pair of pgturnstile instances started for it with the ini above: *%s* without `shard_file`, serving `%s`, and *%s* with a `shard_file`, which pgbench reaches by connecting to the cluster's name, `%s`; the main PgBouncer runs beside them, the three interleaved in the same rounds. ", tTurnstile, benchDB, tTurnShard, shardCluster)
	p("The map: one colocation (`%s`), %s by `aid` (bigint), `logical_shards = %d`, `on_missing_key = \"error\"`. ", shardColo, tableList(), shardLogical)
	p("**One-shard map** (`shard1-…`): every logical shard on `%s`, also the cluster's default database, so the cluster's transactions run on the same database and pool as the unsharded pgturnstile's and the two differ by the router's work alone (issue 34: CPU per transaction ≤ 1.03 and p50 ≤ 1.02 of the unsharded one). pgbench's select-only statement `SELECT abalance FROM pgbench_accounts WHERE aid = …` is routed by its literal (`-M simple`) or by its Bind parameter (`-M extended`). ", benchDB)
	p("**Two-shard map** (`shard2-…`): logical shards 0–%d on `%s`, %d–%d on `%s`, a second database on the same PostgreSQL, initialised by `pgbench -i` at the same scale; the script is TPC-B's transaction with every statement keyed by the account (pgbench's built-in `simple-update`, `-N`, written out: `BEGIN`, `UPDATE pgbench_accounts … WHERE aid`, `SELECT … WHERE aid`, `INSERT INTO pgbench_history (…, aid, …)`, `END`), since TPC-B's updates of `pgbench_tellers` by `tid` and `pgbench_branches` by `bid` would put one transaction on two shards, which the router refuses. ",
		shardLogical/2-1, benchDB, shardLogical/2, shardLogical-1, shardDB2)
	p("Each shard database has its own pool of 20, so the sharded pgturnstile holds up to 40 server connections against 20 for the others. ")
	p("PgBouncer cannot shard: it and the unsharded pgturnstile run the same script against `%s` alone, so compare the cost per transaction, not the topology.\n\n", benchDB)
	p("The one-shard workloads run %d rounds (issue 34's criteria are judged on them), the two-shard one %d. ", max(o.rounds, o.targetRounds), o.rounds)
	p("Pair by pair: the ratio within each round, median (min–max) over rounds. CPU and p50 below 1 and TPS above 1 favour the first of each pair.\n\n")
	p("| Workload | map ÷ no map: CPU µs/txn | p50 | p99 | TPS | map ÷ PgBouncer: CPU µs/txn | TPS | no map ÷ PgBouncer: CPU µs/txn | TPS |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range sw {
		n := o.roundsOf(w.Key)
		pr := func(a, b string, f func(runResult) float64) string { return t.pairs(w.Key, a, b, n, ratio(f)).cell(2) }
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", w.Name,
			pr(tTurnShard, tTurnstile, fCPU), pr(tTurnShard, tTurnstile, fP50), pr(tTurnShard, tTurnstile, fP99), pr(tTurnShard, tTurnstile, fTPS),
			pr(tTurnShard, tBouncer, fCPU), pr(tTurnShard, tBouncer, fTPS),
			pr(tTurnstile, tBouncer, fCPU), pr(tTurnstile, tBouncer, fTPS))
	}
	p("\n")
	if o.shares != nil {
		p("**The router's share of the map instance's CPU** (`-router-profile`): a CPU profile of *%s* during each of its runs, all rounds merged; the share of samples whose stack passes through package `shard` or the pooler's glue that calls it (`%s`). A map costing a share s of the CPU costs 1/(1−s) of the same instance without it. Profiling costs the profiled instance CPU of its own, so in this run its CPU ratios above lean against the map.\n\n", tTurnShard, routerFocus)
		p("| Workload | router's share of samples |\n|---|---|\n")
		for _, w := range sw {
			p("| %s | %s |\n", w.Name, o.shares.result[w.Key])
		}
		p("\n")
	}
	b.WriteString(perTargetTable(t, o, sw, []string{tBouncer, tTurnstile, tTurnShard}))
	p("\n")
	return b.String()
}

// tableList is the colocation's tables for the report.
func tableList() string {
	var s []string
	for _, t := range shardTables {
		s = append(s, "`"+t[0]+"`")
	}
	return strings.Join(s, " and ")
}
