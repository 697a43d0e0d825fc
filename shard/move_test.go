package shard

import (
	"strings"
	"testing"
)

const moveDoc = `# the operator's comment
[[cluster]]
name = "app"
default_database = "app_main"
logical_shards = 16
target_users = ["ops"]

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id", "billing.invoices" = "org_id" }
shards = [
  { range = "0-7", database = "app_s0" },
  { range = "8-15", database = "app_s1" },
]

[[cluster.colo]]
name = "tenant"
key_type = "text"
tables = { tenants = "name" }
shards = [ { range = "0-15", database = "app_main" } ]
`

func TestPlanMove(t *testing.T) {
	cases := []struct {
		mv    Move
		after string
		err   string
	}{
		{Move{"app", "org", 4, 7, "app_s2"}, "0-3 app_s0, 4-7 app_s2, 8-15 app_s1", ""},
		{Move{"app", "org", 2, 3, "app_s2"}, "0-1 app_s0, 2-3 app_s2, 4-7 app_s0, 8-15 app_s1", ""},
		{Move{"app", "org", 8, 15, "app_s0"}, "0-15 app_s0", ""}, // joined with its neighbour
		{Move{"app", "org", 5, 5, "app_s1"}, "0-4 app_s0, 5 app_s1, 6-7 app_s0, 8-15 app_s1", ""},
		{Move{"app", "tenant", 0, 15, "app_t"}, "0-15 app_t", ""},
		{Move{"app", "org", 6, 9, "app_s2"}, "", "lies in app_s0 and app_s1"},
		{Move{"app", "org", 0, 7, "app_s0"}, "", "is in app_s0 already"},
		{Move{"app", "org", 8, 16, "app_s2"}, "", "logical shards 0-15"},
		{Move{"app", "org", 7, 6, "app_s2"}, "", "logical shards 0-15"},
		{Move{"app", "nope", 0, 1, "app_s2"}, "", `no colo "nope"`},
		{Move{"web", "org", 0, 1, "app_s2"}, "", `no cluster "web"`},
		{Move{"app", "org", 0, 1, ""}, "", `database ""`},
	}
	for _, tc := range cases {
		plan, err := PlanMove([]byte(moveDoc), "shards.toml", tc.mv)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.mv, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.mv, err)
			continue
		}
		if got := RangesString(plan.After); got != tc.after {
			t.Errorf("%v: after %s, want %s", tc.mv, got, tc.after)
		}
		// The document holds the new ranges and everything else.
		m, err := ParseStandalone(plan.Doc, "moved")
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.mv, err, plan.Doc)
		}
		cl := m.Cluster("app")
		if cl.DefaultDatabase != "app_main" || cl.LogicalShards != 16 || !cl.MayTarget("ops") || len(cl.Colos()) != 2 {
			t.Errorf("%v: cluster changed: %+v", tc.mv, cl)
		}
		if tb, ok := cl.Table([]byte("billing.invoices")); !ok || tb.Column != "org_id" || tb.Colo.Name != "org" {
			t.Errorf("%v: table lost: %+v %v", tc.mv, tb, ok)
		}
		if got := RangesString(cl.Colo(tc.mv.Colo).Ranges()); got != tc.after {
			t.Errorf("%v: parsed after %s, want %s", tc.mv, got, tc.after)
		}
		for l := tc.mv.First; l <= tc.mv.Last; l++ {
			if db := cl.Colo(tc.mv.Colo).Database(l); db != tc.mv.To {
				t.Errorf("%v: logical %d in %s", tc.mv, l, db)
			}
		}
		// Moving back gives the first ranges again.
		back, err := PlanMove(plan.Doc, "moved", Move{tc.mv.Cluster, tc.mv.Colo, tc.mv.First, tc.mv.Last, plan.From})
		if err != nil {
			t.Fatalf("%v back: %v", tc.mv, err)
		}
		if got, want := RangesString(back.After), RangesString(plan.Before); got != want && tc.mv.First != 8 {
			t.Errorf("%v back: %s, want %s", tc.mv, got, want)
		}
	}
	if _, err := PlanMove([]byte("[[cluster]]\nname = 1\n"), "bad.toml", Move{"app", "org", 0, 1, "x"}); err == nil {
		t.Error("a bad document planned")
	}
}

func TestPublicationSQL(t *testing.T) {
	doc := []byte(`
[[cluster]]
name = "app"
default_database = "main"
logical_shards = 16

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id", "Users" = "org" }
shards = [ { range = "0-15", database = "s0" } ]
`)
	plan, err := PlanMove(doc, "m.toml", Move{Cluster: "app", Colo: "org", First: 4, Last: 7, To: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	want := `CREATE PUBLICATION "move_org_4_7" FOR TABLE public."Users" WHERE (` + LogicalShardSQL(KeyBigint, "org", 16) + ` BETWEEN 4 AND 7),
  public."files" WHERE (` + LogicalShardSQL(KeyBigint, "org_id", 16) + ` BETWEEN 4 AND 7);
`
	if plan.Publication != want {
		t.Fatalf("publication:\n%s\nwant:\n%s", plan.Publication, want)
	}
}

// FuzzPlanMove: whatever the document and the move, PlanMove does not
// panic, and a plan it returns is a map that parses, whose colocation
// holds the moved range on the target and every other logical shard
// where it was.
func FuzzPlanMove(f *testing.F) {
	doc := `
[[cluster]]
name = "app"
default_database = "main"
logical_shards = 16

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [ { range = "0-7", database = "s0" }, { range = "8-15", database = "s1" } ]
`
	f.Add(doc, "app", "org", uint32(4), uint32(7), "s2")
	f.Add(doc, "app", "org", uint32(0), uint32(15), "s2")
	f.Add(doc, "app", "org", uint32(8), uint32(8), "s0")
	f.Add(strings.Replace(doc, "tables = { files = \"org_id\" }", "[[cluster.colo.tables]]\n", 1), "app", "org", uint32(1), uint32(2), "s1")
	f.Add("cluster = 1", "app", "org", uint32(0), uint32(0), "x")
	f.Fuzz(func(t *testing.T, doc, cluster, colo string, first, last uint32, to string) {
		before, err := ParseStandalone([]byte(doc), "f.toml")
		mv := Move{Cluster: cluster, Colo: colo, First: first, Last: last, To: to}
		plan, perr := PlanMove([]byte(doc), "f.toml", mv)
		if perr != nil {
			return
		}
		if err != nil {
			t.Fatalf("PlanMove planned a move on a map that does not parse: %v", err)
		}
		after, err := ParseStandalone(plan.Doc, "moved.toml")
		if err != nil {
			t.Fatalf("the planned map does not parse: %v\n%s", err, plan.Doc)
		}
		old, cur := before.Cluster(cluster).Colo(colo), after.Cluster(cluster).Colo(colo)
		if old == nil || cur == nil {
			t.Fatalf("the colocation is gone:\n%s", plan.Doc)
		}
		for l := uint32(0); l < before.Cluster(cluster).LogicalShards; l++ {
			want := old.Database(l)
			if l >= first && l <= last {
				want = to
			}
			if got := cur.Database(l); got != want {
				t.Fatalf("logical shard %d: %s, want %s\n%s", l, got, want, plan.Doc)
			}
		}
	})
}
