//go:build !noetcd

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/etcdtest"
	"github.com/pgturnstile/pgturnstile/shard/etcdsource"
)

const cliMap = `[[cluster]]
name = "app"
default_database = "main"
logical_shards = 2

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [ { range = "0-1", database = "s0" } ]
`

// pgturnstile shard publish and status against a real etcd: a map is
// checked (against --ini's [databases] when given) before it is written;
// status prints the map's revision and each instance's, exit 3 until they
// agree; --ini supplies the endpoints and the prefix.
func TestShardPublishStatus(t *testing.T) {
	etcd := etcdtest.Start(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.toml")
	ini := filepath.Join(dir, "pgbouncer.ini")
	for path, text := range map[string]string{
		good: cliMap,
		bad:  strings.Replace(cliMap, `"0-1"`, `"0"`, 1),
		ini: "[databases]\nmain = host=127.0.0.1\n[pgbouncer]\nshard_source = etcd\nshard_etcd_endpoints = " + etcd.Endpoint() +
			"\nshard_etcd_prefix = /cli\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := runShard(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	// status with nothing published: no map, not converged.
	if code, out, _ := run("status", "--etcd", etcd.Endpoint(), "--prefix", "/cli"); code != 3 || !strings.Contains(out, "map /cli/map: none") {
		t.Fatalf("status before publish: %d %q", code, out)
	}
	// A broken map is not written.
	if code, _, errs := run("publish", "--etcd", etcd.Endpoint(), "--prefix", "/cli", bad); code != 1 || !strings.Contains(errs, "logical shards 1 are in no range") {
		t.Fatalf("publish bad: %d %q", code, errs)
	}
	// With --ini, s0 must be one of its [databases]: it is not.
	if code, _, errs := run("publish", "--ini", ini, good); code != 1 || !strings.Contains(errs, `no database "s0"`) {
		t.Fatalf("publish against the ini: %d %q", code, errs)
	}
	code, out, errs := run("publish", "--etcd", etcd.Endpoint(), "--prefix", "/cli", good)
	if code != 0 || !strings.Contains(out, "to /cli/map: revision ") {
		t.Fatalf("publish: %d %q %q", code, out, errs)
	}

	// An instance serving it: status (endpoints and prefix from --ini)
	// says converged.
	src, err := etcdsource.Start(etcdsource.Config{ClientConfig: etcdsource.ClientConfig{Endpoints: []string{etcd.Endpoint()}},
		Prefix: "/cli", Instance: "host:6432", Listen: "127.0.0.1:6432", Apply: func([]byte, string, int64) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, out, _ = run("status", "--ini", ini)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never converged: %d %q", code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out, "host:6432") || !strings.Contains(out, "current") || !strings.Contains(out, "1 instances, 1 serving the map's revision: converged") {
		t.Fatalf("status: %q", out)
	}
	// A move's pause shows in status, with how many instances drained
	// it (this instance takes no part in moves: none).
	cli, err := etcdsource.NewClient(etcdsource.ClientConfig{Endpoints: []string{etcd.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcdsource.AcquirePause(ctx, cli, "/cli", etcdsource.Pause{Cluster: "app", Colo: "org", Range: "1", Move: "m1", By: "ops",
		Started: time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}, lease.ID); err != nil {
		t.Fatal(err)
	}
	if _, out, _ = run("status", "--ini", ini); !strings.Contains(out, "pause app.org: range 1, move m1 by ops since 2026-12-06T03:00:00Z; drained on 0 of 1 instances") {
		t.Fatalf("status with a pause: %q", out)
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	// publish --wait returns once the instance serves the new revision.
	code, out, errs = run("publish", "--etcd", etcd.Endpoint(), "--prefix", "/cli", "--wait", "5s", good)
	if code != 0 || !strings.Contains(out, "every instance (1) serves revision") {
		t.Fatalf("publish --wait: %d %q %q", code, out, errs)
	}
}
