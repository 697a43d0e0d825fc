//go:build !noetcd

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/shard/etcdsource"
)

const shardEtcdUsage = `Usage: pgturnstile shard publish [OPTION]... SHARD_FILE
       pgturnstile shard status [OPTION]...

publish checks SHARD_FILE as the pooler would (with --ini, also that every
database it names is a [databases] entry there) and writes it to
<prefix>/map in etcd, where every pgturnstile with shard_source = etcd picks
it up. status prints the map's revision and the revision each instance
serves (exit status 3 while they differ).

Options:
      --etcd=ENDPOINTS    etcd endpoints, comma-separated (default: the
                          --ini file's shard_etcd_endpoints)
      --prefix=PREFIX     key prefix (default: the --ini file's
                          shard_etcd_prefix, else /pgturnstile)
      --ini=FILE          pgbouncer.ini: its [databases] for publish's
                          check, and its shard_etcd_* settings as defaults
      --cacert=FILE, --cert=FILE, --key=FILE
                          TLS to etcd
      --user=NAME         etcd user; the password is read from
                          $PGTURNSTILE_ETCD_PASSWORD (or the --ini file)
      --wait=DURATION     publish: then wait until every instance serves
                          the new revision (e.g. 5s); 0 = do not wait
      --timeout=DURATION  each request to etcd (default 5s)
`

// runShardEtcd is `pgturnstile shard publish|status`.
func runShardEtcd(verb string, args []string, stdout, stderr io.Writer) int {
	name := "pgturnstile shard " + verb
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ef := addEtcdFlags(fs)
	var wait, timeout time.Duration
	fs.DurationVar(&wait, "wait", 0, "")
	fs.DurationVar(&timeout, "timeout", 5*time.Second, "")
	wantArgs := map[string]int{"publish": 1, "status": 0}[verb]
	if err := fs.Parse(args); err != nil || fs.NArg() != wantArgs {
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n\n", name, err)
		}
		fmt.Fprint(stderr, shardEtcdUsage)
		return 1
	}
	ef.timeout = timeout
	cc, prefix, databases, err := ef.resolve()
	if err != nil {
		return fail(err)
	}
	ini := ef.ini

	var doc []byte
	if verb == "publish" {
		// Checked before anything is sent, as the pooler will check it.
		var err error
		if doc, err = os.ReadFile(fs.Arg(0)); err != nil {
			return fail(err)
		}
		if ini != "" {
			_, err = shard.Parse(doc, fs.Arg(0), databases)
		} else {
			_, err = shard.ParseStandalone(doc, fs.Arg(0))
		}
		if err != nil {
			return fail(err)
		}
	}
	cli, err := etcdsource.NewClient(cc)
	if err != nil {
		return fail(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if verb == "status" {
		st, err := etcdsource.ReadStatus(ctx, cli, prefix)
		if err != nil {
			return fail(err)
		}
		printFleet(stdout, prefix, st)
		if !st.Converged() {
			return 3
		}
		return 0
	}
	rev, err := etcdsource.Publish(ctx, cli, prefix, doc)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "published %s to %s: revision %d\n", fs.Arg(0), etcdsource.MapKey(prefix), rev)
	if wait <= 0 {
		return 0
	}
	deadline := time.Now().Add(wait)
	for {
		rctx, rcancel := context.WithTimeout(context.Background(), timeout)
		st, err := etcdsource.ReadStatus(rctx, cli, prefix)
		rcancel()
		if err == nil && st.MapRevision == rev && st.Converged() {
			fmt.Fprintf(stdout, "every instance (%d) serves revision %d\n", len(st.Instances), rev)
			return 0
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fail(err)
			}
			printFleet(stdout, prefix, st)
			fmt.Fprintf(stderr, "%s: not every instance serves revision %d after %v\n", name, rev, wait)
			return 3
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// printFleet prints the map's revision and each instance's.
func printFleet(w io.Writer, prefix string, st etcdsource.FleetStatus) {
	if st.MapRevision == 0 {
		fmt.Fprintf(w, "map %s: none\n", etcdsource.MapKey(prefix))
	} else {
		fmt.Fprintf(w, "map %s: revision %d\n", etcdsource.MapKey(prefix), st.MapRevision)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "instance\trevision\tstate\thost\tpid\tlisten\tupdated\trejected")
	serving := 0
	for _, in := range st.Instances {
		state := "behind"
		if in.Revision == st.MapRevision {
			state, serving = "current", serving+1
		}
		rejected := ""
		if in.RejectedRevision != 0 {
			rejected = fmt.Sprintf("revision %d: %s", in.RejectedRevision, in.Rejected)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", in.ID, in.Revision, state, in.Host, in.PID, in.Listen,
			in.Time.UTC().Format(time.RFC3339), rejected)
	}
	tw.Flush()
	// The fleet's pauses (`pgturnstile shard move`), and which instances
	// confirmed each.
	keys := make([]string, 0, len(st.Pauses))
	for k := range st.Pauses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := st.Pauses[k]
		held := 0
		for _, in := range st.Instances {
			if in.Paused[k] == p.Revision {
				held++
			}
		}
		fmt.Fprintf(w, "pause %s: range %s, move %s by %s since %s; drained on %d of %d instances\n", k, p.Range, p.Move, p.By,
			p.Started.UTC().Format(time.RFC3339), held, len(st.Instances))
	}
	verdict := "converged"
	if !st.Converged() {
		verdict = "not converged"
	}
	fmt.Fprintf(w, "%d instances, %d serving the map's revision: %s\n", len(st.Instances), serving, verdict)
}

// resolve is the flags' client configuration and key prefix, with the
// --ini file's shard_etcd_* settings as defaults, and that file's
// [databases] entries (nil without --ini).
func (ef *etcdFlags) resolve() (cc etcdsource.ClientConfig, prefix string, databases []string, err error) {
	cc = etcdsource.ClientConfig{CAFile: ef.cacert, CertFile: ef.cert, KeyFile: ef.key, User: ef.user,
		Password: os.Getenv("PGTURNSTILE_ETCD_PASSWORD"), DialTimeout: ef.timeout}
	prefix = ef.prefix
	if ef.ini != "" {
		cfg, err := config.Load(ef.ini)
		if err != nil {
			return cc, "", nil, err
		}
		for db := range cfg.Databases {
			if db != "*" {
				databases = append(databases, db)
			}
		}
		st := &cfg.Settings
		def := etcdClientConfig(st)
		cc.Endpoints = def.Endpoints
		if prefix == "" {
			prefix = st.ShardEtcdPrefix
		}
		for _, f := range []struct{ flag, ini *string }{{&cc.CAFile, &def.CAFile}, {&cc.CertFile, &def.CertFile},
			{&cc.KeyFile, &def.KeyFile}, {&cc.User, &def.User}, {&cc.Password, &def.Password}} {
			if *f.flag == "" {
				*f.flag = *f.ini
			}
		}
	}
	if ef.endpoints != "" {
		cc.Endpoints = nil
		for _, e := range strings.Split(ef.endpoints, ",") {
			if e = strings.TrimSpace(e); e != "" {
				cc.Endpoints = append(cc.Endpoints, e)
			}
		}
	}
	if len(cc.Endpoints) == 0 {
		return cc, "", nil, errors.New("no etcd endpoints (--etcd, or shard_etcd_endpoints in --ini)")
	}
	if prefix == "" {
		prefix = "/pgturnstile"
	}
	if !strings.HasPrefix(prefix, "/") || len(prefix) > 1 && strings.HasSuffix(prefix, "/") {
		return cc, "", nil, errors.New(`a key prefix starts with "/" and does not end with "/"`)
	}
	return cc, prefix, databases, nil
}
