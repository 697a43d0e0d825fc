package takeover

import (
	"net"

	"github.com/pgturnstile/pgturnstile/admin"
)

// ListenerRow is SHOW FDS's row of the pooler's i-th listener; port is
// listen_port, which a Unix socket's row shows. With pass its descriptor
// is duplicated for passing (-1 if that fails); otherwise it is -1.
func ListenerRow(i int, ln net.Listener, port int, pass bool) admin.FD {
	r := admin.FD{FD: -1, ID: ListenerID | uint64(i), Task: "pooler"}
	st := State{Network: ln.Addr().Network(), Address: ln.Addr().String()}
	switch a := ln.Addr().(type) {
	case *net.UnixAddr:
		r.Addr, r.Port = "unix", port
		st.Network = "unix"
	case *net.TCPAddr:
		r.Addr, r.Port = a.IP.String(), a.Port
		st.Network = "tcp"
	}
	if pass {
		r.FD = DupSocket(ln)
	}
	r.State = Marshal(st)
	return r
}

// MetricsRow is SHOW FDS's row of the metrics_addr listener, as
// ListenerRow. It moves with the pooler's: the new process serves the
// metrics port from the moment it takes over, and while the old process
// holds the port the new one could not bind it itself.
func MetricsRow(ln net.Listener, pass bool) admin.FD {
	r := admin.FD{FD: -1, ID: MetricsID, Task: "pooler"}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		r.Addr, r.Port = a.IP.String(), a.Port
	}
	if pass {
		r.FD = DupSocket(ln)
	}
	r.State = Marshal(State{Network: "tcp", Address: ln.Addr().String(), Metrics: true})
	return r
}
