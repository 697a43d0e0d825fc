//go:build !windows

package fdcheck

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// Claim is what a passed descriptor is said to be: Task is "pooler" (a
// listener), "client" or "server", as SHOW FDS names them.
type Claim struct {
	Task string
	// Listeners: Network ("tcp" or "unix") and, for TCP, Address.
	Network, Address string
	// Clients: Local (through SocketPath), else Laddr and Raddr.
	Local        bool
	Laddr, Raddr string
	// Servers: Endpoint, the address dialled (a path for a Unix socket).
	Endpoint string
	// SocketPath is the console's Unix socket, the one Unix listener.
	SocketPath string
}

// Check says whether fd is what c claims: a stream socket, listening for
// a listener (of the claim's family, at its address; the Unix one at the
// console's socket), connected for a client (at the address the claim
// gives, or through the console's socket) and for a server (to its
// endpoint). A pipe, a file, a socketpair or another process's socket
// passed as a client or a server is refused: whatever it is would be read
// as a logged-in client, or handed queries.
func Check(fd int, c Claim) error {
	task, st, socketPath := c.Task, c, c.SocketPath
	var stat syscall.Stat_t
	if err := syscall.Fstat(fd, &stat); err != nil {
		return err
	}
	if uint32(stat.Mode)&syscall.S_IFMT != syscall.S_IFSOCK {
		return errors.New("not a socket")
	}
	if typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE); err != nil || typ != syscall.SOCK_STREAM {
		return errors.New("not a stream socket")
	}
	acc, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	if err != nil {
		return fmt.Errorf("SO_ACCEPTCONN: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return err
	}
	network, local := sockaddrText(sa)
	if network == "" {
		return errors.New("neither a TCP nor a Unix socket")
	}
	if task == "pooler" {
		switch {
		case acc == 0:
			return errors.New("not a listening socket")
		case network != st.Network:
			return fmt.Errorf("a %s socket, not %s as its row says", network, st.Network)
		case network == "unix" && local != socketPath:
			return fmt.Errorf("listening on %q, not on %q", local, socketPath)
		case network == "tcp" && !sameAddrPort(local, st.Address):
			return fmt.Errorf("listening on %s, not on %s as its row says", local, st.Address)
		}
		return nil
	}
	if acc != 0 {
		return errors.New("a listening socket, not a connection")
	}
	psa, err := syscall.Getpeername(fd)
	if err != nil {
		return fmt.Errorf("not connected: %v", err)
	}
	_, peer := sockaddrText(psa)
	switch task {
	case "client":
		switch {
		case st.Local && (network != "unix" || local != socketPath):
			return fmt.Errorf("not a connection to %s", socketPath)
		case st.Local:
		case network != "tcp":
			return errors.New("not a TCP connection, as its row says")
		case !sameAddrPort(local, st.Laddr) || !sameAddrPort(peer, st.Raddr):
			return fmt.Errorf("a connection from %s to %s, not from %s to %s as its row says", peer, local, st.Raddr, st.Laddr)
		}
	case "server":
		if strings.HasPrefix(st.Endpoint, "/") {
			if network != "unix" || peer != st.Endpoint {
				return fmt.Errorf("not a connection to %s", st.Endpoint)
			}
			break
		}
		ap, err := netip.ParseAddrPort(peer)
		_, port, err2 := net.SplitHostPort(st.Endpoint)
		if network != "tcp" || err != nil || err2 != nil || port != strconv.Itoa(int(ap.Port())) {
			return fmt.Errorf("a connection to %s, not to %s", peer, st.Endpoint)
		}
	}
	return nil
}

// sockaddrText is a socket address as ("tcp", "ip:port") or ("unix",
// path); "" for any other family.
func sockaddrText(sa syscall.Sockaddr) (network, addr string) {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return "tcp", netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)).String()
	case *syscall.SockaddrInet6:
		return "tcp", netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)).String()
	case *syscall.SockaddrUnix:
		return "unix", a.Name
	}
	return "", ""
}

// sameAddrPort compares two "ip:port" texts, an IPv4-mapped address equal
// to its IPv4 one.
func sameAddrPort(a, b string) bool {
	x, err1 := netip.ParseAddrPort(a)
	y, err2 := netip.ParseAddrPort(b)
	return err1 == nil && err2 == nil && x.Addr().Unmap() == y.Addr().Unmap() && x.Port() == y.Port()
}
