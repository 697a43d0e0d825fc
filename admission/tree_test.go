package admission

import (
	"strings"
	"testing"
)

// t1Spec is the tree of §1.3's T1/T2: auth (w 3) → {comments, search},
// unauthenticated (w 1) → {search}.
func t1Spec() TreeSpec {
	return TreeSpec{
		Levels: []string{"auth", "endpoint"},
		Nodes: []NodeSpec{
			{Path: []string{"authenticated"}, Weight: 3},
			{Path: []string{"authenticated", "comments"}},
			{Path: []string{"authenticated", "search"}},
			{Path: []string{"unauthenticated", "search"}, Ceiling: 0.3},
		},
	}
}

func TestTreeShape(t *testing.T) {
	tr, err := NewTree(t1Spec())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := 0; l < tr.Leaves(); l++ {
		got = append(got, tr.LeafPath(LeafID(l)))
	}
	want := []string{
		"auth=authenticated/endpoint=comments",
		"auth=authenticated/endpoint=search",
		"auth=authenticated/endpoint=other",
		"auth=unauthenticated/endpoint=search",
		"auth=unauthenticated/endpoint=other",
		"auth=other",
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("leaves\n got %v\nwant %v", got, want)
	}
	if tr.nodes[tr.leafNode[0]].parent != 1 || tr.nodes[1].weight != 3 {
		t.Fatalf("declared weight lost: %+v", tr.nodes[1])
	}
	// The implicit intermediate node has weight 1.
	un := tr.nodes[tr.nodes[tr.leafNode[3]].parent]
	if un.path != "auth=unauthenticated" || un.weight != 1 || un.ceiling != 1 {
		t.Fatalf("implicit node %+v", un)
	}
	if lv := tr.Levels(); len(lv) != 2 || lv[0] != "auth" {
		t.Fatalf("levels %v", lv)
	}
	if p := tr.leafPath[0]; len(p) != 2 {
		t.Fatalf("leaf path %v", p)
	}
	for l := 0; l < tr.Leaves(); l++ {
		id, ok := tr.LeafByPath(tr.LeafPath(LeafID(l)))
		if !ok || id != LeafID(l) {
			t.Fatalf("LeafByPath(%q) = %d %v", tr.LeafPath(LeafID(l)), id, ok)
		}
	}
}

func TestTreeLeafLookup(t *testing.T) {
	tr, err := NewTree(t1Spec())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		values []string
		want   string
	}{
		{[]string{"authenticated", "comments"}, "auth=authenticated/endpoint=comments"},
		{[]string{"authenticated", "search"}, "auth=authenticated/endpoint=search"},
		{[]string{"authenticated", "nope"}, "auth=authenticated/endpoint=other"},
		{[]string{"authenticated", ""}, "auth=authenticated/endpoint=other"},
		{[]string{"authenticated"}, "auth=authenticated/endpoint=other"},
		{[]string{"unauthenticated", "comments"}, "auth=unauthenticated/endpoint=other"},
		{[]string{"bot", "search"}, "auth=other"}, // below "other" everything is "other"
		{[]string{"", "search"}, "auth=other"},
		{nil, "auth=other"},
		{[]string{"authenticated", "comments", "extra"}, "auth=authenticated/endpoint=comments"},
	}
	for _, c := range cases {
		if got := tr.LeafPath(tr.Leaf(c.values)); got != c.want {
			t.Errorf("Leaf(%q) = %s, want %s", c.values, got, c.want)
		}
	}
	vals := []string{"unauthenticated", "search"}
	if n := testing.AllocsPerRun(1000, func() { tr.Leaf(vals) }); n != 0 {
		t.Fatalf("Leaf allocates %v times", n)
	}
}

func TestTreeEmpty(t *testing.T) {
	for _, spec := range []TreeSpec{{}, {Levels: []string{"auth"}}} {
		tr, err := NewTree(spec)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Leaves() != 1 || tr.Leaf([]string{"x"}) != 0 || tr.LeafPath(0) != "" {
			t.Fatalf("%+v: leaves=%d path=%q", spec, tr.Leaves(), tr.LeafPath(0))
		}
	}
}

func TestTreeDeclaredOther(t *testing.T) {
	tr, err := NewTree(TreeSpec{Levels: []string{"auth"}, Nodes: []NodeSpec{
		{Path: []string{"other"}, Weight: 2, Ceiling: 0.5},
		{Path: []string{"authenticated"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Leaves() != 2 {
		t.Fatalf("leaves %d", tr.Leaves())
	}
	l := tr.Leaf([]string{"zzz"})
	n := tr.nodes[tr.leafNode[l]]
	if n.path != "auth=other" || n.weight != 2 || n.ceiling != 0.5 {
		t.Fatalf("declared other: %+v", n)
	}
}

func TestTreeValidation(t *testing.T) {
	bad := []TreeSpec{
		{Levels: []string{"a", "a"}},
		{Levels: []string{""}},
		{Levels: []string{"a"}, Nodes: []NodeSpec{{Path: nil}}},
		{Levels: []string{"a"}, Nodes: []NodeSpec{{Path: []string{"x", "y"}}}},
		{Nodes: []NodeSpec{{Path: []string{"x"}}}},
		{Levels: []string{"a"}, Nodes: []NodeSpec{{Path: []string{""}}}},
		{Levels: []string{"a"}, Nodes: []NodeSpec{{Path: []string{"x"}, Weight: -1}}},
		{Levels: []string{"a"}, Nodes: []NodeSpec{{Path: []string{"x"}, Ceiling: 1.5}}},
		{Levels: []string{"a"}, Nodes: []NodeSpec{{Path: []string{"x"}, Ceiling: -0.1}}},
		{Levels: []string{"a"}, Nodes: []NodeSpec{{Path: []string{"x"}}, {Path: []string{"x"}}}},
		{Levels: []string{"a", "b"}, Nodes: []NodeSpec{{Path: []string{"x", "y"}}, {Path: []string{"x", "y"}}}},
		// Two nodes that would print the same path.
		{Levels: []string{"a", "b"}, Nodes: []NodeSpec{{Path: []string{"x/b=y"}}, {Path: []string{"x", "y"}}}},
	}
	for i, s := range bad {
		if _, err := NewTree(s); err == nil {
			t.Errorf("spec %d (%+v) accepted", i, s)
		}
	}
	// A node declared after an implicit parent is fine.
	if _, err := NewTree(TreeSpec{Levels: []string{"a", "b"}, Nodes: []NodeSpec{
		{Path: []string{"x", "y"}}, {Path: []string{"x"}, Weight: 2},
	}}); err != nil {
		t.Fatal(err)
	}
}

func TestTreeLimits(t *testing.T) {
	tr, err := NewTree(TreeSpec{Levels: []string{"a", "b"}, Nodes: []NodeSpec{
		{Path: []string{"x"}, Ceiling: 0.3},
		{Path: []string{"x", "y"}, Ceiling: 0.5},
		{Path: []string{"x", "z"}, Ceiling: 0.01},
	}})
	if err != nil {
		t.Fatal(err)
	}
	lim := make([]float64, len(tr.nodes))
	tr.limits(10, lim)
	byPath := map[string]float64{}
	for i, n := range tr.nodes {
		byPath[n.path] = lim[i]
	}
	want := map[string]float64{"": 10, "a=x": 3, "a=x/b=y": 2, "a=x/b=z": 1, "a=x/b=other": 3, "a=other": 10}
	for p, w := range want {
		if byPath[p] != w {
			t.Errorf("limit %q = %v, want %v", p, byPath[p], w)
		}
	}
}
