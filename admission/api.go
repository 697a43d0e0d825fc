package admission

import (
	"fmt"
	"time"
)

// This file is the contract between the gate (gate.go, tree.go), the
// classifier (admission/classify), the simulations (admission/sim) and the
// pooler. Change a signature here only together with every user.

// Clock is the time source of a Gate. Production uses SystemClock; tests and
// simulations inject a fake so that every decision is reproducible.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or, for a fake clock, when
	// time is advanced past d) unless the returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call; false if it already ran or was stopped.
	Stop() bool
}

// LeafID names a leaf of a category Tree. 0 is the tree's first leaf; a tree
// without levels has exactly one leaf, 0.
type LeafID int32

// Class is what a transaction is admitted as: a priority tier (0 is the most
// important) and a category leaf of the gate's Tree.
type Class struct {
	Priority int
	Leaf     LeafID
}

// TreeSpec declares the weighted fair-share tree. Levels are its dimensions
// from the root down (e.g. "auth", "endpoint"); every declared node has one
// value per level down to its depth. Values not declared at a level fall into
// an implicit "other" child there (weight 1, ceiling 1), so clients cannot
// create nodes.
type TreeSpec struct {
	Levels []string
	Nodes  []NodeSpec
}

// NodeSpec is one declared node.
type NodeSpec struct {
	// Path holds one value per level from the root, len ≤ len(Levels).
	Path []string
	// Weight is the node's share among its siblings; 0 means 1.
	Weight float64
	// Ceiling caps the node's tickets at this fraction of its parent's
	// capacity even when capacity is idle; 0 means 1 (no cap).
	Ceiling float64
}

// Reason says why a request was shed.
type Reason uint8

const (
	ReasonFIFOTimeout  Reason = iota + 1 // waited the long timeout (queue healthy)
	ReasonLIFOTimeout                    // waited the short timeout (queue standing, LIFO mode)
	ReasonZeroCapacity                   // no capacity and none coming (pool closed); never the top tier
)

func (r Reason) String() string {
	switch r {
	case ReasonFIFOTimeout:
		return "fifo_timeout"
	case ReasonLIFOTimeout:
		return "lifo_timeout"
	case ReasonZeroCapacity:
		return "zero_capacity"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// ShedError is returned by Acquire (or passed to a Submit callback) when the
// gate refuses a request. The pooler turns it into an ERROR 53000 with a
// machine-readable DETAIL; the client stays connected.
type ShedError struct {
	Reason     Reason
	Class      Class
	Waited     time.Duration
	RetryAfter time.Duration // a hint for client backoff
}

func (e *ShedError) Error() string {
	return fmt.Sprintf("admission: shed (%s) priority %d after %s", e.Reason, e.Class.Priority, e.Waited)
}

// The Gate's surface (gate.go, tree.go):
//
//	func NewGate(cfg Config, capacity int) *Gate
//	func (g *Gate) Acquire(ctx context.Context, c Class) (Ticket, error)
//	func (g *Gate) Submit(c Class, done func(Ticket, error)) *Request
//	func (g *Gate) Cancel(r *Request) bool
//	func (g *Gate) Release(t Ticket)
//	func (g *Gate) SetCapacity(n int)
//	func (g *Gate) SetPool(capacity, loggingIn int)
//	func (g *Gate) Capacity() int
//	func (g *Gate) Waiting() int
//	func (g *Gate) Snapshot() Snapshot
//	func NewTree(spec TreeSpec) (*Tree, error)
//	func (t *Tree) Leaf(values []string) LeafID
//	func (t *Tree) LeafPath(id LeafID) string
//	func WaterFill(t *Tree, capacity float64, demand map[LeafID]float64) map[string]float64
