package shard

import (
	"sync"
	"testing"
)

func TestCounts(t *testing.T) {
	cl := exampleCluster(t, nil)
	org := cl.Colo("org")
	var c Counts
	var wg sync.WaitGroup
	// More tallies than a counter has stripes: some share one.
	for range counterStripes + 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ta := NewTally(&c)
			for range 100 {
				ta.Add("app", Decision{Source: SourceLiteral, Database: "s0", Colo: org})
				ta.Add("app", Decision{Source: SourceDefault, Database: "main"})
				ta.Add("app", refused(ReasonOr, nil, ""))
			}
		}()
	}
	wg.Wait()
	got := c.Snapshot()
	want := []Count{
		{Cluster: "app", Source: SourceDefault, N: 100 * (counterStripes + 8)},
		{Cluster: "app", Source: SourceRefused, Reason: ReasonOr, N: 100 * (counterStripes + 8)},
		{Cluster: "app", Colo: "org", Source: SourceLiteral, N: 100 * (counterStripes + 8)},
	}
	if len(got) != len(want) {
		t.Fatalf("Snapshot = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// A warm tally counts without allocating.
	ta := NewTally(&c)
	d := Decision{Source: SourceParam, Database: "s1", Colo: org}
	ta.Add("app", d)
	if n := testing.AllocsPerRun(100, func() { ta.Add("app", d) }); n != 0 {
		t.Errorf("Add allocates %.1f times", n)
	}
}
