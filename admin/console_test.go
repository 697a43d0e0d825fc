package admin

import (
	"net"
	"testing"
)

// TestAddrColumns: SHOW SERVERS' addr and port columns of a connection's
// address.
func TestAddrColumns(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		host string
		port int
	}{
		{nil, "", 0},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 5432}, "10.0.0.7", 5432},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 6432}, "::1", 6432},
		{&net.UnixAddr{Name: "/tmp/.s.PGSQL.5432", Net: "unix"}, "unix", 0},
	} {
		host, port := AddrColumns(tc.addr)
		if host != tc.host || port != tc.port {
			t.Errorf("AddrColumns(%v) = %q, %d, want %q, %d", tc.addr, host, port, tc.host, tc.port)
		}
	}
}

// TestNoSuchNotices: SET USER's and SET POOL's NOTICEs for names not known
// now, the hint only where the names look swapped.
func TestNoSuchNotices(t *testing.T) {
	if n := NoSuchUserNotice("u"); n.Message != "no such user: u" || n.Detail != `The setting is kept and applies once user "u" logs in.` {
		t.Errorf("user notice = %+v", n)
	}
	n := NoSuchDatabaseNotice("app", "appdb", false)
	if n.Message != "no such database: appdb" || n.Detail != `The setting is kept and applies to pool app.appdb once database "appdb" is used.` || n.Hint != "" {
		t.Errorf("database notice = %+v", n)
	}
	if n := NoSuchDatabaseNotice("appdb", "app", true); n.Hint != "SET POOL takes user.database: did you mean SET POOL app.appdb?" {
		t.Errorf("swapped hint = %q", n.Hint)
	}
}
