package sockopt

import (
	"context"
	"net"
)

// ListenTCP opens a TCP listener, with SO_REUSEPORT set before the bind
// when so_reuseport is on, so that several processes share the port and
// the kernel spreads new connections among them (PgBouncer sets it on TCP
// listeners only: each process keeps its own Unix socket, in its own
// unix_socket_dir).
func ListenTCP(reusePort bool, address string) (net.Listener, error) {
	lc := listenConfig(reusePort)
	return lc.Listen(context.Background(), "tcp", address)
}
