package admission

import (
	"math"
	"testing"
)

func mustTree(t *testing.T, spec TreeSpec) *Tree {
	t.Helper()
	tr, err := NewTree(spec)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func checkAlloc(t *testing.T, name string, got map[string]float64, want map[string]float64) {
	t.Helper()
	for p, w := range want {
		if math.Abs(got[p]-w) > 1e-9 {
			t.Errorf("%s: alloc[%q] = %v, want %v (all: %v)", name, p, got[p], w, got)
		}
	}
}

func TestWaterFillHandCases(t *testing.T) {
	flat := mustTree(t, TreeSpec{Levels: []string{"c"}, Nodes: []NodeSpec{
		{Path: []string{"A"}}, {Path: []string{"B"}},
	}})
	A, B := flat.Leaf([]string{"A"}), flat.Leaf([]string{"B"})

	// S4: A offers 500 % (100 slots), B needs 6 of 20: B gets its demand.
	checkAlloc(t, "S4", WaterFill(flat, 20, map[LeafID]float64{A: 100, B: 6}),
		map[string]float64{"": 20, "c=A": 14, "c=B": 6, "c=other": 0})
	// Both below their share: everyone gets its demand, capacity left idle.
	checkAlloc(t, "underload", WaterFill(flat, 20, map[LeafID]float64{A: 3, B: 4}),
		map[string]float64{"": 7, "c=A": 3, "c=B": 4})
	// B's demand exceeds its fair share of 10: max-min holds it at 10.
	checkAlloc(t, "both over", WaterFill(flat, 20, map[LeafID]float64{A: 100, B: 12}),
		map[string]float64{"c=A": 10, "c=B": 10})

	// S4b: weights 3 : 2 : 1, all backlogged.
	w321 := mustTree(t, TreeSpec{Levels: []string{"c"}, Nodes: []NodeSpec{
		{Path: []string{"A"}, Weight: 3}, {Path: []string{"B"}, Weight: 2}, {Path: []string{"C"}, Weight: 1},
	}})
	d := map[LeafID]float64{}
	for _, v := range []string{"A", "B", "C"} {
		d[w321.Leaf([]string{v})] = 1000
	}
	checkAlloc(t, "S4b", WaterFill(w321, 20, d),
		map[string]float64{"c=A": 10, "c=B": 20.0 / 3, "c=C": 10.0 / 3})
	// Weighted, one small: C needs 1 of its 3.33; A and B split 19 as 3:2.
	d[w321.Leaf([]string{"C"})] = 1
	checkAlloc(t, "S4b small", WaterFill(w321, 20, d),
		map[string]float64{"c=A": 19 * 3.0 / 5, "c=B": 19 * 2.0 / 5, "c=C": 1})

	// T1 / T2: auth (w 3) → {comments, search}; unauth (w 1) → {search}.
	tt := mustTree(t, TreeSpec{Levels: []string{"auth", "endpoint"}, Nodes: []NodeSpec{
		{Path: []string{"auth"}, Weight: 3},
		{Path: []string{"auth", "comments"}},
		{Path: []string{"auth", "search"}},
		{Path: []string{"unauth", "search"}},
	}})
	ac, as, us := tt.Leaf([]string{"auth", "comments"}), tt.Leaf([]string{"auth", "search"}), tt.Leaf([]string{"unauth", "search"})
	checkAlloc(t, "T1", WaterFill(tt, 20, map[LeafID]float64{ac: 1000, as: 1000, us: 1000}),
		map[string]float64{"auth=auth": 15, "auth=auth/endpoint=comments": 7.5, "auth=auth/endpoint=search": 7.5,
			"auth=unauth": 5, "auth=unauth/endpoint=search": 5, "auth=other": 0})
	checkAlloc(t, "T2", WaterFill(tt, 20, map[LeafID]float64{ac: 1000, as: 2, us: 1000}),
		map[string]float64{"auth=auth/endpoint=comments": 13, "auth=auth/endpoint=search": 2, "auth=unauth/endpoint=search": 5})
	// unauth idle: auth takes everything (work conservation).
	checkAlloc(t, "T1 unauth idle", WaterFill(tt, 20, map[LeafID]float64{ac: 1000, as: 1000}),
		map[string]float64{"auth=auth": 20, "auth=auth/endpoint=comments": 10, "auth=unauth": 0})

	// T3: unauthenticated ceiling 0.15 of 20 = 3, flooding; auth needs 4 + 4.
	t3 := mustTree(t, TreeSpec{Levels: []string{"auth", "endpoint"}, Nodes: []NodeSpec{
		{Path: []string{"auth", "comments"}},
		{Path: []string{"auth", "search"}},
		{Path: []string{"unauth"}, Ceiling: 0.15},
	}})
	checkAlloc(t, "T3", WaterFill(t3, 20, map[LeafID]float64{
		t3.Leaf([]string{"auth", "comments"}): 4, t3.Leaf([]string{"auth", "search"}): 4, t3.Leaf([]string{"unauth"}): 1000}),
		map[string]float64{"": 11, "auth=unauth": 3, "auth=auth/endpoint=comments": 4, "auth=auth/endpoint=search": 4})

	// A ceiling rounds up and is at least 1 slot: 0.01 of 20 → 1.
	tiny := mustTree(t, TreeSpec{Levels: []string{"c"}, Nodes: []NodeSpec{{Path: []string{"A"}, Ceiling: 0.01}}})
	checkAlloc(t, "tiny ceiling", WaterFill(tiny, 20, map[LeafID]float64{tiny.Leaf([]string{"A"}): 50}),
		map[string]float64{"c=A": 1})

	// Degenerate inputs.
	checkAlloc(t, "nil tree", WaterFill(nil, 5, map[LeafID]float64{0: 9}), map[string]float64{"": 5})
	checkAlloc(t, "bad leaf", WaterFill(flat, 5, map[LeafID]float64{99: 9, -1: 3}), map[string]float64{"": 0})
	checkAlloc(t, "negative capacity", WaterFill(flat, -3, map[LeafID]float64{A: 9}), map[string]float64{"": 0, "c=A": 0})
}
