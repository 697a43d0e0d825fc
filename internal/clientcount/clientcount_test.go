package clientcount

import (
	"sync"
	"testing"
)

// TestCounts: a client counts once per database and user whatever the
// number of takes, a release uncounts it (twice is harmless), and the
// counts of clients on many goroutines add up.
func TestCounts(t *testing.T) {
	var c Counts
	var a, b Entry
	if n := c.TakeDB(&a, "app"); n != 1 {
		t.Fatalf("first take: %d", n)
	}
	if n := c.TakeDB(&a, "other"); n != 1 {
		t.Fatalf("a second take counts the first database again: %d", n)
	}
	if n := c.TakeDB(&b, "app"); n != 2 {
		t.Fatalf("second client: %d", n)
	}
	c.TakeUser(&a, "alice")
	c.TakeUser(&a, "alice")
	byDB, byUser := c.Snapshot()
	if byDB["app"] != 2 || len(byDB) != 1 || byUser["alice"] != 1 {
		t.Fatalf("snapshot %v %v", byDB, byUser)
	}
	c.Release(&a)
	c.Release(&a)
	byDB, byUser = c.Snapshot()
	if byDB["app"] != 1 || len(byUser) != 0 {
		t.Fatalf("after release %v %v", byDB, byUser)
	}
	c.Release(&b)
	if byDB, _ = c.Snapshot(); len(byDB) != 0 {
		t.Fatalf("all released: %v", byDB)
	}

	var wg sync.WaitGroup
	es := make([]Entry, 100)
	for i := range es {
		wg.Add(1)
		go func() { defer wg.Done(); c.TakeDB(&es[i], "app"); c.TakeUser(&es[i], "u") }()
	}
	wg.Wait()
	if byDB, byUser = c.Snapshot(); byDB["app"] != 100 || byUser["u"] != 100 {
		t.Fatalf("concurrent %v %v", byDB, byUser)
	}
}
