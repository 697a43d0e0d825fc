package admin

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
)

// peerFake is the fake console with peering: SHOW PEER_POOLS rows.
type peerFake struct {
	*fakeConsole
	pools []PeerPool
}

func (p peerFake) PeerPools() []PeerPool { return p.pools }

// SHOW PEERS lists [peers] by id, its own entry included, with
// default_pool_size for an entry without pool_size; SHOW PEER_POOLS lists
// the pooler's peer pools.
func TestShowPeers(t *testing.T) {
	con := newFake()
	cfg, err := config.Parse("t.ini", []byte("[pgbouncer]\ndefault_pool_size = 7\npeer_id = 1\n[peers]\n"+
		"2 = host=10.0.0.2 port=7000 pool_size=3\n1 = host=/tmp/p1\n"))
	if err != nil {
		t.Fatal(err)
	}
	con.cfg = cfg
	r := run1(t, peerFake{fakeConsole: con, pools: []PeerPool{{PeerID: 2, ClActiveCancelReq: 1, ClWaitingCancelReq: 4, SvActiveCancel: 1, SvLogin: 2}}}, RoleStats, "SHOW PEERS")
	wantOK(t, r, "SHOW")
	want := [][]string{{"1", "/tmp/p1", "6432", "7"}, {"2", "10.0.0.2", "7000", "3"}}
	if len(r.rows) != len(want) {
		t.Fatalf("rows %v", r.rows)
	}
	for i, w := range want {
		for j, c := range r.cols {
			if got := r.get(t, i, c); got != w[j] {
				t.Errorf("peers row %d %s = %q, want %q", i, c, got, w[j])
			}
		}
	}
	r = run1(t, peerFake{fakeConsole: con, pools: []PeerPool{{PeerID: 2, ClActiveCancelReq: 1, ClWaitingCancelReq: 4, SvActiveCancel: 1, SvLogin: 2}}}, RoleStats, "SHOW PEER_POOLS")
	for col, w := range map[string]string{"peer_id": "2", "cl_active_cancel_req": "1", "cl_waiting_cancel_req": "4", "sv_active_cancel": "1", "sv_login": "2"} {
		if got := r.get(t, 0, col); got != w {
			t.Errorf("peer_pools %s = %q, want %q", col, got, w)
		}
	}
}
