package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgturnstile/pgturnstile/shard"
)

const shardMoveUsage = `Usage: pgturnstile shard move --cluster=C --colo=K --range=A-B --to=DB [OPTION]...

Moves logical shards A-B of colocation K of cluster C to the [databases]
entry DB, while traffic runs (docs/sharding.md, "Moving a range"):

  0. wait until the target has replayed the source's writes so far
     (nothing is paused yet);
  1. pause the range on every instance, and wait until each has no
     transaction in it running (new ones wait, in order);
  2. wait until the target has replayed the source's writes and made
     them durable: the source's pg_current_wal_insert_lsn() against the flush
     position of the subscription's walsender (--source, --subscription;
     create the subscription WITH (synchronous_commit = on), or this
     waits up to the target's wal_writer_delay more);
  3. publish the map with the range on DB, and wait until every instance
     serves it;
  4. resume: the waiting transactions run, on DB.

A failed or timed-out step puts the old map back (where it was changed)
and resumes: nothing is left half-done. A second move of the same
colocation is refused while one runs. Each step prints its timing.

The fleet, one of:
      --etcd=ENDPOINTS      the instances watch the map in etcd
                            (shard_source = etcd); with --prefix, --ini,
                            --cacert, --cert, --key, --user as for
                            pgturnstile shard publish
      --console=DSN         an instance's admin console (repeat for each
                            instance), e.g. "host=10.0.0.5 port=6432
                            dbname=pgbouncer user=admin"; with
      --shard-file=PATH     the shard file those instances read (rewritten,
                            then RELOAD)

Replication, one of:
      --source=DSN          the database the range leaves (a role that may
                            read pg_stat_replication's positions:
                            superuser or pg_monitor)
      --subscription=NAME   the subscription on the target that replicates
                            the source (its walsender's application_name)
      --no-replication-wait the target already holds the range's rows (the
                            logical phase: both are views of one database)

Options:
      --timeout=DURATION    each step's limit (default 30s)
      --dry-run             print the plan and the new ranges; change nothing
`

// moveFleet is the instances a move drives: through etcd, or through
// their consoles and a shared shard file.
type moveFleet interface {
	// readMap returns the map document in force and its name.
	readMap(ctx context.Context) (doc []byte, name string, err error)
	// pause pauses the range everywhere and returns when every instance
	// confirmed that nothing in it runs; it returns the instances.
	pause(ctx context.Context, mv shard.Move) (instances []string, err error)
	// confirmed returns the instances that hold the pause now, waiting
	// for any that joined since pause.
	confirmed(ctx context.Context) ([]string, error)
	// publish puts doc in force everywhere and returns when every
	// instance serves it.
	publish(ctx context.Context, doc []byte) error
	// restore puts the map read by readMap back (after a publish that
	// failed part way).
	restore(ctx context.Context) error
	// resume ends the pause.
	resume(ctx context.Context) error
	close()
}

func runShardMove(args []string, stdout, stderr io.Writer) int {
	const name = "pgturnstile shard move"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var mv shard.Move
	var rng, source, subscription, shardFile string
	var consoles multiFlag
	var noWait, dryRun bool
	var timeout time.Duration
	etcdFlags := addEtcdFlags(fs)
	fs.StringVar(&mv.Cluster, "cluster", "", "")
	fs.StringVar(&mv.Colo, "colo", "", "")
	fs.StringVar(&rng, "range", "", "")
	fs.StringVar(&mv.To, "to", "", "")
	fs.StringVar(&source, "source", "", "")
	fs.StringVar(&subscription, "subscription", "", "")
	fs.BoolVar(&noWait, "no-replication-wait", false, "")
	fs.Var(&consoles, "console", "")
	fs.StringVar(&shardFile, "shard-file", "", "")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "")
	fs.BoolVar(&dryRun, "dry-run", false, "")
	usage := func(err error) int {
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n\n", name, err)
		}
		fmt.Fprint(stderr, shardMoveUsage)
		return 1
	}
	if err := fs.Parse(args); err != nil {
		return usage(err)
	}
	if fs.NArg() != 0 {
		return usage(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if mv.Cluster == "" || mv.Colo == "" || rng == "" || mv.To == "" {
		return usage(errors.New("--cluster, --colo, --range and --to are required"))
	}
	var err error
	if mv.First, mv.Last, err = shard.ParseRange(rng); err != nil {
		return usage(fmt.Errorf("--range %s: %v", rng, err))
	}
	if (source == "") != (subscription == "") || (source == "") == !noWait {
		return usage(errors.New("give --source and --subscription, or --no-replication-wait"))
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	var fleet moveFleet
	switch {
	case etcdFlags.endpoints != "" || etcdFlags.ini != "":
		if len(consoles) > 0 || shardFile != "" {
			return usage(errors.New("--etcd and --console are two ways to reach the fleet: give one"))
		}
		fleet, err = newEtcdFleet(etcdFlags, stdout)
	case len(consoles) > 0:
		if shardFile == "" {
			return usage(errors.New("--console needs --shard-file, the file the instances read"))
		}
		fleet = &consoleFleet{dsns: consoles, file: shardFile, out: stdout}
	default:
		return usage(errors.New("give the fleet: --etcd (or --ini) or --console with --shard-file"))
	}
	if err != nil {
		return fail(err)
	}
	defer fleet.close()

	step := func(d time.Duration) (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), d)
	}
	ctx, cancel := step(timeout)
	doc, docName, err := fleet.readMap(ctx)
	cancel()
	if err != nil {
		return fail(err)
	}
	plan, err := shard.PlanMove(doc, docName, mv)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "move %s.%s %s from %s to %s\n", mv.Cluster, mv.Colo, shard.Range{First: mv.First, Last: mv.Last}, plan.From, mv.To)
	fmt.Fprintf(stdout, "  ranges now:   %s\n  ranges after: %s\n", shard.RangesString(plan.Before), shard.RangesString(plan.After))
	if dryRun {
		fmt.Fprintf(stdout, "dry run: nothing changed. The move would pause the range, ")
		if noWait {
			fmt.Fprintf(stdout, "not wait for replication (--no-replication-wait), ")
		} else {
			fmt.Fprintf(stdout, "wait until subscription %s has replayed the source's WAL, ", subscription)
		}
		fmt.Fprintf(stdout, "publish the map below and resume.\n%s", plan.Doc)
		fmt.Fprintf(stdout, "\n-- The range's rows alone, for logical replication (run on %s's host; the target subscribes\n-- WITH (synchronous_commit = on)):\n%s", plan.From, plan.Publication)
		return 0
	}

	var src *pgx.Conn
	if !noWait {
		ctx, cancel := step(timeout)
		src, err = connectSimple(ctx, source)
		if err == nil {
			// The marker's commit must flush the WAL before it (a
			// source running synchronous_commit = off would leave it to
			// the WAL writer, up to wal_writer_delay later).
			_, err = src.Exec(ctx, "SET synchronous_commit = on")
		}
		cancel()
		if err != nil {
			return fail(fmt.Errorf("--source: %v", err))
		}
		defer src.Close(context.Background())
	}
	start := time.Now()
	since := func(t time.Time) string { return time.Since(t).Round(100 * time.Microsecond).String() }
	// undo ends a failed move: the old map back if publish began, then
	// the pause ended.
	undo := func(published bool, cause error) int {
		fmt.Fprintf(stdout, "failed: %v\n", cause)
		code := 1
		if published {
			ctx, cancel := step(timeout)
			if err := fleet.restore(ctx); err != nil {
				fmt.Fprintf(stdout, "rolling back the map: %v\n", err)
				code = 2
			} else {
				fmt.Fprintf(stdout, "old map back in force\n")
			}
			cancel()
		}
		ctx, cancel := step(timeout)
		defer cancel()
		if err := fleet.resume(ctx); err != nil {
			fmt.Fprintf(stdout, "resuming: %v\n", err)
			code = 2
		} else {
			fmt.Fprintf(stdout, "resumed on the old mapping after %s; nothing moved\n", since(start))
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, cause)
		return code
	}

	// Caught up before the pause: the pause then waits only for the
	// replication lag of the moment, not for a backlog (an initial copy
	// still running, a subscriber that was down).
	// Rounds repeat while each is much shorter than the last (a
	// backlog draining), until the lag is that of the moment.
	if !noWait {
		ctx, cancel := step(timeout)
		var last time.Duration
		for round := 0; round < 10; round++ {
			t := time.Now()
			lsn, err := waitReplayed(ctx, src, subscription)
			if err != nil {
				cancel()
				return fail(fmt.Errorf("waiting for replication before the pause (nothing paused): %w", err))
			}
			took := time.Since(t)
			fmt.Fprintf(stdout, "before the pause: subscription %s flushed the source's WAL up to %s after %s\n", subscription, lsn, since(t))
			if took < 50*time.Millisecond || (round > 0 && took > last*3/4) {
				break
			}
			last = took
		}
		cancel()
		start = time.Now()
	}
	ctx, cancel = step(timeout)
	instances, err := fleet.pause(ctx, mv)
	cancel()
	if err != nil {
		var held *heldError
		if errors.As(err, &held) {
			return fail(fmt.Errorf("refused: %v", err))
		}
		return undo(false, fmt.Errorf("pausing: %w", err))
	}
	fmt.Fprintf(stdout, "paused on %d instances (%s), drained after %s\n", len(instances), strings.Join(instances, ", "), since(start))

	// Replication, then the instances checked again: one that joined
	// since the pause holds it too, and writes it let through before it
	// paused are waited for by a second round.
	for round := 0; ; round++ {
		if !noWait {
			t := time.Now()
			ctx, cancel := step(timeout)
			lsn, err := waitReplayed(ctx, src, subscription)
			cancel()
			if err != nil {
				return undo(false, fmt.Errorf("waiting for replication: %w", err))
			}
			fmt.Fprintf(stdout, "subscription %s flushed the source's WAL up to %s after %s\n", subscription, lsn, since(t))
		}
		ctx, cancel := step(timeout)
		now, err := fleet.confirmed(ctx)
		cancel()
		if err != nil {
			return undo(false, fmt.Errorf("checking the pause: %w", err))
		}
		if joined := newNames(instances, now); len(joined) > 0 && round < 3 {
			fmt.Fprintf(stdout, "instances joined during the move (%s): waiting for replication again\n", strings.Join(joined, ", "))
			instances = now
			continue
		}
		break
	}

	t := time.Now()
	ctx, cancel = step(timeout)
	err = fleet.publish(ctx, plan.Doc)
	cancel()
	if err != nil {
		return undo(true, fmt.Errorf("publishing the new map: %w", err))
	}
	fmt.Fprintf(stdout, "new map published at %s; every instance serves it after %s\n", t.UTC().Format(time.RFC3339Nano), since(t))
	ctx, cancel = step(timeout)
	err = fleet.resume(ctx)
	cancel()
	if err != nil {
		// The new map is in force everywhere: the move is done, and the
		// pause ends with its lease (etcd) or needs RESUME SHARD.
		fmt.Fprintf(stdout, "moved, but resuming failed: %v\n", err)
		fmt.Fprintf(stderr, "%s: resuming: %v\n", name, err)
		return 2
	}
	fmt.Fprintf(stdout, "resumed: range paused for %s; %s.%s %s is in %s\n", since(start), mv.Cluster, mv.Colo,
		shard.Range{First: mv.First, Last: mv.Last}, mv.To)
	return 0
}

// heldError: another move holds the colocation (the move is refused,
// nothing was paused).
type heldError struct{ msg string }

func (e *heldError) Error() string { return e.msg }

func newNames(old, now []string) []string {
	var out []string
	for _, n := range now {
		found := false
		for _, o := range old {
			found = found || o == n
		}
		if !found {
			out = append(out, n)
		}
	}
	return out
}

// etcdFlags are the flags that reach etcd, as pgturnstile shard publish
// takes them.
type etcdFlags struct {
	endpoints, prefix, ini, cacert, cert, key, user string
	timeout                                         time.Duration
}

func addEtcdFlags(fs *flag.FlagSet) *etcdFlags {
	f := &etcdFlags{}
	fs.StringVar(&f.endpoints, "etcd", "", "")
	fs.StringVar(&f.prefix, "prefix", "", "")
	fs.StringVar(&f.ini, "ini", "", "")
	fs.StringVar(&f.cacert, "cacert", "", "")
	fs.StringVar(&f.cert, "cert", "", "")
	fs.StringVar(&f.key, "key", "", "")
	fs.StringVar(&f.user, "user", "", "")
	fs.DurationVar(&f.timeout, "etcd-timeout", 5*time.Second, "")
	return f
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// connectSimple connects with the simple protocol only (the console
// speaks nothing else).
func connectSimple(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cfg)
}

// waitReplayed takes the source's current WAL position and waits until
// the walsender of subscription reports the target flushed it: applied,
// committed and durable there. (Applied alone is not enough: a target
// that crashed before its WAL writer flushed would come back without the
// tail and replay it again over the writes it took since the move.) A
// subscription with synchronous_commit = on flushes as it applies; with
// the default (off) this waits up to wal_writer_delay more. It returns
// the position.
func waitReplayed(ctx context.Context, src *pgx.Conn, subscription string) (string, error) {
	// The position to wait for is a marker of our own: a transactional
	// logical message, whose synchronous commit (the session sets
	// synchronous_commit = on) flushes every record before it (commits
	// with synchronous_commit = off, or other WAL not yet flushed, would
	// otherwise wait for the WAL writer: the walsender sends only
	// flushed WAL), and
	// which the walsender passes at once. (pg_current_wal_lsn() can lie
	// up to a page past the last record, where a walsender with nothing
	// more to send never arrives.) The message is not replicated:
	// pgoutput sends messages only to subscribers that ask for them.
	var lsn string
	marker := true
	if err := src.QueryRow(ctx, "SELECT pg_logical_emit_message(true, 'pgturnstile', 'shard move')::text").Scan(&lsn); err != nil {
		// A role without the right to emit messages: the end of the
		// last record, and empty commits (an xid, which any role may
		// take) to carry the walsender past it once the WAL writer has
		// flushed them.
		marker = false
		if err := src.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
			return "", err
		}
	}
	start := time.Now()
	var nudged time.Time
	for {
		var n int
		var behind bool
		err := src.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(flush_lsn IS NULL OR flush_lsn <= $2::text::pg_lsn), true)
			FROM pg_stat_replication WHERE application_name = $1`, subscription, lsn).Scan(&n, &behind)
		if err != nil {
			return lsn, err
		}
		if n == 0 {
			return lsn, fmt.Errorf("no walsender for subscription %q on the source (pg_stat_replication)", subscription)
		}
		if !behind {
			return lsn, nil
		}
		if !marker && time.Since(start) > 20*time.Millisecond && time.Since(nudged) > 50*time.Millisecond {
			nudged = time.Now()
			if _, err := src.Exec(ctx, "SELECT txid_current()"); err != nil {
				return lsn, err
			}
		}
		select {
		case <-ctx.Done():
			return lsn, fmt.Errorf("subscription %q has not flushed %s: %w", subscription, lsn, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// consoleFleet is instances reached through their admin consoles, which
// read one shard file.
type consoleFleet struct {
	dsns  []string
	file  string
	out   io.Writer
	conns []*pgx.Conn
	mv    shard.Move
	old   []byte
	names []string
	// paused are the consoles whose PAUSE SHARD returned.
	paused []*pgx.Conn
}

func (f *consoleFleet) readMap(ctx context.Context) ([]byte, string, error) {
	doc, err := os.ReadFile(f.file)
	f.old = doc
	return doc, f.file, err
}

func (f *consoleFleet) each(ctx context.Context, sql string) error {
	errs := make(chan error, len(f.conns))
	for i, c := range f.conns {
		go func() {
			_, err := c.Exec(ctx, sql)
			if err != nil {
				err = fmt.Errorf("%s: %s: %w", f.names[i], sql, err)
			}
			errs <- err
		}()
	}
	var first error
	for range f.conns {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (f *consoleFleet) target() string {
	return fmt.Sprintf("%s.%s %s", f.mv.Cluster, f.mv.Colo, shard.Range{First: f.mv.First, Last: f.mv.Last})
}

func (f *consoleFleet) pause(ctx context.Context, mv shard.Move) ([]string, error) {
	f.mv = mv
	for _, dsn := range f.dsns {
		c, err := connectSimple(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("console %s: %w", dsn, err)
		}
		f.conns = append(f.conns, c)
		f.names = append(f.names, c.Config().Host+":"+fmt.Sprint(c.Config().Port))
	}
	errs := make([]error, len(f.conns))
	done := make(chan struct{})
	for i, c := range f.conns {
		go func() {
			_, errs[i] = c.Exec(ctx, "PAUSE SHARD "+f.target())
			done <- struct{}{}
		}()
	}
	for range f.conns {
		<-done
	}
	var held, first error
	for i, err := range errs {
		switch {
		case err == nil:
			f.paused = append(f.paused, f.conns[i])
		case strings.Contains(err.Error(), "overlaps paused range"):
			held = &heldError{f.names[i] + ": " + err.Error()}
		case first == nil:
			first = fmt.Errorf("%s: %w", f.names[i], err)
		}
	}
	if held != nil || first != nil {
		// Those that paused resume now; the move's undo has nothing
		// left to resume.
		_ = f.resume(ctx)
		if held != nil {
			return nil, held
		}
		return nil, first
	}
	return f.names, nil
}

func (f *consoleFleet) confirmed(context.Context) ([]string, error) { return f.names, nil }

func (f *consoleFleet) write(doc []byte) error {
	tmp := f.file + ".pgturnstile-move"
	if err := os.WriteFile(tmp, doc, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.file)
}

func (f *consoleFleet) publish(ctx context.Context, doc []byte) error {
	if err := f.write(doc); err != nil {
		return err
	}
	if err := f.each(ctx, "RELOAD"); err != nil {
		return err
	}
	// RELOAD keeps the old map when the new one is refused (a database
	// one instance lacks): SHOW SHARDS says which is in force.
	for i, c := range f.conns {
		rows, err := c.Query(ctx, "SHOW SHARDS")
		if err != nil {
			return err
		}
		recs, err := pgx.CollectRows(rows, pgx.RowToMap)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if fmt.Sprint(r["cluster"]) != f.mv.Cluster || fmt.Sprint(r["colo"]) != f.mv.Colo {
				continue
			}
			first, last, err := shard.ParseRange(fmt.Sprint(r["range"]))
			if err != nil || last < f.mv.First || first > f.mv.Last {
				continue
			}
			if db := fmt.Sprint(r["database"]); db != f.mv.To {
				return fmt.Errorf("%s still routes %s to %s after RELOAD (its log says why)", f.names[i], fmt.Sprint(r["range"]), db)
			}
		}
	}
	return nil
}

func (f *consoleFleet) restore(ctx context.Context) error {
	if err := f.write(f.old); err != nil {
		return err
	}
	return f.each(ctx, "RELOAD")
}

func (f *consoleFleet) resume(ctx context.Context) error {
	var first error
	for _, c := range f.paused {
		if _, err := c.Exec(ctx, "RESUME SHARD "+f.target()); err != nil && first == nil {
			first = err
		}
	}
	f.paused = nil
	return first
}

func (f *consoleFleet) close() {
	for _, c := range f.conns {
		_ = c.Close(context.Background())
	}
}
