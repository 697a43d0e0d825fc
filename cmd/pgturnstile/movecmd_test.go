//go:build !noetcd

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pgturnstile shard move's arguments: what is missing or contradictory
// is a usage error before anything is contacted; a dry run through a
// shard file prints the plan, the new map and the publication, and
// changes nothing.
func TestShardMoveArguments(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shards.toml")
	if err := os.WriteFile(file, []byte(cliMap), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--cluster", "app", "--colo", "org", "--range", "1", "--to", "s1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--cluster, --colo, --range and --to are required"},
		{[]string{"--cluster", "app", "--colo", "org", "--range", "x", "--to", "s1"}, "--range x"},
		{append(base, "--no-replication-wait"), "give the fleet"},
		{append(base, "--console", "host=x"), "give --source and --subscription, or --no-replication-wait"},
		{append(base, "--console", "host=x", "--source", "host=y"), "give --source and --subscription"},
		{append(base, "--console", "host=x", "--no-replication-wait", "--source", "host=y", "--subscription", "s"), "give --source and --subscription, or --no-replication-wait"},
		{append(base, "--console", "host=x", "--no-replication-wait"), "--console needs --shard-file"},
		{append(base, "--console", "host=x", "--shard-file", file, "--etcd", "http://127.0.0.1:1", "--no-replication-wait"), "two ways to reach the fleet"},
		{append(base, "extra"), `unexpected argument "extra"`},
	} {
		var out, errb bytes.Buffer
		if code := runShard(append([]string{"move"}, tc.args...), &out, &errb); code != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant %q", tc.args, code, errb.String(), tc.want)
		}
	}

	var out, errb bytes.Buffer
	args := append([]string{"move"}, append(base, "--console", "host=nowhere", "--shard-file", file, "--no-replication-wait", "--dry-run")...)
	if code := runShard(args, &out, &errb); code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"move app.org 1 from s0 to s1", "ranges now:   0-1 s0", "ranges after: 0 s0, 1 s1",
		"dry run: nothing changed", `range = "1"`, `CREATE PUBLICATION "move_org_1_1" FOR TABLE public."files" WHERE (`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out.String())
		}
	}
	if doc, _ := os.ReadFile(file); string(doc) != cliMap {
		t.Errorf("the dry run changed the file:\n%s", doc)
	}
	// A range in two databases, or already there, is refused by the plan.
	for _, tc := range []struct{ rng, to, want string }{{"0-1", "s0", "is in s0 already"}, {"2", "s1", "logical shards 0-1"}} {
		errb.Reset()
		a := []string{"move", "--cluster", "app", "--colo", "org", "--range", tc.rng, "--to", tc.to, "--console", "host=x", "--shard-file", file, "--no-replication-wait"}
		if code := runShard(a, &out, &errb); code != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("range %s to %s: exit %d: %s", tc.rng, tc.to, code, errb.String())
		}
	}
}
