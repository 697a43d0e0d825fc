package cancelpeer

import (
	"net"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The cancel key carries the peer id as PgBouncer encodes it: bytes 1-2
// little-endian, the two low bits of byte 7 set (the forwarding TTL), the
// sign bit of byte 0 cleared; without peering only the sign bit is fixed.
func TestKeyCarriesPeerID(t *testing.T) {
	for _, id := range []int{1, 2, 255, 256, 300, 16383} {
		for range 20 {
			key := [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFC}
			Encode(&key, id)
			if key[1] != byte(id) || key[2] != byte(id>>8) || Owner(key) != id {
				t.Fatalf("peer %d: key % x", id, key)
			}
			if key[7]&ttlMask != 3 || key[0]&0x80 != 0 {
				t.Fatalf("peer %d: TTL or sign bit wrong: % x", id, key)
			}
		}
	}
	key := [8]byte{0xFF, 0xAA, 0xBB, 0, 0, 0, 0, 0}
	Encode(&key, 0)
	if key != [8]byte{0x7F, 0xAA, 0xBB, 0, 0, 0, 0, 0} {
		t.Errorf("peering off: % x", key)
	}
}

// Each forward takes one from the TTL, and none is taken past zero; a key
// of our own is looked up with its TTL full again.
func TestHopAndOwn(t *testing.T) {
	key := [8]byte{0, 2, 0, 0, 0, 0, 0, 0x67}
	for want := byte(0x66); want >= 0x64; want-- {
		if !Hop(&key) || key[7] != want {
			t.Fatalf("hop: % x, want byte 7 %#x", key, want)
		}
	}
	if Hop(&key) || key[7] != 0x64 {
		t.Fatalf("hop past zero: % x", key)
	}
	if k := Own(key); k[7] != 0x67 {
		t.Errorf("Own: % x", k)
	}
}

func TestAddress(t *testing.T) {
	for _, tc := range []struct {
		peer          config.Peer
		network, addr string
	}{
		{config.Peer{Host: "10.1.2.3", Port: 7001}, "tcp", "10.1.2.3:7001"},
		{config.Peer{Host: "::1", Port: 7001}, "tcp", "[::1]:7001"},
		{config.Peer{Host: "/run/pgb3", Port: 7002}, "unix", "/run/pgb3/.s.PGSQL.7002"},
	} {
		if n, a := Address(&tc.peer); n != tc.network || a != tc.addr {
			t.Errorf("%+v: %s %s, want %s %s", tc.peer, n, a, tc.network, tc.addr)
		}
	}
}

// Send writes the CancelRequest as it came and returns when the peer hangs
// up; with the one slot of pool_size=1 taken, a second request gives up at
// its deadline with ErrWaitTimeout, and nothing stays counted.
func TestSendBoundedBySize(t *testing.T) {
	var pr Pools
	peer := &config.Peer{Host: "10.0.0.1", Port: 7001}
	got := make(chan [8]byte, 2)
	hangUp := make(chan struct{})
	dial := func(network, address string, _ time.Duration) (net.Conn, error) {
		ours, theirs := net.Pipe()
		go func() {
			defer theirs.Close()
			su, err := wire.ReadStartup(theirs)
			if err == nil && su.Kind == wire.CancelRequest {
				got <- su.CancelKey
			}
			<-hangUp
		}()
		return ours, nil
	}
	key := [8]byte{1, 2, 0, 3, 4, 5, 6, 3}
	first := make(chan error, 1)
	go func() { first <- pr.Send(2, peer, 1, key, time.Now().Add(time.Minute), dial) }()
	if k := <-got; k != key {
		t.Fatalf("sent % x, want % x", k, key)
	}
	// The peer has read the request; Send counts it active once its
	// write returns, which may be a moment later.
	want := admin.PeerPool{PeerID: 2, ClActiveCancelReq: 1, SvActiveCancel: 1}
	rows := pr.Rows()
	for deadline := time.Now().Add(10 * time.Second); (len(rows) != 1 || rows[0] != want) && time.Now().Before(deadline); rows = pr.Rows() {
		time.Sleep(time.Millisecond)
	}
	if len(rows) != 1 || rows[0] != want {
		t.Errorf("in flight: %+v", rows)
	}
	if err := pr.Send(2, peer, 1, key, time.Now().Add(50*time.Millisecond), dial); err != ErrWaitTimeout {
		t.Errorf("second request: %v, want ErrWaitTimeout", err)
	}
	close(hangUp)
	if err := <-first; err != nil {
		t.Errorf("first request: %v", err)
	}
	if rows := pr.Rows(); len(rows) != 1 || rows[0] != (admin.PeerPool{PeerID: 2}) || pr.Count() != 1 {
		t.Errorf("after: %+v", rows)
	}
}
