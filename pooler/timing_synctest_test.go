package pooler

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/pgerror"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The pooler's timing behaviours, proven without Postgres: each test runs
// in a testing/synctest bubble, where time is fake and moves only when
// every goroutine of the bubble (the pooler's, the fake Postgres's, the
// test clients') is durably blocked. Clients and servers are net.Pipe ends
// (a TCP socket never blocks durably): the Service dials the fake through
// its dial hook and serves each client through serveConn. The Service's
// clock is the system one, which inside the bubble is the bubble's time,
// as are the pipes' deadlines.
//
// The janitor ticks every janitorPeriod from Serve's start, so a limit it
// enforces takes effect at the first tick at or after it: the tests assert
// "not before the limit" and "by the next tick", which fake time makes
// exact and repeatable.

// (a) query_wait_timeout: a client queued for a full pool gets FATAL
// 08P01 "query_wait_timeout" once it has waited that long, not before.
func TestTimingQueryWaitTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\ndefault_pool_size = 1\nreserve_pool_size = 0\nquery_wait_timeout = 2\n")
		holder := r.connect("u", nil)
		if rep := holder.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("holder's query: %v", rep)
		}
		waiter := r.connect("u", nil)
		r.sleepUntil(350 * time.Millisecond) // off the janitor's beat
		asked := time.Now()
		got := waiter.queryAsync("SELECT 2")
		synctest.Wait()
		if p := r.pool("u"); p.ClWaiting != 1 || p.SvActive != 1 {
			t.Fatalf("pool while waiting: %+v; want 1 waiting client, 1 active server", p)
		}
		time.Sleep(2*time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case rep := <-got:
			t.Fatalf("reply %v after the query, before query_wait_timeout: %+v", time.Since(asked), rep)
		default:
		}
		rep := <-got
		checkError(t, rep, pgerror.QueryWaitTimeout, "FATAL", "08P01", "query_wait_timeout")
		if waited := rep.at.Sub(asked); waited < 2*time.Second || waited > 2*time.Second+janitorPeriod {
			t.Errorf("error after %v; want query_wait_timeout (2s) to the next janitor tick", waited)
		}
		if rep2 := waiter.readReply(); rep2.ioErr == nil {
			t.Errorf("the waiter's connection stayed open after FATAL: %v", rep2)
		}
		synctest.Wait()
		if p := r.pool("u"); p.ClWaiting != 0 || p.SvActive != 1 || r.pg.logins() != 1 {
			t.Errorf("after the timeout: pool %+v, %d logins; want no waiter, the holder's one server", p, r.pg.logins())
		}
		if rep := holder.query("SELECT 3"); !rep.ready || rep.err != nil {
			t.Errorf("the holder's next query: %v", rep)
		}
	})
}

// (b) client_idle_timeout: a client that sends nothing for that long is
// closed with FATAL 08P01 "client_idle_timeout"; a request restarts the
// count.
func TestTimingClientIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\nclient_idle_timeout = 3\n")
		c := r.connect("u", nil)
		r.sleepUntil(2 * time.Second)
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query at 2s: %v", rep)
		}
		got := make(chan reply, 1)
		go func() { got <- c.readReply() }()
		// Idle from 2s: the timeout is due at 5s, not at 3s.
		r.sleepUntil(5*time.Second - time.Nanosecond)
		select {
		case rep := <-got:
			t.Fatalf("client closed at %v, before 3s of idleness: %v", r.elapsed(rep.at), rep)
		default:
		}
		if n := len(r.svc.Console().Clients()); n != 1 {
			t.Fatalf("SHOW CLIENTS has %d rows before the timeout; want 1", n)
		}
		rep := <-got
		checkError(t, rep, pgerror.ClientIdleTimeout, "FATAL", "08P01", "client_idle_timeout")
		if at := r.elapsed(rep.at); at != 5*time.Second {
			t.Errorf("closed at %v; want 5s (idle since 2s, client_idle_timeout 3s)", at)
		}
		if rep2 := c.readReply(); rep2.ioErr == nil {
			t.Errorf("the connection stayed open after FATAL: %v", rep2)
		}
		synctest.Wait()
		if n := len(r.svc.Console().Clients()); n != 0 {
			t.Errorf("SHOW CLIENTS has %d rows after the timeout; want 0", n)
		}
		if !strings.Contains(r.log.String(), "msg=\"pooler error: client_idle_timeout\" conn=C-") {
			t.Errorf("log lacks the close line:\n%s", r.log.String())
		}
		// The server the client used stays, idle, for the next client.
		if p := r.pool("u"); p.SvIdle != 1 || p.SvActive != 0 {
			t.Errorf("pool after the close: %+v; want its one server idle", p)
		}
	})
}

// (c) server_lifetime with server_lifetime_jitter: each idle server is
// closed once it has lived its own jittered lifetime, not before. The
// draws are pinned: -0.5 and +0.5 with jitter 0.2 make 9 s and 11 s of a
// 10 s server_lifetime.
func TestTimingServerLifetimeJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\ndefault_pool_size = 2\nserver_lifetime = 10\nserver_lifetime_jitter = 0.2\nserver_idle_timeout = 0\n")
		a, b := r.connect("u", nil), r.connect("u", nil)
		// Two transactions at once need two servers.
		for _, c := range []*pipeClient{a, b} {
			if rep := c.query("BEGIN"); !rep.ready || rep.status != 'T' {
				t.Fatalf("BEGIN: %v", rep)
			}
		}
		pids := r.serverPIDs()
		if len(pids) != 2 || pids[0] == pids[1] {
			t.Fatalf("servers %v; want two", pids)
		}
		draws := map[int]float64{pids[0]: 0.5, pids[1]: -0.5} // 11 s and 9 s
		p := r.svc.allPools()[0]
		p.mu.Lock()
		for s := range p.servers {
			s.lifeDraw = draws[int(s.pid)]
		}
		p.mu.Unlock()
		for _, c := range []*pipeClient{a, b} {
			if rep := c.query("COMMIT"); !rep.ready || rep.status != 'I' {
				t.Fatalf("COMMIT: %v", rep)
			}
		}
		long, short := pids[0], pids[1]
		check := func(at time.Duration, wantOpen ...int) {
			t.Helper()
			r.sleepUntil(at)
			open := r.serverPIDs()
			if len(open) != len(wantOpen) || len(wantOpen) > 0 && open[0] != wantOpen[0] {
				t.Fatalf("at %v servers %v are open; want %v", at, open, wantOpen)
			}
			for _, pid := range []int{long, short} {
				isOpen := len(wantOpen) > 0 && wantOpen[0] == pid || len(wantOpen) > 1 && wantOpen[1] == pid
				if how := r.pg.endedHow(pid); isOpen && how != "" || !isOpen && how != "terminate" {
					t.Fatalf("at %v the fake's backend %d ended %q", at, pid, how)
				}
			}
		}
		check(9*time.Second, long, short) // not yet over: lifetime > 9 s is needed
		check(9*time.Second+janitorPeriod, long)
		check(11*time.Second, long)
		check(11*time.Second + janitorPeriod)
		if n := strings.Count(r.log.String(), "closing because: server lifetime over"); n != 2 {
			t.Errorf("%d lifetime close lines; want 2:\n%s", n, r.log.String())
		}
		// The clients still work: a new server is opened for them.
		if rep := a.query("SELECT 1"); !rep.ready || rep.err != nil || r.pg.logins() != 3 {
			t.Errorf("query after the closes: %+v, %d logins; want a third server", rep, r.pg.logins())
		}
	})
}

// (d) the reserve pool: a client that has waited reserve_pool_timeout for
// a full pool gets an extra server (reserve_pool_size), not before; the
// reserve is a cap too.
func TestTimingReservePool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\ndefault_pool_size = 1\nreserve_pool_size = 1\nreserve_pool_timeout = 1\nquery_wait_timeout = 0\n")
		holder := r.connect("u", nil)
		if rep := holder.query("SELECT 1"); !rep.ready {
			t.Fatalf("holder: %v", rep)
		}
		waiter := r.connect("u", nil)
		third := r.connect("u", nil)
		r.sleepUntil(350 * time.Millisecond)
		asked := time.Now()
		got := waiter.queryAsync("SELECT 2")
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		select {
		case rep := <-got:
			t.Fatalf("reply after %v, before reserve_pool_timeout: %+v", time.Since(asked), rep)
		default:
		}
		if p := r.pool("u"); p.ClWaiting != 1 || r.pg.logins() != 1 {
			t.Fatalf("before reserve_pool_timeout: pool %+v, %d logins; want 1 waiter, 1 login", p, r.pg.logins())
		}
		rep := <-got
		if !rep.ready || rep.err != nil {
			t.Fatalf("waiter's reply: %v", rep)
		}
		if waited := rep.at.Sub(asked); waited < time.Second || waited > time.Second+janitorPeriod {
			t.Errorf("served after %v; want reserve_pool_timeout (1s) to the next janitor tick", waited)
		}
		if p := r.pool("u"); p.SvActive != 2 || p.ClWaiting != 0 || r.pg.logins() != 2 {
			t.Errorf("after the reserve: pool %+v, %d logins; want 2 active servers", p, r.pg.logins())
		}
		// pool_size + reserve_pool_size is reached: a third client waits on.
		got3 := third.queryAsync("SELECT 3")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		select {
		case rep := <-got3:
			t.Fatalf("third client served past the reserve: %v", rep)
		default:
		}
		if p := r.pool("u"); p.ClWaiting != 1 || r.pg.logins() != 2 {
			t.Errorf("with the reserve used: pool %+v, %d logins; want 1 waiter, 2 logins", p, r.pg.logins())
		}
		// The holder leaves: its server goes to the third client.
		holder.close()
		if rep := <-got3; !rep.ready || rep.err != nil {
			t.Errorf("third client after the holder left: %v", rep)
		}
	})
}

// (e) shrinking after a lowered limit: surplus idle servers close at once,
// longest idle first; a busy one over the limit is taken after
// limit_evict_grace (its client gets FATAL 08P01 "evicted"), not before.
func TestTimingShrinkAfterLoweredLimit(t *testing.T) {
	t.Run("idle", func(t *testing.T) { synctest.Test(t, shrinkIdleServers) })
	t.Run("busy with limit_evict_grace", func(t *testing.T) { synctest.Test(t, shrinkBusyServer) })
}

// shrinkIdleServers: three idle servers, pool_size 3 -> 1; the two longest
// idle close at once.
func shrinkIdleServers(t *testing.T) {
	settings := "pool_mode = transaction\nserver_idle_timeout = 0\ndefault_pool_size = "
	r := startTimingRig(t, settings+"3\n")
	cs := []*pipeClient{r.connect("u", nil), r.connect("u", nil), r.connect("u", nil)}
	for _, c := range cs {
		if rep := c.query("BEGIN"); rep.status != 'T' {
			t.Fatalf("BEGIN: %v", rep)
		}
	}
	pids := r.serverPIDs()
	// Released one second apart: pids[0] is the longest idle.
	for i, c := range cs {
		r.sleepUntil(time.Duration(i+1) * time.Second)
		if rep := c.query("COMMIT"); rep.status != 'I' {
			t.Fatalf("COMMIT: %v", rep)
		}
	}
	synctest.Wait() // the last server is released after its ReadyForQuery
	if p := r.pool("u"); p.SvIdle != 3 || len(pids) != 3 {
		t.Fatalf("before the change: pool %+v, servers %v; want 3 idle", p, pids)
	}
	if err := r.svc.Apply(parseTimingConfig(t, settings+"1\n"), true); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if open := r.serverPIDs(); len(open) != 1 || open[0] != pids[2] {
		t.Errorf("servers after pool_size 3 -> 1: %v; want only %d, the most recently used", open, pids[2])
	}
	for _, pid := range pids[:2] {
		if how := r.pg.endedHow(pid); how != "terminate" {
			t.Errorf("backend %d ended %q; want terminate", pid, how)
		}
	}
	if p := r.pool("u"); p.SvIdle != 1 || p.PoolSize != 1 {
		t.Errorf("pool after the change: %+v", p)
	}
	if n := strings.Count(r.log.String(), "closing because: limit lowered"); n != 2 {
		t.Errorf("%d 'limit lowered' close lines; want 2", n)
	}
}

// shrinkBusyServer: two busy servers, pool_size 2 -> 1; one is marked
// close_needed at once and taken from its client limit_evict_grace later.
func shrinkBusyServer(t *testing.T) {
	settings := "pool_mode = transaction\nlimit_evict_grace = 2\ndefault_pool_size = "
	r := startTimingRig(t, settings+"2\n")
	a, b := r.connect("u", nil), r.connect("u", nil)
	for _, c := range []*pipeClient{a, b} {
		if rep := c.query("BEGIN"); rep.status != 'T' {
			t.Fatalf("BEGIN: %v", rep)
		}
	}
	gotA := make(chan reply, 1)
	gotB := make(chan reply, 1)
	go func() { gotA <- a.readReply() }()
	go func() { gotB <- b.readReply() }()
	r.sleepUntil(550 * time.Millisecond)
	if err := r.svc.Apply(parseTimingConfig(t, settings+"1\n"), true); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	doomed := closeNeededPIDs(r)
	if len(doomed) != 1 || len(r.serverPIDs()) != 2 {
		t.Fatalf("after pool_size 2 -> 1 with both busy: close_needed %v of %v; want one of two", doomed, r.serverPIDs())
	}
	r.sleepUntil(2550*time.Millisecond - time.Nanosecond)
	select {
	case rep := <-gotA:
		t.Fatalf("client a got %+v before limit_evict_grace", rep)
	case rep := <-gotB:
		t.Fatalf("client b got %+v before limit_evict_grace", rep)
	default:
	}
	if how := r.pg.endedHow(doomed[0]); how != "" {
		t.Fatalf("backend %d ended %q before limit_evict_grace", doomed[0], how)
	}
	var rep reply
	select {
	case rep = <-gotA:
	case rep = <-gotB:
	}
	checkError(t, rep, pgerror.Evicted, "FATAL", "08P01", "evicted")
	if at := r.elapsed(rep.at); at < 2550*time.Millisecond || at > 2550*time.Millisecond+janitorPeriod {
		t.Errorf("evicted at %v; want limit_evict_grace (2s) after the change at 550ms, by the next tick", at)
	}
	synctest.Wait()
	if open := r.serverPIDs(); len(open) != 1 || open[0] == doomed[0] {
		t.Errorf("servers after the eviction: %v; want one, not %d", open, doomed[0])
	}
	if how := r.pg.endedHow(doomed[0]); how == "" {
		t.Errorf("the evicted backend %d is still open", doomed[0])
	}
}

// closeNeededPIDs is the backend PIDs of the servers SHOW SERVERS marks
// close_needed.
func closeNeededPIDs(r *timingRig) []int {
	var doomed []int
	for _, s := range r.svc.Console().Servers() {
		if s.CloseNeeded {
			doomed = append(doomed, s.RemotePID)
		}
	}
	return doomed
}

// deadlineLog records the read deadlines the pooler sets on a client's
// conn, with the fake time of each call.
type deadlineLog struct {
	net.Conn
	mu   sync.Mutex
	sets []deadlineSet
}

type deadlineSet struct{ at, deadline time.Time }

func (d *deadlineLog) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	d.sets = append(d.sets, deadlineSet{time.Now(), t})
	d.mu.Unlock()
	return d.Conn.SetReadDeadline(t)
}

// parkRequests returns the fake times (since start) at which the pooler
// expired the read deadline at once, which is how the janitor asks serve
// to park (requestParks), and at which it armed the early park after
// login (a deadline parkAfterLogin ahead).
func (d *deadlineLog) parkRequests(start time.Time) (janitor, afterLogin []time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sets {
		switch {
		case s.deadline.Equal(s.at):
			janitor = append(janitor, s.at.Sub(start))
		case s.deadline.Sub(s.at) == parkAfterLogin:
			afterLogin = append(afterLogin, s.at.Sub(start))
		}
	}
	return janitor, afterLogin
}

// (f) idle parking. A pipe has no descriptor for the epoll set, so the
// park itself (tryPark past its syscall.Conn check, resume) is not
// reached here; what is proven is the timing of the decisions: the early
// park deadline parkAfterLogin after login, the janitor's request once
// the client has been idle for parkAfter (at its parkScanEvery scan) and
// not while it is recent, and that a client whose park fails is served
// on, unparked.
func TestTimingIdleParking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\n")
		var dl *deadlineLog
		c := r.connect("u", func(conn net.Conn) net.Conn {
			dl = &deadlineLog{Conn: conn}
			return dl
		})
		r.sleepUntil(500 * time.Millisecond)
		janitor, afterLogin := dl.parkRequests(r.start)
		if len(afterLogin) != 1 || afterLogin[0] != 0 || len(janitor) != 0 {
			t.Fatalf("by 0.5s: early park deadline armed at %v, janitor requests at %v; want one at login (0s), none", afterLogin, janitor)
		}
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query at 0.5s: %v", rep)
		}
		// The scan at 1s finds the client's last query 0.5s old: no
		// request. The scan at 2s finds it idle for parkAfter.
		r.sleepUntil(2*time.Second - time.Nanosecond)
		if janitor, _ = dl.parkRequests(r.start); len(janitor) != 0 {
			t.Fatalf("park requested at %v, before the client was idle for %v", janitor, parkAfter)
		}
		r.sleepUntil(2 * time.Second)
		if janitor, _ = dl.parkRequests(r.start); len(janitor) != 1 || janitor[0] != 2*time.Second {
			t.Fatalf("park requests at %v; want one at 2s", janitor)
		}
		if n := r.svc.ParkedClients(); n != 0 {
			t.Errorf("%d clients parked on a pipe; want 0 (no descriptor to watch)", n)
		}
		if c := r.svc.allClients()[0]; c.parkWanted.Load() || c.stateForTest() != clientIdle {
			t.Errorf("after the failed park: parkWanted %v, state %v; want false, idle", c.parkWanted.Load(), c.stateForTest())
		}
		if rep := c.query("SELECT 2"); !rep.ready || rep.err != nil {
			t.Fatalf("query after the park attempt: %v", rep)
		}
		// Idle again from 2s: the next request is at the scan at 3s.
		r.sleepUntil(3 * time.Second)
		if janitor, _ = dl.parkRequests(r.start); len(janitor) != 2 || janitor[1] != 3*time.Second {
			t.Errorf("park requests at %v; want 2s and 3s", janitor)
		}
	})
}

// The cancel path dials Postgres through the same hook as logins: a
// CancelRequest with the client's key reaches the backend running its
// query, which then ends at once with 57014 rather than after its 10 s.
func TestTimingCancelRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = transaction\n")
		c := r.connect("u", nil)
		got := c.queryAsync("SLEEP")
		r.sleepUntil(time.Second)
		pids := r.serverPIDs()
		if len(pids) != 1 || len(c.key) != 8 {
			t.Fatalf("servers %v, client key %x", pids, c.key)
		}
		mine, theirs := net.Pipe()
		r.svc.serveConn(theirs)
		mine.SetDeadline(time.Now().Add(time.Second))
		if _, err := mine.Write(wire.AppendCancelRequest(nil, c.key)); err != nil {
			t.Fatalf("sending CancelRequest: %v", err)
		}
		var b [1]byte
		if n, err := mine.Read(b[:]); n != 0 || err == nil {
			t.Errorf("the cancel connection answered %d bytes, %v; want it closed without a reply", n, err)
		}
		mine.Close()
		rep := <-got
		if rep.err == nil || rep.err.Code != "57014" || !rep.ready || r.elapsed(rep.at) != time.Second {
			t.Errorf("cancelled query: %v at %v; want ERROR 57014 at 1s", rep, r.elapsed(rep.at))
		}
		r.pg.mu.Lock()
		cancels := append([]int(nil), r.pg.cancels...)
		r.pg.mu.Unlock()
		if len(cancels) != 1 || cancels[0] != pids[0] {
			t.Errorf("the fake got cancels for %v; want [%d]", cancels, pids[0])
		}
	})
}

// skewClock is the system clock an hour ahead, counting the tickers made.
type skewClock struct {
	systemClock
	tickers atomic.Int32
}

func (c *skewClock) Now() time.Time                  { return time.Now().Add(time.Hour) }
func (c *skewClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *skewClock) NewTicker(d time.Duration) ticker {
	c.tickers.Add(1)
	return c.systemClock.NewTicker(d)
}

// The pooler takes its time from Service.clock: the janitor's ticker, the
// timestamps SHOW CLIENTS/SERVERS report, and the lifetime the janitor
// measures against them (a mix with time.Now would be an hour off).
func TestTimingClockIsInjected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &skewClock{}
		r := startTimingRig(t, "pool_mode = transaction\nserver_lifetime = 10\nserver_lifetime_jitter = 0\n",
			func(s *Service) { s.clock = clk })
		if n := clk.tickers.Load(); n != 1 {
			t.Errorf("%d tickers from the clock; want the janitor's", n)
		}
		c := r.connect("u", nil)
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query: %v", rep)
		}
		want := r.start.Add(time.Hour)
		if cl := r.svc.Console().Clients(); len(cl) != 1 || !cl[0].ConnectTime.Equal(want) {
			t.Errorf("SHOW CLIENTS connect_time %v; want the clock's %v", cl, want)
		}
		if sv := r.svc.Console().Servers(); len(sv) != 1 || !sv[0].ConnectTime.Equal(want) || !sv[0].RequestTime.Equal(want) {
			t.Errorf("SHOW SERVERS times %v; want the clock's %v", sv, want)
		}
		r.sleepUntil(10 * time.Second)
		if n := len(r.serverPIDs()); n != 1 {
			t.Errorf("%d servers at 10s; want 1 (server_lifetime 10s is not over)", n)
		}
		r.sleepUntil(10*time.Second + janitorPeriod)
		if n := len(r.serverPIDs()); n != 0 {
			t.Errorf("%d servers at 10.1s; want 0 (server_lifetime over)", n)
		}
	})
}
