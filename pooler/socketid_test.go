package pooler

import (
	"slices"
	"strconv"
	"testing"
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
