package pooler

import (
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
)

// TestTransactionOnAnotherPool: a client logged in to pool A (database a)
// runs one transaction on a server of pool B (database b), as the router
// sends it there (linkTo). The server is B's, SHOW POOLS shows it active
// in B during the transaction and idle in B after (released to B), the
// client stays A's (cl_active) and A's servers are untouched; SHOW STATS
// counts the transaction in B, not A. The next transaction, not routed,
// runs on A.
func TestTransactionOnAnotherPool(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"a": "", "b": ""}, "pool_mode = transaction\n")
	defer tp.shutdown(t, fake)
	conn, query := queryClient(t, tp, [][2]string{{"user", "u"}, {"database", "a"}})
	defer conn.Close() // before the shutdown, which counts goroutines left
	query("SELECT 1")  // A has a server, idle now; the client parks no sooner than parkAfter from here
	c := onlyClientForTest(t, tp.svc)
	pb, err := tp.svc.poolFor(tp.svc.config().Databases["b"], "u")
	if err != nil {
		t.Fatal(err)
	}
	defer tp.svc.unpin(pb)
	if !c.linkTo(pb) {
		t.Fatal("linkTo: the client has no link (parked)")
	}
	a0, b0 := statsForTest(t, tp.svc, "a"), statsForTest(t, tp.svc, "b")

	query("BEGIN")
	c.mu.Lock()
	srv, linkPool := c.mu.link.mu.srv, c.mu.link.mu.pool
	c.mu.Unlock()
	if srv == nil || srv.pool != pb || linkPool != pb {
		t.Fatalf("in the routed transaction: server %v of pool %v, link's pool %v; want a server of B %v", srv, srvPoolForTest(srv), linkPool, pb)
	}
	if c.pool.key.db != "a" {
		t.Errorf("the client's own pool is %s, want a", c.pool.key.db)
	}
	checkPoolRow(t, tp.svc, "a", admin.Pool{ClActive: 1, SvIdle: 1})
	checkPoolRow(t, tp.svc, "b", admin.Pool{SvActive: 1})
	var servers []string
	for _, s := range tp.svc.Console().Servers() {
		servers = append(servers, s.Database+":"+s.State)
	}
	if len(servers) != 2 || !(servers[0] == "a:idle" && servers[1] == "b:active" || servers[0] == "b:active" && servers[1] == "a:idle") {
		t.Errorf("SHOW SERVERS: %v; want a:idle and b:active", servers)
	}
	query("COMMIT")

	a1, b1 := statsForTest(t, tp.svc, "a"), statsForTest(t, tp.svc, "b")
	if a1 != a0 {
		t.Errorf("SHOW STATS of a changed by the routed transaction:\n%+v\nthen\n%+v", a0, a1)
	}
	// BEGIN and COMMIT: two queries, one transaction, one checkout.
	if d := b1.XactCount - b0.XactCount; d != 1 {
		t.Errorf("b's xact_count went up by %d, want 1", d)
	}
	if d := b1.QueryCount - b0.QueryCount; d != 2 {
		t.Errorf("b's query_count went up by %d, want 2", d)
	}
	if d := b1.ServerAssignmentCount - b0.ServerAssignmentCount; d != 1 {
		t.Errorf("b's server_assignment_count went up by %d, want 1", d)
	}
	if b1.Received <= b0.Received || b1.Sent <= b0.Sent {
		t.Errorf("b's bytes: received %d -> %d, sent %d -> %d; want both up", b0.Received, b1.Received, b0.Sent, b1.Sent)
	}

	// Not routed: A again. serve routes it once the routed transaction's
	// server is unlinked; the pump hands it back to B right after, which
	// may come after SELECT 2's answer when the pump is descheduled in
	// between: wait for it (a hang fails the test's deadline).
	query("SELECT 2")
	waitPoolRow(t, tp.svc, "b", admin.Pool{SvIdle: 1})
	a2, b2 := statsForTest(t, tp.svc, "a"), statsForTest(t, tp.svc, "b")
	if b2 != b1 {
		t.Errorf("SHOW STATS of b changed by a transaction on a:\n%+v\nthen\n%+v", b1, b2)
	}
	if a2.XactCount-a1.XactCount != 1 || a2.QueryCount-a1.QueryCount != 1 || a2.ServerAssignmentCount-a1.ServerAssignmentCount != 1 {
		t.Errorf("a's counts after its own transaction: %+v then %+v; want one more xact, query and assignment", a1, a2)
	}
	c.mu.Lock()
	linkPool = c.mu.link.mu.pool
	c.mu.Unlock()
	if linkPool != c.pool {
		t.Errorf("the unrouted transaction's pool is %s, want the client's own", linkPool.key.db)
	}
	if n := poolTotal(tp.svc, "a"); n != 1 {
		t.Errorf("a has %d servers, want its one", n)
	}
}

// onlyClientForTest is the service's one client.
func onlyClientForTest(t *testing.T, svc *Service) *client {
	t.Helper()
	svc.cancelMu.Lock()
	defer svc.cancelMu.Unlock()
	if len(svc.cancels) != 1 {
		t.Fatalf("%d clients, want 1", len(svc.cancels))
	}
	for _, c := range svc.cancels {
		return c
	}
	return nil
}

func srvPoolForTest(s *server) *serverPool {
	if s == nil {
		return nil
	}
	return s.pool
}

// statsForTest is db's SHOW STATS totals.
func statsForTest(t *testing.T, svc *Service, db string) admin.Counters {
	t.Helper()
	for _, st := range svc.Console().Stats() {
		if st.Database == db {
			return st.Total
		}
	}
	t.Fatalf("SHOW STATS has no row for %s", db)
	return admin.Counters{}
}

// checkPoolRow compares db's SHOW POOLS client and server counts with want's.
// waitPoolRow waits until SHOW POOLS' row for db reads want (at most
// 10 s), then checks it.
func waitPoolRow(t *testing.T, svc *Service, db string, want admin.Pool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, p := range svc.Console().Pools() {
			if p.Database == db && (admin.Pool{ClActive: p.ClActive, ClWaiting: p.ClWaiting, SvActive: p.SvActive, SvIdle: p.SvIdle, SvUsed: p.SvUsed, SvLogin: p.SvLogin}) == want {
				return
			}
		}
	}
	checkPoolRow(t, svc, db, want)
}

func checkPoolRow(t *testing.T, svc *Service, db string, want admin.Pool) {
	t.Helper()
	for _, p := range svc.Console().Pools() {
		if p.Database != db {
			continue
		}
		got := admin.Pool{ClActive: p.ClActive, ClWaiting: p.ClWaiting, SvActive: p.SvActive, SvIdle: p.SvIdle, SvUsed: p.SvUsed, SvLogin: p.SvLogin}
		if got != want {
			t.Errorf("SHOW POOLS %s: %+v, want %+v", db, got, want)
		}
		return
	}
	t.Errorf("SHOW POOLS has no row for %s", db)
}
