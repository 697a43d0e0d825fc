package shard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var exampleDatabases = []string{"app_main", "app_s0", "app_s1", "pgbouncer"}

func TestParseExample(t *testing.T) {
	m, err := Load("testdata/shards.toml", exampleDatabases)
	if err != nil {
		t.Fatal(err)
	}
	if m.Cluster("app_main") != nil || m.Cluster("nope") != nil {
		t.Error("a database that is no cluster was found as one")
	}
	c := m.Cluster("app")
	if c == nil || len(m.Clusters()) != 1 {
		t.Fatalf("clusters: %v", m.Clusters())
	}
	if c.Name != "app" || c.Line != 4 || c.DefaultDatabase != "app_main" || c.LogicalShards != 256 ||
		c.OnMissingKey != MissingKeyError || c.Shadow || !c.MayTarget("ops") || c.MayTarget("app") {
		t.Errorf("cluster: %+v", c)
	}
	if got := strings.Join(c.Databases(), ","); got != "app_main,app_s0,app_s1" {
		t.Errorf("Databases() = %s", got)
	}
	if len(c.Colos()) != 3 {
		t.Fatalf("colos: %v", c.Colos())
	}
	for _, tc := range []struct{ table, colo, column string }{
		{"files", "org", "org_id"},
		{"orgs", "org", "id"},
		{"billing.invoices", "org", "org_id"},
		{"settings", "tenant", "tenant"},
		{"documents", "doc", "id"},
	} {
		tb, ok := c.Table([]byte(tc.table))
		if !ok || tb.Colo.Name != tc.colo || tb.Column != tc.column {
			t.Errorf("Table(%s) = %+v, %v", tc.table, tb, ok)
		}
	}
	if _, ok := c.Table([]byte("Files")); ok {
		t.Error("table names are matched exactly, as Postgres stores them")
	}
	org, doc := c.Colo("org"), c.Colo("doc")
	if org.KeyType != KeyBigint || doc.KeyType != KeyUUID || c.Colo("tenant").KeyType != KeyText || c.Colo("x") != nil {
		t.Error("colo lookup or key types wrong")
	}
	for _, tc := range []struct {
		l  uint32
		db string
	}{{0, "app_s0"}, {127, "app_s0"}, {128, "app_s1"}, {255, "app_s1"}} {
		if got := org.Database(tc.l); got != tc.db {
			t.Errorf("org.Database(%d) = %s, want %s", tc.l, got, tc.db)
		}
		if got := doc.Database(tc.l); got != tc.db {
			t.Errorf("doc.Database(%d) = %s, want %s (ranges given out of order)", tc.l, got, tc.db)
		}
	}
	if r := doc.Ranges(); len(r) != 2 || r[0].String() != "0-127" || r[0].Line != 36 || r[1].Line != 32 {
		t.Errorf("doc ranges: %+v", r)
	}
	// Place: the logical shard of a key and its database.
	h, _ := KeyBigint.HashText([]byte("42"))
	l, db := org.Place(h)
	if l != h.Logical(256) || db != org.Database(l) {
		t.Errorf("Place = %d, %s", l, db)
	}
}

func TestParseDefaultsAndEmpty(t *testing.T) {
	m, err := Parse(nil, "s.toml", nil)
	if err != nil || len(m.Clusters()) != 0 || m.Cluster("app") != nil {
		t.Fatalf("empty file: %v, %v", m, err)
	}
	var nilMap *Map
	if nilMap.Cluster("app") != nil || nilMap.Clusters() != nil {
		t.Error("a nil map must have no clusters")
	}
	m, err = Parse([]byte(`
[[cluster]]
name = "app"
default_database = "main"
logical_shards = 1
on_missing_key = "scatter"
shadow = true
`), "s.toml", []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Cluster("app")
	if c.OnMissingKey != MissingKeyScatter || !c.Shadow || len(c.Colos()) != 0 || c.MayTarget("x") {
		t.Errorf("cluster: %+v", c)
	}
}

// TestParseErrors: every error names the file and the line of the value
// at fault.
func TestParseErrors(t *testing.T) {
	const head = "[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\nlogical_shards = 8\n"
	const colo = head + "[[cluster.colo]]\nname = \"org\"\nkey_type = \"bigint\"\ntables = { files = \"org_id\" }\n"
	dbs := []string{"main", "s0", "s1"}
	for _, tc := range []struct{ name, data, want string }{
		{"syntax", "[[cluster]\n", `s.toml:2: expected end of table array name`},
		{"unknown top key", "\n\nshards = 1\n", `s.toml:3: unknown key "shards"`},
		{"unknown cluster key", head + "defualt = 1\n", `s.toml:5: unknown key "cluster.defualt"`},
		{"unknown colo key", colo + "key = \"id\"\n", `s.toml:9: unknown key "cluster.colo.key"`},
		{"unknown shard key", colo + "shards = [\n  { range = \"0-7\", db = \"s0\" },\n]\n", `s.toml:10: unknown key "cluster.colo.shards.db"`},
		{"cluster not a table", "cluster = 1\n", `s.toml:1: cluster: must be an array of tables, not integer`},
		{"missing name", "[[cluster]]\ndefault_database = \"main\"\n", `s.toml:1: cluster: missing name`},
		{"name too long", "[[cluster]]\nname = \"" + strings.Repeat("x", 64) + "\"\n", `s.toml:2: cluster.name: "xxx`},
		{"name is a database", "[[cluster]]\nname = \"main\"\n", `s.toml:2: cluster.name: "main" is also a [databases] entry`},
		{"duplicate cluster", head + head, `s.toml:6: cluster.name: duplicate cluster "app" (first at line 1)`},
		{"missing default", "[[cluster]]\nname = \"app\"\n", `s.toml:1: cluster: missing default_database`},
		{"unknown default", "[[cluster]]\nname = \"app\"\ndefault_database = \"nope\"\n", `s.toml:3: cluster.default_database: no database "nope" in [databases]`},
		{"missing logical_shards", "[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\n", `s.toml:1: cluster: missing logical_shards`},
		{"logical_shards not a power of two", "[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\nlogical_shards = 100\n", `s.toml:4: cluster.logical_shards: must be a power of two from 1 to 65536, not 100`},
		{"logical_shards zero", "[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\nlogical_shards = 0\n", `not 0`},
		{"logical_shards too big", "[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\nlogical_shards = 131072\n", `not 131072`},
		{"logical_shards float", "[[cluster]]\nname = \"app\"\ndefault_database = \"main\"\nlogical_shards = 8.0\n", `s.toml:4: cluster.logical_shards: must be an integer, not float`},
		{"on_missing_key", head + "on_missing_key = \"guess\"\n", `s.toml:5: cluster.on_missing_key: must be "error", "default" or "scatter", not "guess"`},
		{"shadow", head + "shadow = \"yes\"\n", `s.toml:5: cluster.shadow: must be a boolean, not string`},
		{"target_users", head + "target_users = \"ops\"\n", `s.toml:5: cluster.target_users: must be an array of strings, not string`},
		{"target_users dup", head + "target_users = [\"ops\",\n  \"ops\"]\n", `s.toml:6: cluster.target_users: duplicate user "ops"`},
		{"colo name", head + "[[cluster.colo]]\nname = \"my colo\"\n", `s.toml:6: cluster.colo.name: invalid name "my colo"`},
		{"key_type", head + "[[cluster.colo]]\nname = \"org\"\nkey_type = \"numeric\"\n", `s.toml:7: cluster.colo.key_type: must be "bigint", "int", "smallint", "text" or "uuid", not "numeric"`},
		{"missing tables", head + "[[cluster.colo]]\nname = \"org\"\nkey_type = \"int\"\n", `s.toml:5: cluster.colo: missing tables`},
		{"missing shards", colo, `s.toml:5: cluster.colo: missing shards`},
		{"bad range", colo + "shards = [\n  { range = \"0..7\", database = \"s0\" },\n]\n", `s.toml:10: cluster.colo.shards.range: "0..7": not "N" or "FIRST-LAST"`},
		{"reversed range", colo + "shards = [{ range = \"7-0\", database = \"s0\" }]\n", `s.toml:9: cluster.colo.shards.range: "7-0": a range goes from the lower`},
		{"range beyond", colo + "shards = [\n  { range = \"0-8\", database = \"s0\" },\n]\n", `s.toml:10: cluster.colo.shards.range: "0-8" is beyond logical shard 7 (logical_shards = 8)`},
		{"overlap", colo + "shards = [\n  { range = \"0-4\", database = \"s0\" },\n  { range = \"4-7\", database = \"s1\" },\n]\n",
			`s.toml:11: cluster.colo.shards.range: "4-7" overlaps range "0-4" (line 10) at logical shard 4`},
		{"gap", colo + "shards = [\n  { range = \"0-2\", database = \"s0\" },\n  { range = \"5\", database = \"s1\" },\n]\n",
			`s.toml:9: cluster.colo.shards: logical shards 3-4, 6-7 are in no range: the ranges must cover 0-7 exactly once`},
		{"no shards", colo + "shards = []\n", `s.toml:9: cluster.colo.shards: logical shards 0-7 are in no range`},
		{"unknown database", colo + "shards = [\n  { range = \"0-7\",\n    database = \"s9\" },\n]\n", `s.toml:11: cluster.colo.shards.database: no database "s9" in [databases]`},
		{"missing database", colo + "shards = [ { range = \"0-7\" } ]\n", `s.toml:9: cluster.colo.shards: missing database`},
		{"table in two colos", colo + "shards = [{ range = \"0-7\", database = \"s0\" }]\n" +
			"[[cluster.colo]]\nname = \"other\"\nkey_type = \"text\"\ntables = { t = \"k\",\n  files = \"x\" }\nshards = [{ range = \"0-7\", database = \"s1\" }]\n",
			`s.toml:14: cluster.colo.tables.files: table "files" is already in colocation "org" (line 8): a table belongs to one colocation`},
		{"duplicate colo", colo + "shards = [{ range = \"0-7\", database = \"s0\" }]\n" +
			"[[cluster.colo]]\nname = \"org\"\nkey_type = \"text\"\ntables = { t = \"k\" }\nshards = [{ range = \"0-7\", database = \"s1\" }]\n",
			`s.toml:11: cluster.colo.name: duplicate colocation "org" (first at line 5)`},
		{"empty tables", head + "[[cluster.colo]]\nname = \"org\"\nkey_type = \"int\"\ntables = {}\nshards = [{ range = \"0-7\", database = \"s0\" }]\n", `s.toml:8: cluster.colo.tables: must name at least one table`},
		{"bad table name", head + "[[cluster.colo]]\nname = \"org\"\nkey_type = \"int\"\ntables = { \"a.b.c\" = \"k\" }\nshards = [{ range = \"0-7\", database = \"s0\" }]\n", `s.toml:8: cluster.colo.tables."a.b.c": table "a.b.c": at most schema.table`},
		{"column not a string", head + "[[cluster.colo]]\nname = \"org\"\nkey_type = \"int\"\ntables = { t = 1 }\nshards = [{ range = \"0-7\", database = \"s0\" }]\n", `s.toml:8: cluster.colo.tables.t: must be a string, not integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.data), "s.toml", dbs)
			if err == nil {
				t.Fatalf("parsed: %+v", m)
			}
			if _, ok := err.(*FileError); !ok {
				t.Errorf("error %T, want *FileError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml"), nil); err == nil || !strings.Contains(err.Error(), "cannot load shard file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Load(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	p := filepath.Join(t.TempDir(), "s.toml")
	if err := os.WriteFile(p, []byte("[[cluster]]\nname = \"app\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, nil); err == nil || !strings.HasPrefix(err.Error(), p+":1: ") {
		t.Errorf("error not placed in the file: %v", err)
	}
}

// A routed statement looks up its table and the database of its key's
// logical shard: neither may allocate.
func TestMapLookupsDoNotAllocate(t *testing.T) {
	m, err := Load("testdata/shards.toml", exampleDatabases)
	if err != nil {
		t.Fatal(err)
	}
	stmt := []byte("SELECT * FROM files WHERE org_id = 42")
	name := stmt[14:19]
	key := stmt[35:]
	var n int
	allocs := testing.AllocsPerRun(100, func() {
		c := m.Cluster("app")
		tb, ok := c.Table(name)
		if !ok {
			panic("files not found")
		}
		h, _ := tb.Colo.KeyType.HashText(key)
		_, db := tb.Colo.Place(h)
		n += len(db)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per lookup, want 0", allocs)
	}
}

func BenchmarkRouteLiteral(b *testing.B) {
	m, err := Load("testdata/shards.toml", exampleDatabases)
	if err != nil {
		b.Fatal(err)
	}
	name, key := []byte("files"), []byte("1234567890")
	b.ReportAllocs()
	var n int
	for b.Loop() {
		tb, _ := m.Cluster("app").Table(name)
		h, _ := tb.Colo.KeyType.HashText(key)
		_, db := tb.Colo.Place(h)
		n += len(db)
	}
	_ = n
}
