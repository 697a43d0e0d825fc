package pooler

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
)

// ApplyShardMap (shard_source = etcd): a map is checked against the
// [databases] in force and put in force as a generation of its own; a bad
// one changes nothing; a RELOAD checks the kept map again; SHOW SHARDS
// names the source and revision; /metrics has the source's families.

func etcdSourceConfig(t *testing.T, databases ...string) *config.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("[databases]\n")
	for _, db := range databases {
		fmt.Fprintf(&b, "%s = host=127.0.0.1 port=5432\n", db)
	}
	b.WriteString("[pgbouncer]\nauth_type = any\nshard_source = etcd\nshard_etcd_endpoints = http://127.0.0.1:2379, http://127.0.0.1:22379\n")
	cfg, err := config.Parse("test.ini", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func shardDoc(db string) []byte {
	return fmt.Appendf(nil, "[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\nlogical_shards = 2\n\n"+
		"[[cluster.colo]]\nname = \"org\"\nkey_type = \"bigint\"\ntables = { files = \"org_id\" }\nshards = [ { range = \"0-1\", database = %q } ]\n", db)
}

type fakeSource struct{ st ShardSourceState }

func (f *fakeSource) ShardSourceState() ShardSourceState { return f.st }

func TestApplyShardMap(t *testing.T) {
	cfg := etcdSourceConfig(t, "main", "s0", "s1")
	if got := cfg.Settings.ShardEtcdEndpoints; len(got) != 2 || got[1] != "http://127.0.0.1:22379" || cfg.Settings.ShardEtcdPrefix != "/pgturnstile" {
		t.Fatalf("settings: %q %q", got, cfg.Settings.ShardEtcdPrefix)
	}
	svc, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	g0 := svc.gen.Load()
	if g0.shards != nil || g0.shardSrc != "etcd" || !shardMapPending(g0, "app") || shardMapPending(g0, "main") {
		t.Fatalf("before any map: shards %v, source %q", g0.shards, g0.shardSrc)
	}
	if err := svc.ApplyShardMap(shardDoc("s0"), "etcd:/p/map", 7); err != nil {
		t.Fatal(err)
	}
	g1 := svc.gen.Load()
	if g1 == g0 || g1.seq <= g0.seq || g1.cfg != g0.cfg || g1.users != g0.users || g1.shardRev != 7 ||
		g1.shards.Cluster("app").Colo("org").Database(0) != "s0" || shardMapPending(g1, "app") {
		t.Fatalf("after map 7: %+v", g1)
	}
	// g0's readers (a transaction that began before) keep their map.
	if g0.shards != nil {
		t.Fatal("the old generation changed")
	}

	// Refused: a database not in [databases], a broken file. Nothing
	// changes.
	for _, doc := range [][]byte{shardDoc("s9"), []byte("[[cluster]]\nname = 3\n")} {
		err := svc.ApplyShardMap(doc, "etcd:/p/map", 8)
		if err == nil || !strings.HasPrefix(err.Error(), "etcd:/p/map:") {
			t.Fatalf("bad map: err = %v", err)
		}
		if svc.gen.Load() != g1 {
			t.Fatal("a refused map changed the generation")
		}
	}
	rows := svc.Console().Shards()
	if len(rows) != 1 || rows[0].Source != "etcd:/p/map" || rows[0].Revision != 7 || rows[0].Database != "s0" {
		t.Fatalf("SHOW SHARDS: %+v", rows)
	}

	// A RELOAD keeps the map, checked against the new [databases].
	if err := svc.Apply(etcdSourceConfig(t, "main", "s0", "s1", "s2"), true); err != nil {
		t.Fatal(err)
	}
	if g := svc.gen.Load(); g.shardRev != 7 || g.shards.Cluster("app") == nil {
		t.Fatalf("after RELOAD: rev %d", g.shardRev)
	}
	// One that drops a database the map routes to fails, and changes
	// nothing.
	before := svc.gen.Load()
	err = svc.Apply(etcdSourceConfig(t, "main", "s1"), true)
	if err == nil || !strings.Contains(err.Error(), "revision 7") || !strings.Contains(err.Error(), `no database "s0"`) {
		t.Fatalf("RELOAD without s0: %v", err)
	}
	if svc.gen.Load() != before {
		t.Fatal("a failed RELOAD changed the generation")
	}

	// /metrics and SHOW SHARD_INSTANCES with a source.
	svc.SetShardSource(&fakeSource{st: ShardSourceState{Connected: true, Latest: 9, Rejected: 2, Self: "a",
		Instances: []admin.ShardInstanceRow{{Instance: "a", Revision: 7, Updated: time.Unix(1, 0)}, {Instance: "b", Revision: 9}}}})
	var b strings.Builder
	svc.WriteMetrics(&b)
	for _, want := range []string{
		"pgturnstile_shard_source_connected 1\n", "pgturnstile_shard_map_revision 7\n", "pgturnstile_shard_map_latest_revision 9\n",
		"pgturnstile_shard_map_rejected_total 2\n", "# TYPE pgturnstile_shard_map_rejected_total counter\n",
		"pgturnstile_shard_instances 2\n", "pgturnstile_shard_instances_converged 1\n",
		"# HELP pgturnstile_shard_source_connected 1 while",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	inst := svc.Console().ShardInstances()
	if len(inst) != 2 || !inst[0].Self || inst[1].Self || inst[0].Latest != 9 {
		t.Fatalf("SHOW SHARD_INSTANCES: %+v", inst)
	}
}

// shard_source = etcd is checked at start: it needs endpoints and
// excludes shard_file; under shard_source = file ApplyShardMap is refused.
func TestShardSourceSettings(t *testing.T) {
	for ini, want := range map[string]string{
		"shard_source = etcd\n": "needs shard_etcd_endpoints",
		"shard_source = etcd\nshard_etcd_endpoints = 127.0.0.1:2379\nshard_file = /x.toml\n": "exclude each other",
	} {
		cfg, err := config.Parse("t.ini", []byte("[databases]\nmain = host=127.0.0.1\n[pgbouncer]\nauth_type = any\n"+ini))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", ini, err, want)
		}
	}
	for ini, want := range map[string]string{
		"shard_source = zookeeper\n":  "shard_source",
		"shard_etcd_prefix = pgt\n":   `starts with "/"`,
		"shard_etcd_prefix = /pgt/\n": `does not end with "/"`,
		"shard_etcd_instance = a/b\n": "no \"/\"",
		"shard_etcd_endpoint = x:1\n": "shard_etcd_endpoint",
	} {
		_, err := config.Parse("t.ini", []byte("[pgbouncer]\n"+ini))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", ini, err, want)
		}
	}
	svc, err := New(config.Default(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.ApplyShardMap(shardDoc("main"), "etcd:/p/map", 1); err == nil {
		t.Fatal("ApplyShardMap under shard_source = file")
	}
}
