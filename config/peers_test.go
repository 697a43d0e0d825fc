package config

import "testing"

// TestPeers: [peers] entries as PgBouncer reads them: host required, port
// 6432 by default, pool_size unset (-1) by default, a repeated id replaces
// the earlier entry, and so_reuseport and peer_id are settings in force.
func TestPeers(t *testing.T) {
	c := mustParse(t, `[pgbouncer]
so_reuseport = 1
peer_id = 2
[peers]
1 = host=/tmp/pgb1
2 = host=10.0.0.2 port=7432 pool_size=4
3 = host=a port=1
3 = host=@abstract port = 6000
`)
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
	if !c.Settings.SoReuseport || c.Settings.PeerID != 2 {
		t.Errorf("so_reuseport %v peer_id %d", c.Settings.SoReuseport, c.Settings.PeerID)
	}
	want := map[int]Peer{
		1: {ID: 1, Host: "/tmp/pgb1", Port: 6432, PoolSize: -1, File: "pgbouncer.ini", Line: 5},
		2: {ID: 2, Host: "10.0.0.2", Port: 7432, PoolSize: 4, File: "pgbouncer.ini", Line: 6},
		3: {ID: 3, Host: "@abstract", Port: 6000, PoolSize: -1, File: "pgbouncer.ini", Line: 8},
	}
	if len(c.Peers) != len(want) {
		t.Fatalf("peers: %d, want %d", len(c.Peers), len(want))
	}
	for id, w := range want {
		if got := c.Peers[id]; got == nil || *got != w {
			t.Errorf("peer %d: %+v, want %+v", id, got, w)
		}
	}
	if cl := c.Clone(); cl.Peers[2] != c.Peers[2] || len(cl.Peers) != 3 {
		t.Error("Clone lost [peers]")
	}
}

// TestPeerErrors: PgBouncer's messages for a bad [peers] line.
func TestPeerErrors(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{"0 = host=a", "ids of peers must be a number larger than 0 and at most 65536"},
		{"65536 = host=a", "ids of peers must be a number larger than 0 and at most 65536"},
		{"x = host=a", "ids of peers must be a number larger than 0 and at most 65536"},
		{"1 = port=5", "host was not provided for peer 1"},
		{"1 = host=a port=x", "invalid port: x"},
		{"1 = host=a port=70000", "invalid port: 70000"},
		{"1 = host=a dbname=b", "unrecognized connection parameter: dbname"},
		{"1 = host='a", "syntax error in connection string"},
	} {
		_, err := parse("pgbouncer.ini", []byte("[peers]\n"+tt.line+"\n"), memFS{}.read)
		if err == nil || err.Error() != "pgbouncer.ini:2: "+tt.want {
			t.Errorf("%q: %v, want %q", tt.line, err, tt.want)
		}
	}
	c := mustParse(t, "[peers]\n65535 = host=a port=12abc pool_size=3x\n")
	if p := c.Peers[65535]; p == nil || p.Port != 12 || p.PoolSize != 3 {
		t.Errorf("atoi port/pool_size: %+v", p)
	}
}
