package pooler

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
)

// A TCP connection accepted before SHUTDOWN WAIT_FOR_CLIENTS (SIGTERM) is
// one of the clients the shutdown waits for: its login, sent only after
// the shutdown began, is served, not refused with "pooler is shutting
// down" (a rolling restart would lose it); the service ends when it
// leaves.
func TestShutdownWaitForClientsServesAcceptedLogin(t *testing.T) {
	tp := startSessionPooler(t)
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, "the connection accepted", func() bool { return tp.svc.clientCount.Load() == 1 })
	tp.svc.Shutdown(context.Background(), admin.ShutdownWaitForClients)
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // a failsafe
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "sd"}, {"database", "sd"}})); err != nil {
		t.Fatal(err)
	}
	br := newBackendReader(conn)
	for {
		typ, body, err := br.next()
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		if typ == 'E' {
			t.Fatalf("login refused: %q", body)
		}
		if typ == 'Z' {
			break
		}
	}
	tp.notServed(t, "while the client was connected")
	conn.Close()
	tp.awaitServed(t, "after the client left")
}
