package peeraddr

import (
	"net"
	"net/netip"
	"testing"
)

// TestTCP: a TCP address becomes a value with IPv4 unmapped; anything
// else is the zero AddrPort.
func TestTCP(t *testing.T) {
	mapped := &net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 6432}
	if got, want := TCP(mapped), netip.MustParseAddrPort("10.1.2.3:6432"); got != want {
		t.Errorf("TCP(%v) = %v, want %v", mapped, got, want)
	}
	v6 := &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 5432, Zone: "eth0"}
	if got, want := TCP(v6), netip.MustParseAddrPort("[fe80::1%eth0]:5432"); got != want {
		t.Errorf("TCP(%v) = %v, want %v", v6, got, want)
	}
	if got := TCP(&net.UnixAddr{Name: "/tmp/.s.PGSQL.6432", Net: "unix"}); got.IsValid() {
		t.Errorf("TCP of a Unix address = %v, want the zero AddrPort", got)
	}
}

// TestUnix: a Unix-socket client's address carries the port of the
// socket's name.
func TestUnix(t *testing.T) {
	path := t.TempDir() + "/.s.PGSQL.6543"
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("unix", path); err == nil {
			defer c.Close()
			var b [1]byte
			c.Read(b[:])
		}
	}()
	uc, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	got := Unix(uc)
	if got[len(got)-5:] != ":6543" || got[:4] != "unix" {
		t.Errorf("Unix = %q, want unix(pid):6543", got)
	}
}
