//go:build linux

package netpoll

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestPick: a Conn goes to the first poller before its own with room,
// leaves a saturated poller for the first with room after it, and stays
// in the band between; a poller idle for long counts as empty.
func TestPick(t *testing.T) {
	now := 100 * loadWindow
	mk := func(loads ...int64) []*poller {
		ps := make([]*poller, len(loads))
		for i, l := range loads {
			ps[i] = &poller{idx: i}
			ps[i].load.Store(l)
			ps[i].loadAt.Store(now - loadWindow)
		}
		return ps
	}
	for _, tc := range []struct {
		loads []int64
		from  int
		want  int // -1: stay
	}{
		{[]int64{100, 100}, 1, 0},       // fill the first
		{[]int64{100, 100}, 0, -1},      // the first stays
		{[]int64{700, 100}, 1, -1},      // the first is in the band: no room
		{[]int64{950, 100}, 0, 1},       // saturated: spill to the next with room
		{[]int64{950, 700, 100}, 0, 2},  // the next has no room: the one after
		{[]int64{950, 950, 950}, 1, -1}, // nowhere with room
		{[]int64{800, 300, 950}, 2, 1},  // from the last, to the first with room
		{[]int64{890, 100}, 0, -1},      // busy, not saturated
	} {
		ps := mk(tc.loads...)
		got := pick(ps, ps[tc.from], now)
		if tc.want < 0 && got != nil || tc.want >= 0 && got != ps[tc.want] {
			t.Errorf("loads %v, from %d: got %v, want %d", tc.loads, tc.from, got, tc.want)
		}
	}
	// A window ended long ago: the poller has been idle since.
	ps := mk(950, 100)
	ps[0].loadAt.Store(now - 2*loadStale)
	if got := pick(ps, ps[1], now); got != ps[0] {
		t.Errorf("an idle poller's old load kept it from taking a Conn")
	}
}

// TestMoveKeepsEventsAndPosts: a Conn on the loop moved to another
// poller by its handler, back and forth, while its peer writes: every
// byte is read, by one handler at a time (the race detector checks the
// unguarded count), and a Post made to the old poller reaches the Conn.
func TestMoveKeepsEventsAndPosts(t *testing.T) {
	c, peer := acceptPair(t)
	a := c.p.Load()
	b, err := startPoller(1)
	if err != nil {
		t.Fatal(err)
	}
	var (
		got, posts int // the handler's alone
		total      atomic.Int64
		postsSeen  atomic.Int64
		moves      atomic.Int64
	)
	buf := make([]byte, 4096)
	h := func(ev uint32) {
		if ev == EvPost {
			posts++
			postsSeen.Store(int64(posts))
		}
		for {
			n, again, err := c.TryRead(buf)
			if err != nil || again || n == 0 {
				break
			}
			got += n
		}
		total.Store(int64(got))
		other := a
		if c.p.Load() == a {
			other = b
		}
		if c.move(c.p.Load(), other) {
			moves.Add(1)
		}
	}
	c.SetHandler(&h)
	defer c.SetHandler(nil)
	const want = 200 * 64
	msg := make([]byte, 64)
	for i := 0; i < 200; i++ {
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 {
			c.Post()
			time.Sleep(time.Millisecond)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for total.Load() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := total.Load(); n != want || moves.Load() == 0 {
		t.Fatalf("read %d bytes of %d, moving %d times", n, want, moves.Load())
	}
	// A Post queued on the poller c has left is sent on to its own.
	before := postsSeen.Load()
	old := a
	if c.p.Load() == a {
		old = b
	}
	c.loop.posted.Store(true)
	old.postMu.Lock()
	old.posts = append(old.posts, c)
	old.postMu.Unlock()
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	if _, err := syscall.Write(old.efd, one); err != nil {
		t.Fatal(err)
	}
	for postsSeen.Load() == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if postsSeen.Load() == before {
		t.Fatal("a Post made to the old poller never ran")
	}
	// The peer's close reaches the Conn where it is now.
	peer.Close()
	for time.Now().Before(deadline) {
		if c.hup.Load() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the peer's close never reached the moved Conn")
}
