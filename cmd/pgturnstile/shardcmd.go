package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pgturnstile/pgturnstile/shard"
)

const shardUsage = `Usage: pgturnstile shard views [OPTION]... SHARD_FILE
       pgturnstile shard publish|status [OPTION]... (the map in etcd; --help)
       pgturnstile shard move [OPTION]... (move a range while traffic runs; --help)

Prints, for each cluster of SHARD_FILE (or the one --cluster names), the SQL
that serves every shard from one PostgreSQL host through views (the logical
phase of sharding: docs/sharding.md): a schema and a role per shard database,
a view per colo table showing the rows whose key hashes into the shard's
logical shards, WITH CHECK OPTION; then the [databases] lines that point each
shard at that host as its role. Run the SQL on the host as the tables' owner
(or a superuser), add the lines to pgbouncer.ini, set views = true on the
cluster, RELOAD.

Options:
      --cluster=NAME   only this cluster
      --host=HOST      the host in the [databases] lines (default 127.0.0.1)
      --port=PORT      its port (default 5432)
      --dbname=NAME    the database holding the tables (default: the cluster's name)
`

// runShard is `pgturnstile shard …`: tools for the shard file that run
// apart from the pooler.
func runShard(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "publish" || args[0] == "status") {
		return runShardEtcd(args[0], args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "move" {
		return runShardMove(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "views" {
		fmt.Fprint(stderr, shardUsage)
		return 1
	}
	fs := flag.NewFlagSet("pgturnstile shard views", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cluster, host, dbname string
	var port int
	fs.StringVar(&cluster, "cluster", "", "")
	fs.StringVar(&host, "host", "127.0.0.1", "")
	fs.IntVar(&port, "port", 5432, "")
	fs.StringVar(&dbname, "dbname", "", "")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
		if err != nil {
			fmt.Fprintf(stderr, "pgturnstile shard views: %v\n\n", err)
		}
		fmt.Fprint(stderr, shardUsage)
		return 1
	}
	// The [databases] entries the file names need not exist yet: this
	// prints them.
	m, err := shard.LoadStandalone(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "pgturnstile shard views: %v\n", err)
		return 1
	}
	var clusters []*shard.Cluster
	for _, c := range m.Clusters() {
		if cluster == "" || c.Name == cluster {
			clusters = append(clusters, c)
		}
	}
	if len(clusters) == 0 {
		fmt.Fprintf(stderr, "pgturnstile shard views: no cluster %q in %s\n", cluster, fs.Arg(0))
		return 1
	}
	var sql, ini strings.Builder
	for _, c := range clusters {
		db := dbname
		if db == "" {
			db = c.Name
		}
		ddl, lines, err := shard.ViewsDDL(c, shard.ViewsOptions{Host: host, Port: port, DBName: db})
		if err != nil {
			fmt.Fprintf(stderr, "pgturnstile shard views: %v\n", err)
			return 1
		}
		sql.WriteString(ddl)
		ini.WriteString(lines)
	}
	fmt.Fprint(stdout, sql.String())
	// The [databases] lines as SQL comments, so that the whole output
	// can go to psql as it is.
	fmt.Fprint(stdout, "\n-- [databases] lines for pgbouncer.ini: each shard on the one host, as its role\n")
	for _, line := range strings.SplitAfter(ini.String(), "\n") {
		if line != "" {
			fmt.Fprint(stdout, "-- "+line)
		}
	}
	return 0
}
