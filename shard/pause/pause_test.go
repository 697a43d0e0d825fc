package pause

import (
	"slices"
	"testing"

	"github.com/pgturnstile/pgturnstile/shard"
)

// The PAUSE SHARD registry (shardpause.go): which spans a set of paused
// ranges holds, the queue of waiters and who a RESUME or a RELOAD wakes.
// The waits themselves are covered against real PostgreSQL by
// integration/shard_pause_test.go.

var org = Ref{"app", "org"}

func woken(w *Waiter) bool {
	select {
	case <-w.woken:
		return true
	default:
		return false
	}
}

func queued(sp *Registry) []*Waiter {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []*Waiter
	for w := sp.head; w != nil; w = w.next {
		out = append(out, w)
	}
	return out
}

func TestShardPauseHolds(t *testing.T) {
	var sp Registry
	if sp.set.Load() != nil {
		t.Fatal("zero value: something paused")
	}
	if err := sp.Pause(org, Range{64, 127}); err != nil {
		t.Fatal(err)
	}
	if err := sp.Pause(Ref{"app", "user"}, Range{0, 0}); err != nil {
		t.Fatal(err)
	}
	ps := sp.set.Load()
	span := func(lo, hi uint32) Span { return Span{set: true, colo: "org", lo: lo, hi: hi} }
	for _, tc := range []struct {
		name    string
		cluster string
		t       Span
		want    bool
	}{
		{"inside", "app", span(64, 64), true},
		{"last", "app", span(127, 127), true},
		{"below", "app", span(63, 63), false},
		{"above", "app", span(128, 128), false},
		{"span across the start", "app", span(10, 64), true},
		{"span around", "app", span(0, 255), true},
		{"other colo", "app", Span{set: true, colo: "tenant", lo: 70, hi: 70}, false},
		{"other cluster", "other", span(70, 70), false},
		{"no key", "app", Span{}, false},
		{"every range (scatter, several colos)", "app", Span{set: true, all: true}, true},
		{"every range of another cluster", "other", Span{set: true, all: true}, false},
	} {
		if got := ps.Holds(tc.cluster, tc.t); got != tc.want {
			t.Errorf("%s: holds = %v, want %v", tc.name, got, tc.want)
		}
	}
	var none *Set
	if none.Holds("app", span(70, 70)) {
		t.Error("nil set holds")
	}
}

func TestShardPauseSpanOf(t *testing.T) {
	m := testShardMap(t, true)
	co := m.Cluster("app").Colo("org")
	for _, tc := range []struct {
		d    shard.Decision
		want Span
	}{
		{shard.Decision{Source: shard.SourceLiteral, Colo: co, Logical: 3, LogicalMax: 9}, Span{set: true, colo: "org", lo: 3, hi: 9}},
		{shard.Decision{Source: shard.SourceLiteral, Colo: co, Logical: 3, LogicalMax: 9, ManyColos: true}, Span{set: true, all: true, colo: "org", lo: 3, hi: 9}},
		{shard.Decision{Source: shard.SourceScatter}, Span{set: true, all: true}},
		{shard.Decision{Source: shard.SourceDefault, Database: "app_main"}, Span{}},
		{shard.Decision{Source: shard.SourceTarget, Database: "s0"}, Span{}},
	} {
		if got := SpanOf(tc.d); got != tc.want {
			t.Errorf("SpanOf(%+v) = %+v, want %+v", tc.d, got, tc.want)
		}
	}
	s := Span{set: true, colo: "org", lo: 10, hi: 10}
	s.Widen(Span{})
	s.Widen(Span{set: true, colo: "org", lo: 3, hi: 4})
	if s != (Span{set: true, colo: "org", lo: 3, hi: 10}) {
		t.Errorf("widen: %+v", s)
	}
	s.Widen(Span{set: true, colo: "user", lo: 0, hi: 0})
	if !s.all {
		t.Errorf("widen by another colo: %+v", s)
	}
	var z Span
	z.Widen(Span{set: true, colo: "org", lo: 5, hi: 5})
	if z != (Span{set: true, colo: "org", lo: 5, hi: 5}) {
		t.Errorf("widen of nothing: %+v", z)
	}
}

func TestShardPauseNewlyHeld(t *testing.T) {
	var sp Registry
	if err := sp.Pause(org, Range{64, 127}); err != nil {
		t.Fatal(err)
	}
	ps := sp.set.Load()
	in := Span{set: true, colo: "org", lo: 70, hi: 70}
	out := Span{set: true, colo: "org", lo: 5, hi: 5}
	for _, tc := range []struct {
		name  string
		tx, u Span
		want  bool
	}{
		{"a transaction outside enters the range", out, in, true},
		{"a transaction with no key yet enters it", Span{}, in, true},
		{"a transaction in the range (before the pause) goes on in it", in, Span{set: true, colo: "org", lo: 100, hi: 100}, false},
		{"outside stays outside", out, Span{set: true, colo: "org", lo: 6, hi: 6}, false},
		{"a scatter-wide transaction goes on", Span{set: true, all: true}, in, false},
		{"a statement of every range", out, Span{set: true, all: true}, true},
		{"no key", out, Span{}, false},
	} {
		if got := ps.NewlyHeld("app", tc.tx, tc.u); got != tc.want {
			t.Errorf("%s: newlyHeld = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestShardPauseResume(t *testing.T) {
	var sp Registry
	if err := sp.Pause(org, Range{64, 127}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Range{{64, 64}, {0, 64}, {127, 200}, {0, 255}} {
		if err := sp.Pause(org, r); err == nil {
			t.Errorf("pause %s over 64-127: no error", r)
		}
	}
	if err := sp.Pause(org, Range{0, 63}); err != nil {
		t.Fatal(err)
	}
	if got := sp.ranges[org]; !slices.Equal(got, []Range{{0, 63}, {64, 127}}) {
		t.Errorf("ranges %v, want sorted", got)
	}
	if err := sp.Resume(org, Range{64, 100}, false); err == nil || err.Error() != "range 64-100 of app.org is not paused" {
		t.Errorf("resume of a part: %v", err)
	}
	if err := sp.Resume(Ref{"app", "user"}, Range{}, true); err == nil || err.Error() != "no range of app.user is paused" {
		t.Errorf("resume of nothing: %v", err)
	}
	if err := sp.Resume(org, Range{0, 63}, false); err != nil {
		t.Fatal(err)
	}
	if !sp.IsPaused(org, Range{64, 127}) || sp.IsPaused(org, Range{0, 63}) {
		t.Errorf("after resume of 0-63: %v", sp.ranges)
	}
	if err := sp.Resume(org, Range{}, true); err != nil {
		t.Fatal(err)
	}
	if sp.set.Load() != nil || len(sp.ranges) != 0 {
		t.Errorf("all resumed: set %v, ranges %v", sp.set.Load(), sp.ranges)
	}
}

func TestShardPauseWaitersInOrder(t *testing.T) {
	var sp Registry
	if err := sp.Pause(org, Range{64, 127}); err != nil {
		t.Fatal(err)
	}
	if err := sp.Pause(org, Range{200, 200}); err != nil {
		t.Fatal(err)
	}
	mk := func(lo, hi uint32) *Waiter {
		return &Waiter{cluster: "app", span: Span{set: true, colo: "org", lo: lo, hi: hi}, woken: make(chan struct{}, 1)}
	}
	a, b, c, d := mk(70, 70), mk(200, 200), mk(100, 100), mk(120, 200)
	for _, w := range []*Waiter{a, b, c, d} {
		if !sp.Enqueue(w) {
			t.Fatal("enqueue of a held waiter refused")
		}
	}
	if got := sp.Waiting(); got != 4 {
		t.Errorf("waiting %d, want 4", got)
	}
	// A waiter nothing holds is not queued: it routes again.
	if sp.Enqueue(mk(5, 5)) {
		t.Error("enqueue of a waiter outside the paused ranges")
	}
	snap := sp.Snapshot()[org]
	if len(snap) != 2 || snap[0].waiting != 3 || snap[1].waiting != 2 {
		t.Errorf("snapshot %+v, want 64-127 with 3 waiting, 200 with 2", snap)
	}
	if err := sp.Resume(org, Range{64, 127}, false); err != nil {
		t.Fatal(err)
	}
	// a and c go; d also waits for 200, so stays, behind b.
	if !woken(a) || !woken(c) || woken(b) || woken(d) {
		t.Errorf("woken a %v b %v c %v d %v", woken(a), woken(b), woken(c), woken(d))
	}
	if q := queued(&sp); !slices.Equal(q, []*Waiter{b, d}) {
		t.Errorf("queue after resume: %d waiters", len(q))
	}
	// A waiter whose wait ended (query_wait_timeout) leaves the queue;
	// one already woken cannot be removed.
	if !sp.Remove(b) || sp.Remove(b) || sp.Remove(a) {
		t.Error("remove")
	}
	if err := sp.Resume(org, Range{}, true); err != nil {
		t.Fatal(err)
	}
	if !woken(d) || sp.Waiting() != 0 {
		t.Errorf("after RESUME SHARD app.org: d woken %v, waiting %d", woken(d), sp.Waiting())
	}
}

// testShardMap is a map of cluster app, with colo org (and user when
// withUser), over databases s0 and s1.
func testShardMap(t *testing.T, withUser bool) *shard.Map {
	t.Helper()
	text := `
[[cluster]]
name = "app"
default_database = "app_main"
logical_shards = 256

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [ { range = "0-127", database = "s0" }, { range = "128-255", database = "s1" } ]
`
	if withUser {
		text += `
[[cluster.colo]]
name = "user"
key_type = "bigint"
tables = { users = "id" }
shards = [ { range = "0-255", database = "s1" } ]
`
	}
	m, err := shard.Parse([]byte(text), "shards.toml", []string{"app_main", "s0", "s1"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestShardPauseReload(t *testing.T) {
	var sp Registry
	user := Ref{"app", "user"}
	if err := sp.Pause(org, Range{64, 127}); err != nil {
		t.Fatal(err)
	}
	if err := sp.Pause(user, Range{0, 255}); err != nil {
		t.Fatal(err)
	}
	wo := &Waiter{cluster: "app", span: Span{set: true, colo: "org", lo: 70, hi: 70}, woken: make(chan struct{}, 1)}
	wu := &Waiter{cluster: "app", span: Span{set: true, colo: "user", lo: 9, hi: 9}, woken: make(chan struct{}, 1)}
	sp.Enqueue(wo)
	sp.Enqueue(wu)
	// A RELOAD that keeps both colos keeps both pauses and every waiter.
	sp.Reconcile(testShardMap(t, true))
	if !sp.IsPaused(org, Range{64, 127}) || !sp.IsPaused(user, Range{0, 255}) || sp.Waiting() != 2 {
		t.Fatalf("reload with the same colos: ranges %v, waiting %d", sp.ranges, sp.Waiting())
	}
	// One without colo user: its pause goes and its waiter meets the new
	// map's routing.
	sp.Reconcile(testShardMap(t, false))
	if sp.IsPaused(user, Range{0, 255}) || !sp.IsPaused(org, Range{64, 127}) {
		t.Errorf("reload without colo user: ranges %v", sp.ranges)
	}
	if !woken(wu) || woken(wo) {
		t.Errorf("woken: user's %v, org's %v", woken(wu), woken(wo))
	}
	// No shard file at all: nothing is paused.
	sp.Reconcile(nil)
	if sp.set.Load() != nil || !woken(wo) {
		t.Errorf("reload without a shard file: set %v", sp.set.Load())
	}
}

func TestShardPauseSplitRows(t *testing.T) {
	rows := []Row{{r: Range{10, 19}, waiting: 2}, {r: Range{30, 300}, waiting: 1}}
	got := Split(Range{0, 127}, rows)
	want := []Part{
		{Range: Range{0, 9}},
		{Range: Range{10, 19}, Paused: true, Waiting: 2},
		{Range: Range{20, 29}},
		{Range: Range{30, 127}, Paused: true, Waiting: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("split 0-127: %+v", got)
	}
	if got := Split(Range{128, 255}, nil); !slices.Equal(got, []Part{{Range: Range{128, 255}}}) {
		t.Errorf("unpaused: %+v", got)
	}
	if got := Split(Range{0, 9}, []Row{{r: Range{0, 9}}}); !slices.Equal(got, []Part{{Range: Range{0, 9}, Paused: true}}) {
		t.Errorf("whole: %+v", got)
	}
}
