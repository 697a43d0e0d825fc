package admission

import (
	"fmt"
	"math"
	"strings"
)

// OtherValue is the value of the implicit child that every internal node of
// a Tree has: request values not declared at a level land there. Declaring
// a node with this value gives the implicit child a weight and a ceiling.
const OtherValue = "other"

// Tree is the weighted fair-share tree (doc.go, "Weighted fair sharing"): immutable once built, and
// shared by the gates of every pool that uses the same policy.
//
// A node is a leaf when no declared node lies below it. Every internal node
// has an "other" child (weight 1, ceiling 1 unless declared), which is a
// leaf unless declared nodes lie below it too. So the leaves partition all
// possible requests, and clients cannot create nodes.
type Tree struct {
	levels   []string
	nodes    []treeNode // preorder: parents before children; 0 is the root
	leafNode []int32    // LeafID → node index
	// leafPath[l] holds the nodes from the root's child down to leaf l's
	// node (the root itself is left out: the gate's capacity bounds it).
	leafPath [][]int32
	// declaredLeaves counts leaves that are not implicit "other" nodes.
	declaredLeaves int
}

type treeNode struct {
	path     string // "auth=authenticated/endpoint=comments"; "" for the root
	parent   int32  // -1 for the root
	weight   float64
	ceiling  float64
	children []int32          // declaration order, "other" last unless declared
	byValue  map[string]int32 // child by value; nil for leaves
	other    int32            // the "other" child; -1 for leaves
	leaf     LeafID           // -1 for internal nodes
}

// singleLeaf is the tree of a gate configured without one.
var singleLeaf, _ = NewTree(TreeSpec{})

// NewTree validates spec and builds its tree. Weights must be > 0 (0 means
// 1), ceilings in (0,1] (0 means 1), paths non-empty, no longer than Levels,
// with non-empty values, and declared once. Intermediate nodes of a declared
// path are created with weight 1 and ceiling 1 unless declared themselves.
// An empty spec gives a tree with one leaf, the root (LeafID 0, path "").
func NewTree(spec TreeSpec) (*Tree, error) {
	seenLevel := make(map[string]bool, len(spec.Levels))
	for _, l := range spec.Levels {
		if l == "" {
			return nil, fmt.Errorf("admission tree: empty level name")
		}
		if seenLevel[l] {
			return nil, fmt.Errorf("admission tree: level %q declared twice", l)
		}
		seenLevel[l] = true
	}

	// Build a pointer tree first, then flatten it in preorder.
	type bnode struct {
		value    string
		weight   float64
		ceiling  float64
		declared bool
		children []*bnode
		byValue  map[string]*bnode
		implicit bool // an "other" child the tree added, not the policy
	}
	root := &bnode{weight: 1, ceiling: 1, declared: true}
	for i, ns := range spec.Nodes {
		if len(ns.Path) == 0 {
			return nil, fmt.Errorf("admission tree: node %d has an empty path", i)
		}
		if len(ns.Path) > len(spec.Levels) {
			return nil, fmt.Errorf("admission tree: node %q has %d values but there are %d levels", strings.Join(ns.Path, "/"), len(ns.Path), len(spec.Levels))
		}
		w, c := ns.Weight, ns.Ceiling
		if w == 0 {
			w = 1
		}
		if c == 0 {
			c = 1
		}
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("admission tree: node %q: weight %v must be > 0", strings.Join(ns.Path, "/"), ns.Weight)
		}
		if !(c > 0 && c <= 1) {
			return nil, fmt.Errorf("admission tree: node %q: ceiling %v must be in (0, 1]", strings.Join(ns.Path, "/"), ns.Ceiling)
		}
		n := root
		for d, v := range ns.Path {
			if v == "" {
				return nil, fmt.Errorf("admission tree: node %q: empty value for level %q", strings.Join(ns.Path, "/"), spec.Levels[d])
			}
			ch := n.byValue[v]
			if ch == nil {
				ch = &bnode{value: v, weight: 1, ceiling: 1}
				if n.byValue == nil {
					n.byValue = map[string]*bnode{}
				}
				n.byValue[v] = ch
				n.children = append(n.children, ch)
			}
			n = ch
		}
		if n.declared {
			return nil, fmt.Errorf("admission tree: node %q declared twice", strings.Join(ns.Path, "/"))
		}
		n.declared, n.weight, n.ceiling = true, w, c
	}

	t := &Tree{levels: append([]string(nil), spec.Levels...)}
	paths := map[string]bool{}
	var walk func(b *bnode, parent int32, depth int, path string) error
	walk = func(b *bnode, parent int32, depth int, path string) error {
		if paths[path] {
			return fmt.Errorf("admission tree: two nodes print as %q", path)
		}
		paths[path] = true
		idx := int32(len(t.nodes))
		t.nodes = append(t.nodes, treeNode{path: path, parent: parent, weight: b.weight, ceiling: b.ceiling, other: -1, leaf: -1})
		if len(b.children) == 0 {
			t.nodes[idx].leaf = LeafID(len(t.leafNode))
			t.leafNode = append(t.leafNode, idx)
			if !b.implicit {
				t.declaredLeaves++
			}
			return nil
		}
		if b.byValue[OtherValue] == nil {
			o := &bnode{value: OtherValue, weight: 1, ceiling: 1, implicit: true}
			b.children = append(b.children, o)
			b.byValue[OtherValue] = o
		}
		byValue := make(map[string]int32, len(b.children))
		children := make([]int32, 0, len(b.children))
		for _, ch := range b.children {
			p := spec.Levels[depth] + "=" + ch.value
			if path != "" {
				p = path + "/" + p
			}
			ci := int32(len(t.nodes))
			if err := walk(ch, idx, depth+1, p); err != nil {
				return err
			}
			byValue[ch.value] = ci
			children = append(children, ci)
		}
		t.nodes[idx].children = children
		t.nodes[idx].byValue = byValue
		t.nodes[idx].other = byValue[OtherValue]
		return nil
	}
	if err := walk(root, -1, 0, ""); err != nil {
		return nil, err
	}
	t.leafPath = make([][]int32, len(t.leafNode))
	for l, n := range t.leafNode {
		var p []int32
		for ; n > 0; n = t.nodes[n].parent {
			p = append(p, n)
		}
		for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
			p[i], p[j] = p[j], p[i]
		}
		t.leafPath[l] = p
	}
	return t, nil
}

// Leaf maps a request's values to its leaf: values[i] is the value for
// Levels()[i]. A missing, empty or undeclared value selects "other" at that
// level, and a leaf ends the walk (everything below "other" is "other").
// It does not allocate.
func (t *Tree) Leaf(values []string) LeafID {
	n := &t.nodes[0]
	for i := 0; n.leaf < 0; i++ {
		ci := n.other
		if i < len(values) && values[i] != "" {
			if c, ok := n.byValue[values[i]]; ok {
				ci = c
			}
		}
		n = &t.nodes[ci]
	}
	return n.leaf
}

// LeafByPath returns the leaf whose LeafPath is path.
func (t *Tree) LeafByPath(path string) (LeafID, bool) {
	for l, n := range t.leafNode {
		if t.nodes[n].path == path {
			return LeafID(l), true
		}
	}
	return 0, false
}

// LeafPath names a leaf as "level=value/level=value" from the root down
// ("" for the single leaf of a tree without levels, "?" for an unknown id).
func (t *Tree) LeafPath(id LeafID) string {
	if id < 0 || int(id) >= len(t.leafNode) {
		return "?"
	}
	return t.nodes[t.leafNode[id]].path
}

// Leaves is the number of leaves; LeafIDs are 0 … Leaves()-1.
func (t *Tree) Leaves() int { return len(t.leafNode) }

// DeclaredLeaves counts the leaves the policy declared, leaving out the
// implicit "other" ones (at least 1). It is what the gate slices its
// capacity by when it decides whether fairness is meaningful: the "other"
// leaves catch stray tags and would otherwise switch fairness off for any
// tree with a few declared categories.
func (t *Tree) DeclaredLeaves() int { return max(t.declaredLeaves, 1) }

// Levels returns a copy of the level names, from the root down.
func (t *Tree) Levels() []string { return append([]string(nil), t.levels...) }

// validLeaf reports whether id names a leaf of t.
func (t *Tree) validLeaf(id LeafID) bool { return id >= 0 && int(id) < len(t.leafNode) }

// limits writes into lim each node's hard cap for a gate of the given
// capacity: the root gets capacity; a node with ceiling c < 1 gets
// ceil(c × its parent's cap), at least 1 and at most the parent's cap; a
// node with ceiling 1 inherits the parent's cap.
func (t *Tree) limits(capacity float64, lim []float64) {
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.parent < 0 {
			lim[i] = capacity
			continue
		}
		pl := lim[n.parent]
		if n.ceiling >= 1 {
			lim[i] = pl
			continue
		}
		// The epsilon keeps 0.3 × 10 at 3 rather than ceil(3.0000000000000004).
		l := math.Max(1, math.Ceil(n.ceiling*pl-1e-9))
		lim[i] = math.Min(l, pl)
	}
}
