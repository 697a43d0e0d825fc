package pooler

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/internal/cancelpeer"
	"github.com/pgturnstile/pgturnstile/wire"
)

// A client of a process with peer_id gets a key that names it, with a
// full TTL and a positive "PID" half (the layout: internal/cancelpeer).
func TestNewCancelKeyCarriesPeerID(t *testing.T) {
	svc := newTestService(t)
	svc.Apply(parseTestConfig(t, "[pgbouncer]\nauth_type = any\npeer_id = 300\n"), true)
	for range 20 {
		var k [8]byte
		if err := svc.newCancelKey(&k); err != nil {
			t.Fatal(err)
		}
		if cancelpeer.Owner(k) != 300 || k[7]&3 != 3 || k[0]&0x80 != 0 {
			t.Fatalf("newCancelKey: % x", k)
		}
	}
}

// peerTest is a Service with peer_id 1 whose dials of peers go to an
// in-process fake: each dial is recorded and answered by a goroutine that
// reads the CancelRequest, reports it, and closes when release is closed.
type peerTest struct {
	svc     *Service
	log     *syncBuffer
	dials   chan string   // network + " " + address of each dial
	got     chan [8]byte  // the keys of the CancelRequests received
	release chan struct{} // closing it lets the fake peers hang up
}

func newPeerTest(t *testing.T, ini string) *peerTest {
	t.Helper()
	pt := &peerTest{log: &syncBuffer{}, dials: make(chan string, 16), got: make(chan [8]byte, 16), release: make(chan struct{})}
	svc, err := New(parseTestConfig(t, ini), slog.New(slog.NewTextHandler(pt.log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	svc.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		pt.dials <- network + " " + address
		ours, theirs := net.Pipe()
		go func() {
			defer theirs.Close()
			su, err := wire.ReadStartup(theirs)
			if err != nil || su.Kind != wire.CancelRequest {
				return
			}
			pt.got <- su.CancelKey
			<-pt.release
		}()
		return ours, nil
	}
	pt.svc = svc
	return pt
}

func (pt *peerTest) request(key [8]byte) { pt.svc.cancelRequest(&client{svc: pt.svc, id: 7}, key) }

const peerIni = `[pgbouncer]
auth_type = any
peer_id = 1
cancel_wait_timeout = 30
[peers]
1 = host=/tmp/self port=7000
2 = host=10.1.2.3 port=7001 pool_size=1
3 = host=/run/pgb3 port=7002
`

// A cancel request whose key carries another peer's id is forwarded to
// that peer's address as it came, with one forward less in its TTL; a
// Unix socket host is dialled as HOST/.s.PGSQL.PORT.
func TestForwardCancelToPeer(t *testing.T) {
	pt := newPeerTest(t, peerIni)
	close(pt.release)
	for _, tc := range []struct {
		key  [8]byte
		dial string
	}{
		{[8]byte{0x11, 2, 0, 0x22, 0x33, 0x44, 0x55, 0x67}, "tcp 10.1.2.3:7001"},
		{[8]byte{0x11, 3, 0, 0x22, 0x33, 0x44, 0x55, 0x66}, "unix /run/pgb3/.s.PGSQL.7002"},
	} {
		pt.request(tc.key)
		if d := <-pt.dials; d != tc.dial {
			t.Errorf("dialled %q, want %q", d, tc.dial)
		}
		want := tc.key
		want[7]--
		if got := <-pt.got; got != want {
			t.Errorf("forwarded % x, want % x", got, want)
		}
	}
	rows := pt.svc.Console().(admin.PeerPools).PeerPools()
	if len(rows) != 2 || rows[0] != (admin.PeerPool{PeerID: 2}) || rows[1] != (admin.PeerPool{PeerID: 3}) {
		t.Errorf("SHOW PEER_POOLS after: %+v", rows)
	}
	if l := pt.svc.Console().Lists(); l.Peers != 3 || l.PeerPools != 2 {
		t.Errorf("SHOW LISTS: peers %d, peer_pools %d", l.Peers, l.PeerPools)
	}
}

// A request with no TTL left (a loop in [peers]) and one for a peer not in
// [peers] are dropped with PgBouncer's lines, nothing dialled; a key of our
// own id is never forwarded, whatever its TTL.
func TestForwardCancelRefused(t *testing.T) {
	pt := newPeerTest(t, peerIni)
	close(pt.release)
	pt.request([8]byte{0x11, 2, 0, 0, 0, 0, 0, 0x64})
	pt.request([8]byte{0x11, 9, 0, 0, 0, 0, 0, 0x67})
	pt.request([8]byte{0x11, 1, 0, 0, 0, 0, 0, 0x64})
	select {
	case d := <-pt.dials:
		t.Fatalf("dialled %s", d)
	default:
	}
	for _, want := range []string{
		"closing because: failed to forward cancel request because its TTL was exhausted",
		"closing because: could not find peer to forward request to",
	} {
		if !strings.Contains(pt.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, pt.log)
		}
	}
}

// A peer's pool_size bounds the requests in flight to it: with pool_size=1
// a second request waits (cl_waiting_cancel_req) until the first one's
// peer hung up (cl_active_cancel_req, sv_active_cancel), then goes.
func TestForwardCancelPoolSize(t *testing.T) {
	pt := newPeerTest(t, peerIni)
	con := pt.svc.Console().(admin.PeerPools)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { pt.request([8]byte{byte(i), 2, 0, 0, 0, 0, 0, 3}) })
	}
	<-pt.got
	want := admin.PeerPool{PeerID: 2, ClActiveCancelReq: 1, ClWaitingCancelReq: 1, SvActiveCancel: 1}
	waitFor(t, "one sent, one waiting", func() bool {
		rows := con.PeerPools()
		return len(rows) == 1 && rows[0] == want
	})
	select {
	case <-pt.got:
		t.Fatal("a second request went past pool_size=1")
	default:
	}
	close(pt.release)
	<-pt.got
	wg.Wait()
	if rows := con.PeerPools(); len(rows) != 1 || rows[0] != (admin.PeerPool{PeerID: 2}) {
		t.Errorf("after: %+v", rows)
	}
}

// RELOAD applies [peers]: a peer removed is dropped with PgBouncer's
// warning, its pool with it, and requests for it are no longer forwarded;
// SHOW PEERS lists what is configured.
func TestReloadDropsPeer(t *testing.T) {
	pt := newPeerTest(t, peerIni)
	close(pt.release)
	pt.request([8]byte{0, 3, 0, 0, 0, 0, 0, 3})
	<-pt.dials
	if err := pt.svc.Apply(parseTestConfig(t, strings.Replace(peerIni, "3 = host=/run/pgb3 port=7002\n", "", 1)), true); err != nil {
		t.Fatal(err)
	}
	if want := "dropping peer 3 as it does not exist anymore"; !strings.Contains(pt.log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, pt.log)
	}
	if rows := pt.svc.Console().(admin.PeerPools).PeerPools(); len(rows) != 0 {
		t.Errorf("SHOW PEER_POOLS: %+v", rows)
	}
	pt.request([8]byte{0, 3, 0, 0, 0, 0, 0, 3})
	if want := "could not find peer to forward request to"; !strings.Contains(pt.log.String(), want) {
		t.Errorf("log lacks %q", want)
	}
	if p := pt.svc.Console().Config().Peers; len(p) != 2 || p[2].Host != "10.1.2.3" {
		t.Errorf("peers after RELOAD: %v", p)
	}
}

// A request waiting for a slot of its peer's pool gives up after
// cancel_wait_timeout ("closing because: cancel_wait_timeout"), while the
// one in flight goes on; nothing stays counted.
func TestForwardCancelWaitTimeout(t *testing.T) {
	pt := newPeerTest(t, peerIni)
	done := make(chan struct{})
	go func() { pt.request([8]byte{0, 2, 0, 0, 0, 0, 0, 3}); close(done) }()
	<-pt.got // the first is in flight, with cancel_wait_timeout = 30
	if err := pt.svc.Apply(parseTestConfig(t, strings.Replace(peerIni, "cancel_wait_timeout = 30", "cancel_wait_timeout = 0.2", 1)), true); err != nil {
		t.Fatal(err)
	}
	pt.request([8]byte{1, 2, 0, 0, 0, 0, 0, 3})
	if n := strings.Count(pt.log.String(), "closing because: cancel_wait_timeout"); n != 1 {
		t.Errorf("%d cancel_wait_timeout lines, want 1:\n%s", n, pt.log)
	}
	close(pt.release)
	<-done
	if len(pt.dials) != 1 {
		t.Errorf("%d dials, want 1 (pool_size=1)", len(pt.dials))
	}
	if rows := pt.svc.Console().(admin.PeerPools).PeerPools(); len(rows) != 1 || rows[0] != (admin.PeerPool{PeerID: 2}) {
		t.Errorf("SHOW PEER_POOLS after: %+v", rows)
	}
}
