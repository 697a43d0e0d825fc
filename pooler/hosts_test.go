package pooler

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// setStandby makes the fake report in_hot_standby and
// default_transaction_read_only as v ("on" or "off").
func (f *fakePostgres) setStandby(v string) {
	f.mu.Lock()
	f.standby = v
	f.mu.Unlock()
}

// reportStandby sends the fake's role when it changed since this
// connection last reported it, as Postgres reports a GUC_REPORT change.
func (fc *fakeConn) reportStandby() {
	fc.f.mu.Lock()
	v := fc.f.standby
	fc.f.mu.Unlock()
	if v == "" || v == fc.standby {
		return
	}
	fc.standby = v
	fc.send(&pgproto3.ParameterStatus{Name: "in_hot_standby", Value: v})
	fc.send(&pgproto3.ParameterStatus{Name: "default_transaction_read_only", Value: v})
}

// queries counts the client's SELECTs a fake received since the last
// take (not the pooler's own SETs).
func (f *fakePostgres) queries() int {
	n := 0
	for _, m := range f.take() {
		if m.typ == 'Q' && strings.HasPrefix(string(m.body), "SELECT") {
			n++
		}
	}
	return n
}

// poolOf is the pool of database db (user sd), or nil.
func (tp *testPooler) poolOf(db string) *serverPool {
	for _, p := range tp.svc.allPools() {
		if p.key.db == db {
			return p
		}
	}
	return nil
}

// Round-robin takes the hosts in turn; disable stays on a host until a
// login to it fails, then moves to the next (PgBouncer's rrcounter).
func TestPickEndpoint(t *testing.T) {
	p := benchPool(t, 0)
	d := *p.dbEntry()
	d.Host = "a,b,c"
	p.retarget(&d)
	picks := func(n int, fail bool) string {
		var out []string
		for i := 0; i < n; i++ {
			p.mu.Lock()
			ep := p.pickEndpointLocked(p.target.Load())
			if fail {
				p.noteLoginLocked(errors.New("connect failed"))
			} else {
				p.noteLoginLocked(nil)
			}
			p.mu.Unlock()
			out = append(out, ep.host)
		}
		return strings.Join(out, ",")
	}
	if got := picks(4, false); got != "a,b,c,a" {
		t.Errorf("round-robin: %s, want a,b,c,a", got)
	}
	d2 := d
	d2.LoadBalanceHosts = "disable"
	p.retarget(&d2)
	p.mu.Lock()
	p.hosts = hostChoice{}
	p.mu.Unlock()
	if got := picks(3, false); got != "a,a,a" {
		t.Errorf("disable, all good: %s, want a,a,a", got)
	}
	if got := picks(2, true); got != "a,b" {
		t.Errorf("disable, failing: %s, want a,b", got)
	}
	if got := picks(2, false); got != "c,c" {
		t.Errorf("disable after failures: %s, want c,c", got)
	}
	if ep := p.target.Load().endpoints[1]; ep.host != "b" || ep.address != "b:5432" {
		t.Errorf("endpoint %+v: TLS must verify the host dialled", ep)
	}
}

// target_session_attrs=read-write skips a standby for the primary, and
// after a failover (the primary reports in_hot_standby=on, the standby
// off) the servers of the old primary are recycled when released and new
// ones log in to the new primary.
func TestTargetSessionAttrsFollowsPrimary(t *testing.T) {
	standby, primary := startFakePostgres(t), startFakePostgres(t)
	standby.setStandby("on")
	primary.setStandby("off")
	tp := startTestPooler(t, standby, map[string]string{
		"rw": fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d target_session_attrs=read-write pool_mode=transaction", standby.port(), primary.port()),
	}, "")
	t.Cleanup(func() { tp.shutdown(t, primary); standby.Close() })

	conn := sessionClient(t, tp, "rw")
	if n := standby.queries(); n != 0 {
		t.Errorf("the standby ran %d queries", n)
	}
	if n := primary.queries(); n != 1 {
		t.Errorf("the primary ran %d queries, want 1", n)
	}
	// The line may come a moment after the query's answer (the standby's
	// server is closed and logged beside the dial of the next host).
	waitLog(t, tp, "closing because: target_session_attrs not met (session is read-only (target_session_attrs=read-write))")

	// Failover: the old primary turns standby (its servers hear of it at
	// their next ReadyForQuery), the standby is promoted.
	primary.setStandby("on")
	standby.setStandby("off")
	stateQuery(t, conn, "SELECT 2", 'I') // on the old primary: in flight
	for i := 0; i < 3; i++ {
		stateQuery(t, conn, "SELECT 3", 'I')
	}
	if n := standby.queries(); n != 3 {
		t.Errorf("the new primary ran %d queries, want 3", n)
	}
	if n := primary.queries(); n != 1 {
		t.Errorf("the old primary ran %d queries after failover, want 1 (in flight)", n)
	}
	p := tp.poolOf("rw")
	p.mu.Lock()
	for s := range p.servers {
		if s.state != serverClosed && s.ep.address != fmt.Sprintf("127.0.0.1:%d", standby.port()) {
			t.Errorf("%s still attached to %s", s, s.ep.address)
		}
	}
	p.mu.Unlock()
	waitLog(t, tp, "closing because: target_session_attrs not met") // the recycled server's close
}

// prefer-standby takes a standby when there is one, and a primary when a
// whole round of hosts found none, without waiting server_login_retry.
func TestPreferStandby(t *testing.T) {
	a, b := startFakePostgres(t), startFakePostgres(t)
	a.setStandby("off")
	b.setStandby("off")
	tp := startTestPooler(t, a, map[string]string{
		"ps": fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d target_session_attrs=prefer-standby pool_mode=session", a.port(), b.port()),
	}, "server_login_retry = 60\n")
	t.Cleanup(func() { tp.shutdown(t, b); a.Close() })
	sessionClient(t, tp, "ps") // no standby: a primary serves it
	if n := a.queries() + b.queries(); n != 1 {
		t.Errorf("%d queries ran, want 1", n)
	}
	b.setStandby("on")
	sessionClient(t, tp, "ps")
	if n := b.queries(); n != 1 {
		t.Errorf("the standby ran %d queries, want 1", n)
	}
}

// With load_balance_hosts=disable, a host not yet proven gets one login at
// a time, so that one failure moves every later login to the next host
// (PgBouncer launches one connection at a time).
func TestDisableProbesOneLoginAtATime(t *testing.T) {
	p := benchPool(t, 0)
	d := *p.dbEntry()
	d.Host, d.LoadBalanceHosts = "a,b", "disable"
	p.retarget(&d)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.probingLocked() {
		t.Error("probing with no login in flight")
	}
	s := p.newLoginLocked()
	if !p.probingLocked() {
		t.Error("a second login may start while the first host is unproven")
	}
	p.noteLoginLocked(nil)
	if p.probingLocked() {
		t.Error("still probing after a login succeeded")
	}
	p.setServerStateLocked(s, serverClosed)
	d2 := d
	d2.LoadBalanceHosts = "round-robin"
	p.mu.Unlock()
	p.retarget(&d2)
	p.mu.Lock()
	p.hosts = hostChoice{}
	s = p.newLoginLocked()
	if p.probingLocked() {
		t.Error("round-robin waits for a probe")
	}
	p.setServerStateLocked(s, serverClosed)
}

// load_balance_hosts=disable with a failing first host: one login finds
// it failing, and every later login goes to the next host, the first of
// them at once (not after server_login_retry: a host list has hosts
// left to try); two clients
// needing two servers at once cost one failed login, not one each
// (PgBouncer's test_load_balance_hosts_disable_bad_first). The first host
// accepts and hangs up once both clients wait, so both are queued when
// the login fails (a client arriving after it would be failed fast).
func TestDisableSkipsDeadHostOnce(t *testing.T) {
	fake := startFakePostgres(t)
	bad, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := bad.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	tp := startTestPooler(t, fake, map[string]string{
		"hb": fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d load_balance_hosts=disable pool_mode=session", bad.Addr().(*net.TCPAddr).Port, fake.port()),
	}, "server_login_retry = 60\n") // the next host is tried at once
	t.Cleanup(func() { tp.shutdown(t, fake) })
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sessionClient(t, tp, "hb")
		}()
	}
	c := <-accepted
	for queued := 0; queued < 2; time.Sleep(time.Millisecond) {
		if p := tp.poolOf("hb"); p != nil {
			p.mu.Lock()
			queued = p.queue.len()
			p.mu.Unlock()
		}
	}
	c.Close()
	wg.Wait()
	if n := len(accepted); n != 0 {
		t.Errorf("%d more logins went to the failing host", n)
	}
	log := tp.log.tail()
	if n := strings.Count(log, "server login failed: closing because"); n != 1 {
		t.Errorf("%d failed logins, want 1:\n%s", n, log)
	}
	if n := fake.queries(); n != 2 {
		t.Errorf("the second host ran %d queries, want 2", n)
	}
}

// SHOW DATABASES and SHOW POOLS list load_balance_hosts for a host list
// only (round-robin unless disable), as PgBouncer does.
func TestShowLoadBalanceHosts(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{
		"one":  "pool_mode=session",
		"rr":   fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d", fake.port()),
		"off":  fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d load_balance_hosts=disable", fake.port()),
		"lone": "load_balance_hosts=disable",
	}, "")
	t.Cleanup(func() { tp.shutdown(t, fake) })
	want := map[string]string{"one": "", "rr": "round-robin", "off": "disable", "lone": ""}
	for _, d := range tp.svc.Console().Databases() {
		if w, ok := want[d.Name]; ok && d.LoadBalanceHosts != w {
			t.Errorf("SHOW DATABASES %s: load_balance_hosts %q, want %q", d.Name, d.LoadBalanceHosts, w)
		}
	}
	sessionClient(t, tp, "off")
	found := false
	for _, p := range tp.svc.Console().Pools() {
		if p.Database == "off" {
			found = true
			if p.LoadBalanceHosts != "disable" {
				t.Errorf("SHOW POOLS off: load_balance_hosts %q, want disable", p.LoadBalanceHosts)
			}
		}
	}
	if !found {
		t.Error("no pool for off")
	}
}

// A server that does not report in_hot_standby (before PostgreSQL 14) is
// asked, as libpq does: SHOW transaction_read_only for read-write,
// pg_is_in_recovery() for standby. (The fake answers neither with on/t,
// so it is a writable primary.)
func TestSessionAttrsAskOlderServers(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{
		"rw": "target_session_attrs=read-write pool_mode=session",
		"sb": "target_session_attrs=standby pool_mode=session",
	}, "server_login_retry = 60\nquery_wait_timeout = 1\n") // the waiting client ends by itself
	t.Cleanup(func() { tp.shutdown(t, fake) })
	sessionClient(t, tp, "rw")
	asked := false
	for _, m := range fake.take() {
		if m.typ == 'Q' && strings.HasPrefix(string(m.body), "SHOW transaction_read_only") {
			asked = true
		}
	}
	if !asked {
		t.Error("read-write did not ask SHOW transaction_read_only")
	}
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // a failsafe
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "sd"}, {"database", "sb"}})); err != nil {
		t.Fatal(err)
	}
	// The pool's only login found no standby: the client waits for the
	// retry; the log says why.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(tp.log.tail(), "server is not in hot standby mode (target_session_attrs=standby)"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // a failsafe
			t.Fatalf("the standby check's failure is not logged:\n%s", tp.log.tail())
		}
	}
	recovery := false
	for _, m := range fake.take() {
		if m.typ == 'Q' && strings.HasPrefix(string(m.body), "SELECT pg_catalog.pg_is_in_recovery()") {
			recovery = true
		}
	}
	if !recovery {
		t.Error("standby did not ask pg_is_in_recovery()")
	}
	// query_wait_timeout ends the waiting client (before the shutdown,
	// which does not end a login waiting for a pool's first server).
	if b, _ := io.ReadAll(conn); !strings.Contains(string(b), "query_wait_timeout") {
		t.Errorf("the waiting client got %q, want the query_wait_timeout error", b)
	}
}
