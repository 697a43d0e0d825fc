// Package peeraddr turns a connection's addresses into what the pooler
// keeps and shows of them: a TCP address as a value (netip.AddrPort, no
// allocation to keep, IPv4 unmapped), and a Unix-socket peer in
// PgBouncer's "unix(pid):port" form.
package peeraddr

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pgturnstile/pgturnstile/internal/netpoll"
)

// TCP is a TCP address as a value, IPv4 unmapped; the zero AddrPort for
// anything else.
func TCP(a net.Addr) netip.AddrPort {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip.Unmap().WithZone(ta.Zone), uint16(ta.Port))
}

// Unix is a Unix-socket client's address as PgBouncer logs it:
// "unix(pid):port", the peer's pid where the system tells it, the port
// taken from the socket's name (".s.PGSQL.6432").
func Unix(uc *net.UnixConn) string {
	host := "unix"
	if pid, ok := netpoll.PeerPID(uc); ok {
		host = "unix(" + strconv.Itoa(pid) + ")"
	}
	port := 0
	if a := uc.LocalAddr(); a != nil {
		name := a.String()
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			port, _ = strconv.Atoi(name[i+1:])
		}
	}
	return host + ":" + strconv.Itoa(port)
}
