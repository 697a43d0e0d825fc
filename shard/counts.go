package shard

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// Counting decisions, for SHOW ROUTES and the route metrics: by cluster,
// colocation, source and (for refusals) reason. The counters outlive map
// changes: a colocation is counted by its name.

// Counts is every decision counted so far. Safe for concurrent use; each
// client counts through a Tally of its own, which finds its counters
// without the lock once it has seen them. Each counter is striped over
// cache lines, a client's Tally writing one stripe: with one word per
// key, every routed statement on every core would write the same cache
// line, which then travels between the cores (on this 2-core machine the
// increment was 0.3–0.7 % of the pooler's CPU either way; it is the
// many-core machines the stripes are for).
type Counts struct {
	mu sync.Mutex
	m  map[countKey]*stripedCounter
	// nextStripe hands each new Tally its stripe, in turn.
	nextStripe atomic.Uint32
}

// counterStripes is how many cache lines a counter spans.
const counterStripes = 32

// stripedCounter is one counter, the sum of its stripes.
type stripedCounter [counterStripes]struct {
	n atomic.Uint64
	_ [56]byte // the rest of a 64-byte cache line
}

func (sc *stripedCounter) load() (n uint64) {
	for i := range sc {
		n += sc[i].n.Load()
	}
	return n
}

type countKey struct {
	cluster, colo string
	source        Source
	reason        Reason
}

func keyOf(cluster string, d Decision) countKey {
	k := countKey{cluster: cluster, source: d.Source}
	if d.Colo != nil {
		k.colo = d.Colo.Name
	}
	if d.Source == SourceRefused {
		k.reason = d.Reason
	}
	return k
}

// counter returns stripe of k's counter.
func (c *Counts) counter(k countKey, stripe int) *atomic.Uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[countKey]*stripedCounter{}
	}
	sc := c.m[k]
	if sc == nil {
		sc = new(stripedCounter)
		c.m[k] = sc
	}
	return &sc[stripe].n
}

// Count is one counter of a snapshot.
type Count struct {
	Cluster, Colo string
	Source        Source
	Reason        Reason
	N             uint64
}

// Snapshot returns the counters in a stable order (cluster, colo, source,
// reason).
func (c *Counts) Snapshot() []Count {
	c.mu.Lock()
	out := make([]Count, 0, len(c.m))
	for k, n := range c.m {
		out = append(out, Count{Cluster: k.cluster, Colo: k.colo, Source: k.source, Reason: k.reason, N: n.load()})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Count) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Colo, b.Colo),
			cmp.Compare(a.Source, b.Source), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// Tally counts one client's decisions into Counts. Not safe for
// concurrent use.
type Tally struct {
	counts *Counts
	stripe int
	seen   map[countKey]*atomic.Uint64
	// last is the counter of the last decision's key: a client's
	// statements mostly decide alike, and comparing what the key is made
	// of (the colocation by pointer, not its name behind it) is cheaper
	// than making and hashing the key.
	lastCluster string
	lastColo    *Colo
	lastSource  Source
	lastReason  Reason
	last        *atomic.Uint64
}

// NewTally returns a Tally counting into c.
func NewTally(c *Counts) *Tally {
	t := MakeTally(c)
	return &t
}

// MakeTally returns a Tally counting into c, for a struct to hold by
// value: a client's session keeps it beside the fields its routing has
// just read, so that counting a decision does not fetch a line of its
// own from memory (measured in the pooler: the Tally's first load was
// most of its cost when it was allocated apart).
func MakeTally(c *Counts) Tally {
	stripe := int(c.nextStripe.Add(1) % counterStripes)
	return Tally{counts: c, stripe: stripe, seen: map[countKey]*atomic.Uint64{}}
}

// Add counts d, a decision for a statement of cluster.
func (t *Tally) Add(cluster string, d Decision) {
	if d.Source != SourceRefused {
		d.Reason = ReasonNone
	}
	if t.last != nil && d.Colo == t.lastColo && d.Source == t.lastSource && d.Reason == t.lastReason && cluster == t.lastCluster {
		t.last.Add(1)
		return
	}
	k := keyOf(cluster, d)
	n := t.seen[k]
	if n == nil {
		n = t.counts.counter(k, t.stripe)
		t.seen[k] = n
	}
	t.lastCluster, t.lastColo, t.lastSource, t.lastReason, t.last = cluster, d.Colo, d.Source, d.Reason, n
	n.Add(1)
}
