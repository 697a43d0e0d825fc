package tomlpos

import (
	"testing"

	"github.com/BurntSushi/toml"
)

const doc = `# comment [not a table]
title = "x [y] {z}" # trailing
multi = """
a ] b
"""

[[cluster]]
name = 'app'
dotted.key = 1
when = 1979-05-27 07:32:00Z

[[cluster.colo]]
name = "org"
tables = { files = "org_id", "my table" = "id" }
shards = [
  { range = "0-127", database = "s0" },   # one
  # a comment between elements
  { range = "128-255",
    database = "s1" },
]

[[cluster]]
name = "other"

[[cluster.colo]]
name = "c"
`

func TestScan(t *testing.T) {
	var v map[string]any
	if _, err := toml.Decode(doc, &v); err != nil {
		t.Fatalf("the test document is not valid TOML: %v", err)
	}
	l := Scan([]byte(doc))
	for _, tc := range []struct {
		p    Path
		want int
	}{
		{Keys("title"), 2},
		{Keys("multi"), 3},
		{Keys("cluster"), 7},
		{Keys("cluster").Index(0), 7},
		{Keys("cluster").Index(0).Key("name"), 8},
		{Keys("cluster").Index(0).Key("dotted").Key("key"), 9},
		{Keys("cluster").Index(0).Key("when"), 10},
		{Keys("cluster").Index(0).Key("colo").Index(0), 12},
		{Keys("cluster").Index(0).Key("colo").Index(0).Key("tables").Key("my table"), 14},
		{Keys("cluster").Index(0).Key("colo").Index(0).Key("shards").Index(0), 16},
		{Keys("cluster").Index(0).Key("colo").Index(0).Key("shards").Index(0).Key("database"), 16},
		{Keys("cluster").Index(0).Key("colo").Index(0).Key("shards").Index(1), 18},
		{Keys("cluster").Index(0).Key("colo").Index(0).Key("shards").Index(1).Key("database"), 19},
		{Keys("cluster").Index(1).Key("name"), 23},
		{Keys("cluster").Index(1).Key("colo").Index(0).Key("name"), 26},
		// Not in the document: the longest prefix that is.
		{Keys("cluster").Index(1).Key("colo").Index(0).Key("tables"), 25},
		{Keys("nothing"), 0},
	} {
		if got := l.Line(tc.p); got != tc.want {
			t.Errorf("Line(%v) = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := l.FirstLine([]string{"cluster", "colo", "name"}); got != 13 {
		t.Errorf("FirstLine(cluster.colo.name) = %d, want 13", got)
	}
	if got := (Keys("cluster").Index(0).Key("my table")).Name(); got != `cluster."my table"` {
		t.Errorf("Name = %s", got)
	}
}
