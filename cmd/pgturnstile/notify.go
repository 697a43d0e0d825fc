package main

import (
	"net"
	"os"
	"time"
)

// notifier speaks systemd's sd_notify protocol: datagrams of KEY=VALUE
// lines to the socket named by NOTIFY_SOCKET (Type=notify units). Without
// NOTIFY_SOCKET it does nothing.
type notifier struct{ addr *net.UnixAddr }

func newNotifier() *notifier {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return &notifier{}
	}
	if path[0] == '@' {
		path = "\x00" + path[1:] // abstract namespace
	}
	return &notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}
}

func (n *notifier) send(msg string) {
	if n.addr == nil {
		return
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write([]byte(msg))
}
