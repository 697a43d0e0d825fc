package pooler

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
)

// Clients and servers are numbered from one sequence, from 1 in the order
// they are made, as PgBouncer numbers its sockets (its suite's
// test_server_id and test_socket_id read SHOW SERVERS and SHOW SOCKETS):
// a session client and the server it brings up take consecutive ids.
func TestSocketIDsOneSequence(t *testing.T) {
	tp := startSessionPooler(t)
	con := tp.svc.Console()
	var want []uint64
	for i := range uint64(2) {
		sessionClient(t, tp, "sd")
		// Client 2i+1 logs in, then its server 2i+2 is dialled for it.
		want = append(want, 2*i+1, 2*i+2)
	}
	var got []uint64
	for _, c := range con.Clients() {
		got = append(got, c.ID)
	}
	for _, s := range con.Servers() {
		got = append(got, s.ID)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("client and server ids %v, want %v", got, want)
	}
	for _, s := range con.Servers() {
		if s.Ptr != "S-"+strconv.FormatUint(s.ID, 10) {
			t.Errorf("server %s has id %d", s.Ptr, s.ID)
		}
	}
}

// server_lifetime = 0: a server serves one client and is closed when that
// client releases it, as PgBouncer does; the next client gets a new
// server with the next id (test_server_id reads it in SHOW SERVERS). The
// pool's first login, made for the welcome, still serves its client.
func TestServerLifetimeZeroIsSingleUse(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"sd": "pool_mode=session"}, "server_lifetime = 0\n")
	t.Cleanup(func() {
		tp.svc.Shutdown(context.Background(), admin.ShutdownImmediate)
		tp.stop()
		fake.Close()
	})
	con := tp.svc.Console()
	for i := range uint64(3) {
		conn := sessionClient(t, tp, "sd")
		servers := con.Servers()
		// Client 2i+1, then its server 2i+2: the previous one is gone.
		if len(servers) != 1 || servers[0].ID != 2*i+2 {
			var ids []uint64
			for _, s := range servers {
				ids = append(ids, s.ID)
			}
			t.Fatalf("client %d: servers %v, want [%d]", i+1, ids, 2*i+2)
		}
		conn.Close()
		deadline := time.Now().Add(10 * time.Second) // a failsafe, not a measurement
		for len(con.Servers()) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("client %d: its server was not closed after it left (server_lifetime = 0)", i+1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
