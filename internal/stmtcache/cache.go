package stmtcache

import (
	"container/list"
	"sync/atomic"
)

// Cache is one server's prepared statements, least recently used first.
// The zero Cache is empty and ready. Its holder (whoever has the server:
// in the pooler, the linked client, under its lock) owns it; only Shown
// may be called by other goroutines.
type Cache struct {
	lru *list.List // of *stmtCopy, front = most recently used
	m   map[*Def]*list.Element
	// n is len(m), for Shown.
	n atomic.Int32
}

// stmtCopy is a statement prepared on a server, with the definition's
// shape epoch when its Parse was sent. A copy older than the definition's
// epoch is stale: some server refused the statement's plan since (after a
// migration changed its result), so this one's plan may be of the old
// shape too. It is still prepared on the server, and the caller closes it
// and prepares it again at its next use there. One server's report makes
// every server's copy stale, lazily: a client that prepares the text
// again after it does not meet the old plan on another server.
type stmtCopy struct {
	def   *Def
	epoch uint64
}

func (c *Cache) init() {
	if c.m == nil {
		c.lru = list.New()
		c.m = map[*Def]*list.Element{}
	}
}

// Defs are the statements the server has, stale or not, in no order.
func (c *Cache) Defs() []*Def {
	out := make([]*Def, 0, len(c.m))
	for d := range c.m {
		out = append(out, d)
	}
	return out
}

// CopyEpoch returns the shape epoch at which the server's copy of d was
// parsed; ok is false when the server lacks d.
func (c *Cache) CopyEpoch(d *Def) (epoch uint64, ok bool) {
	if e, found := c.m[d]; found {
		return e.Value.(*stmtCopy).epoch, true
	}
	return 0, false
}

// Has reports whether the server has d prepared and usable (not stale),
// and if so marks d as the most recently used.
func (c *Cache) Has(d *Def) bool {
	e, ok := c.m[d]
	if !ok || e.Value.(*stmtCopy).epoch < d.Epoch() {
		return false
	}
	c.lru.MoveToFront(e)
	return true
}

// Holds reports whether d is prepared on the server, stale or not.
func (c *Cache) Holds(d *Def) bool {
	_, ok := c.m[d]
	return ok
}

// IsStale reports whether the server has d prepared at an epoch older than
// d's.
func (c *Cache) IsStale(d *Def) bool {
	epoch, ok := c.CopyEpoch(d)
	return ok && epoch < d.Epoch()
}

// MarkStale applies the server's refusal of its copy of d's plan: d's
// epoch is bumped past the copy's (Def.BumpEpoch), which makes this copy
// stale, and every other server's copy parsed before the bump. It reports
// whether this report bumped it. Nothing happens when the server lacks d.
func (c *Cache) MarkStale(d *Def) bool {
	epoch, ok := c.CopyEpoch(d)
	return ok && d.BumpEpoch(epoch)
}

// Add records d as prepared on the server at shape epoch epoch, with a
// reference to it in reg. A d already there is left as it is.
func (c *Cache) Add(reg *Registry, d *Def, epoch uint64) {
	c.init()
	if _, ok := c.m[d]; ok {
		return
	}
	reg.Ref(d)
	c.m[d] = c.lru.PushFront(&stmtCopy{def: d, epoch: epoch})
	c.n.Add(1)
}

// Remove forgets d on the server and gives back the cache's reference.
func (c *Cache) Remove(reg *Registry, d *Def) {
	if e, ok := c.m[d]; ok {
		c.lru.Remove(e)
		delete(c.m, d)
		c.n.Add(-1)
		reg.Release(d)
	}
}

// Oldest returns the least recently used definition, or nil.
func (c *Cache) Oldest() *Def {
	if c.lru == nil {
		return nil
	}
	if e := c.lru.Back(); e != nil {
		return e.Value.(*stmtCopy).def
	}
	return nil
}

// Len is the number of statements on the server; the holder only.
func (c *Cache) Len() int { return len(c.m) }

// Clear forgets every statement (the server dropped them all, or is gone)
// and gives back the cache's references.
func (c *Cache) Clear(reg *Registry) {
	for d := range c.m {
		reg.Release(d)
	}
	c.lru, c.m = nil, nil
	c.n.Store(0)
}

// Shown is the number of statements, for SHOW SERVERS; any goroutine.
func (c *Cache) Shown() int { return int(c.n.Load()) }
