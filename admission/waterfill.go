package admission

import "sort"

// WaterFill computes the weighted max-min allocation of capacity among the
// tree's leaves with the given demands (doc.go, "Weighted fair sharing"), keyed by node
// path ("" is the root). A node's demand is the sum of its leaves' demands,
// capped by its ceiling limit (ceil(ceiling × the parent's limit), at least
// 1, as the gate enforces it); the root gets min(capacity, demand) and each
// node's allocation is water-filled among its children by weight. Every
// node appears in the result. Off the hot path: it allocates, O(N log N).
// It is the test oracle of the fair dispatcher and feeds SHOW ADMISSION.
func WaterFill(t *Tree, capacity float64, demand map[LeafID]float64) map[string]float64 {
	if t == nil {
		t = singleLeaf
	}
	if capacity < 0 {
		capacity = 0
	}
	n := len(t.nodes)
	lim := make([]float64, n)
	t.limits(capacity, lim)
	eff := make([]float64, n)
	for l, d := range demand {
		if t.validLeaf(l) && d > 0 {
			eff[t.leafNode[l]] += d
		}
	}
	// Preorder puts children after parents: walk backwards to sum up.
	for i := n - 1; i >= 0; i-- {
		nd := &t.nodes[i]
		if nd.leaf < 0 {
			s := 0.0
			for _, c := range nd.children {
				s += eff[c]
			}
			eff[i] = s
		}
		eff[i] = min(eff[i], lim[i])
	}
	alloc := make([]float64, n)
	alloc[0] = eff[0]
	var order []int32
	for i := range t.nodes {
		nd := &t.nodes[i]
		if nd.leaf >= 0 || alloc[i] <= 0 {
			continue
		}
		order = order[:0]
		wsum := 0.0
		for _, c := range nd.children {
			if eff[c] > 0 {
				order = append(order, c)
				wsum += t.nodes[c].weight
			}
		}
		sort.SliceStable(order, func(a, b int) bool {
			ca, cb := order[a], order[b]
			return eff[ca]/t.nodes[ca].weight < eff[cb]/t.nodes[cb].weight
		})
		remaining := alloc[i]
		for k, c := range order {
			w := t.nodes[c].weight
			fair := remaining * w / wsum
			if eff[c] <= fair {
				alloc[c] = eff[c]
				remaining -= eff[c]
				wsum -= w
				continue
			}
			// Everyone left wants more than its share: split by weight.
			for _, c2 := range order[k:] {
				alloc[c2] = remaining * t.nodes[c2].weight / wsum
			}
			break
		}
	}
	out := make(map[string]float64, n)
	for i := range t.nodes {
		out[t.nodes[i].path] = alloc[i]
	}
	return out
}
