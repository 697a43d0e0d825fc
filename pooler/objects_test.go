package pooler

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/wire"
)

// pathTo is a sequence of legal moves that brings a free server to state.
var pathTo = map[serverState][]serverState{
	serverFree:          nil,
	serverLogin:         {serverLogin},
	serverIdle:          {serverLogin, serverIdle},
	serverActive:        {serverLogin, serverActive},
	serverBeingCanceled: {serverLogin, serverActive, serverBeingCanceled},
	serverClosed:        {serverLogin, serverClosed},
}

// legalMoves is the state machine as the design has it (pool.go's
// comment), written out independently of serverTransitions.
var legalMoves = map[[2]serverState]bool{
	{serverFree, serverLogin}:           true,
	{serverLogin, serverIdle}:           true,
	{serverLogin, serverActive}:         true,
	{serverLogin, serverClosed}:         true,
	{serverIdle, serverActive}:          true,
	{serverIdle, serverClosed}:          true,
	{serverActive, serverIdle}:          true,
	{serverActive, serverBeingCanceled}: true,
	{serverActive, serverClosed}:        true,
	{serverBeingCanceled, serverIdle}:   true,
	{serverBeingCanceled, serverActive}: true,
	{serverBeingCanceled, serverClosed}: true,
}

// poolCounts is what SHOW POOLS and the caps read from a pool.
type poolCounts struct{ login, idle, active, beingCanceled, total int }

func countsOf(p *serverPool) poolCounts {
	return poolCounts{p.connecting, len(p.idle), p.active, p.beingCanceled, p.total}
}

// wantCounts derives the counts from the servers' states, independently of
// the pool's bookkeeping.
func wantCounts(servers []*server) poolCounts {
	var c poolCounts
	for _, s := range servers {
		switch s.state {
		case serverLogin:
			c.login++
		case serverIdle:
			c.idle++
		case serverActive:
			c.active++
		case serverBeingCanceled:
			c.beingCanceled++
		}
	}
	c.total = c.login + c.idle + c.active + c.beingCanceled
	return c
}

// objectsPool is a pool with two idle servers, a and b, around s: the idle
// list is [a, s, b] when s is idle, so s leaves it from the middle.
func objectsPool(t *testing.T, from serverState) (p *serverPool, s *server, all []*server) {
	t.Helper()
	p = benchPool(t, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	idleServer := func() *server {
		x := p.newLoginLocked()
		p.setServerStateLocked(x, serverIdle)
		return x
	}
	a := idleServer()
	s = &server{pool: p, id: 100}
	for _, st := range pathTo[from] {
		p.setServerStateLocked(s, st)
	}
	b := idleServer()
	if s.state != from {
		t.Fatalf("path to %s ends in %s", from, s.state)
	}
	return p, s, []*server{a, s, b}
}

// Every legal move keeps the counts equal to the states and the idle list
// equal to the idle servers, in their order, with an entering server on
// top; every illegal one panics with BUG: and changes nothing.
func TestServerTransitions(t *testing.T) {
	legal := 0
	for from := serverFree; from < numServerStates; from++ {
		for to := serverFree; to < numServerStates; to++ {
			t.Run(from.String()+"->"+to.String(), func(t *testing.T) {
				p, s, all := objectsPool(t, from)
				p.mu.Lock()
				defer p.mu.Unlock()
				before, idleBefore := countsOf(p), slices.Clone(p.idle)
				if got, want := before, wantCounts(all); got != want {
					t.Fatalf("before: counts %+v, want %+v", got, want)
				}
				if !legalMoves[[2]serverState{from, to}] {
					msg := panicOf(func() { p.setServerStateLocked(s, to) })
					if !strings.HasPrefix(msg, "BUG:") || !strings.Contains(msg, from.String()+" -> "+to.String()) {
						t.Fatalf("illegal move panicked with %q, want BUG: … %s -> %s", msg, from, to)
					}
					if s.state != from || countsOf(p) != before || !slices.Equal(p.idle, idleBefore) {
						t.Fatalf("illegal move changed the pool: state %s, counts %+v (were %+v), idle %v (was %v)", s.state, countsOf(p), before, p.idle, idleBefore)
					}
					return
				}
				legal++
				if msg := panicOf(func() { p.setServerStateLocked(s, to) }); msg != "" {
					t.Fatalf("legal move panicked: %s", msg)
				}
				if s.state != to {
					t.Fatalf("state %s after the move, want %s", s.state, to)
				}
				if got, want := countsOf(p), wantCounts(all); got != want {
					t.Fatalf("after: counts %+v, want %+v", got, want)
				}
				// The idle list: the others in their order, s on top if it
				// entered idle.
				var want []*server
				for _, x := range idleBefore {
					if x != s {
						want = append(want, x)
					}
				}
				if to == serverIdle {
					want = append(want, s)
				}
				if !slices.Equal(p.idle, want) {
					t.Fatalf("idle list %v, want %v", p.idle, want)
				}
				if p.svc.settings().ServerRoundRobin {
					t.Fatal("test assumes LIFO checkout")
				}
				if next := p.nextIdleLocked(); next != want[len(want)-1] {
					t.Fatalf("checkout would take %v, want the top %v", next, want[len(want)-1])
				}
			})
		}
	}
	if legal != len(legalMoves) {
		t.Errorf("%d legal moves driven, want %d", legal, len(legalMoves))
	}
}

// panicOf runs f and returns its panic's message ("" if none).
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestServerTransitionInAnotherPoolPanics(t *testing.T) {
	p, _, _ := objectsPool(t, serverIdle)
	other := benchPool(t, 0)
	s := &server{pool: other}
	p.mu.Lock()
	defer p.mu.Unlock()
	if msg := panicOf(func() { p.setServerStateLocked(s, serverLogin) }); !strings.HasPrefix(msg, "BUG:") {
		t.Fatalf("a move in a foreign pool panicked with %q, want BUG:", msg)
	}
	if p.total != 3 {
		t.Fatalf("total %d after a refused move, want 3", p.total)
	}
}

// A server released while a cancel request for it is in flight waits in
// being_canceled, handed to nobody, until the cancel is done; then it goes
// to the next waiter, or idle.
func TestReleaseWaitsForCancel(t *testing.T) {
	p := benchPool(t, 1)
	s, err := p.acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.cancelStarted()
	s.cancelStarted()
	p.release(s)
	p.mu.Lock()
	got := countsOf(p)
	p.mu.Unlock()
	if s.state != serverBeingCanceled || got != (poolCounts{beingCanceled: 1, total: 1}) {
		t.Fatalf("released with cancels in flight: state %s, counts %+v; want being_canceled", s.state, got)
	}
	// A client now waits: it gets the server only when the last cancel
	// is done.
	w := &poolWaiter{}
	_, done := startWait(p, w)
	waitQueued(t, p, 1)
	p.cancelDone(s)
	if s.state != serverBeingCanceled {
		t.Fatalf("state %s after the first of two cancels, want being_canceled", s.state)
	}
	select {
	case err := <-done:
		t.Fatalf("a waiter got the server while a cancel was in flight (err %v)", err)
	default:
	}
	p.cancelDone(s)
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	// startWait's waiter released the server again: idle, no cancels.
	p.mu.Lock()
	got = countsOf(p)
	p.mu.Unlock()
	if s.state != serverIdle || got != (poolCounts{idle: 1, total: 1}) || s.cancels.Load() != 0 {
		t.Fatalf("after the cancels: state %s, counts %+v, cancels %d; want idle", s.state, got, s.cancels.Load())
	}
}

// A cancel that ends while its server is still held leaves the server
// with its holder; release then hands it on at once.
func TestCancelDoneWhileHeld(t *testing.T) {
	p := benchPool(t, 1)
	s, err := p.acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.cancelStarted()
	p.cancelDone(s)
	if s.state != serverActive {
		t.Fatalf("state %s after a cancel done while held, want active", s.state)
	}
	p.release(s)
	p.mu.Lock()
	got := countsOf(p)
	p.mu.Unlock()
	if s.state != serverIdle || got != (poolCounts{idle: 1, total: 1}) {
		t.Fatalf("after release: state %s, counts %+v; want idle", s.state, got)
	}
}

// Service.cancel sends the request with no lock held: while Postgres has
// not answered, the client can take its lock (its pump records a
// ReadyForQuery and lets the server go), and the server then waits in
// being_canceled until the cancel is done, handed to nobody; then it is
// idle.
func TestCancelSendsUnlockedAndHoldsTheServer(t *testing.T) {
	p := benchPool(t, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, err := p.acquire(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.ep = endpoint{network: "tcp", address: ln.Addr().String()} // the cancel target
	s.pid, s.cancelKey = 42, []byte{1, 2, 3, 4}
	c := &client{svc: p.svc, id: 7, pool: p, key: [8]byte{9, 9}}
	c.mu.link = newLink(c)
	c.mu.link.mu.srv = s
	c.mu.link.mu.ls.FromClient(wire.MsgQuery) // a query in flight: the cancel goes to Postgres
	p.svc.registerCancel(c)

	cancelled := make(chan struct{})
	go func() {
		p.svc.cancel(c.key)
		close(cancelled)
	}()
	pg, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	req := make([]byte, 16)
	if _, err := io.ReadFull(pg, req); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, 0, 0, 0, 42, 1, 2, 3, 4}; !bytes.Equal(req, want) {
		t.Fatalf("cancel request % x, want % x", req, want)
	}
	// The cancel waits for Postgres to close the connection: it is in
	// flight, and the client's lock is free.
	if !c.mu.TryLock() {
		t.Fatal("the client's lock is held while the cancel request is on the network")
	}
	c.mu.link.mu.srv = nil
	c.mu.link.mu.ls.ReadyForQuery(wire.TxIdle)
	c.mu.Unlock()
	p.release(s)
	p.mu.Lock()
	state, got := s.state, countsOf(p)
	p.mu.Unlock()
	if state != serverBeingCanceled || got != (poolCounts{beingCanceled: 1, total: 1}) {
		t.Fatalf("released during the cancel: state %s, counts %+v; want being_canceled", state, got)
	}
	pg.Close() // Postgres is done with the cancel
	<-cancelled
	p.mu.Lock()
	state, got = s.state, countsOf(p)
	p.mu.Unlock()
	if state != serverIdle || got != (poolCounts{idle: 1, total: 1}) {
		t.Fatalf("after the cancel: state %s, counts %+v; want idle", state, got)
	}
}

// SHOW POOLS, SHOW SERVERS and the pool gauges read the servers' states:
// one server in each state that has a count, and the columns, rows and
// gauges agree with them.
func TestShowReadsServerStates(t *testing.T) {
	p := benchPool(t, 0)
	p.mu.Lock()
	in := func(path ...serverState) *server {
		s := p.newLoginLocked()
		for _, st := range path[1:] {
			p.setServerStateLocked(s, st)
		}
		if s.state != serverLogin {
			// Logged in: a socket for SHOW SERVERS' addresses, and a
			// place in the pool's server set, as connect gives it.
			a, b := net.Pipe()
			t.Cleanup(func() { a.Close(); b.Close() })
			s.id, s.conn, s.params = p.svc.socketIDs.Add(1), a, map[string]string{}
			if p.servers == nil {
				p.servers = map[*server]struct{}{}
			}
			p.servers[s] = struct{}{}
		}
		return s
	}
	in(serverLogin)
	idle := in(serverLogin, serverIdle)
	active := in(serverLogin, serverActive)
	active.linkedTo.Store(5)
	canceling := in(serverLogin, serverActive, serverBeingCanceled)
	canceling.linkedTo.Store(6) // its last client: no longer linked
	closed := in(serverLogin, serverIdle, serverClosed)
	delete(p.servers, closed) // closeServer's part
	p.mu.Unlock()

	var row *admin.Pool
	pools := p.svc.Console().Pools()
	for i := range pools {
		if pools[i].Database == "bench" {
			row = &pools[i]
		}
	}
	if row == nil {
		t.Fatalf("no SHOW POOLS row for the pool: %+v", pools)
	}
	if row.SvLogin != 1 || row.SvIdle != 1 || row.SvActive != 1 || row.SvBeingCanceled != 1 || row.SvActiveCancel != 0 {
		t.Errorf("SHOW POOLS sv_login %d sv_idle %d sv_active %d sv_being_canceled %d sv_active_cancel %d, want 1 1 1 1 0",
			row.SvLogin, row.SvIdle, row.SvActive, row.SvBeingCanceled, row.SvActiveCancel)
	}

	got := map[string]string{}
	for _, r := range p.svc.Console().Servers() {
		got[r.Ptr] = r.State + " " + r.Link
	}
	want := map[string]string{
		idle.String():      "idle ",
		active.String():    "active C-5",
		canceling.String(): "being_canceled ",
	}
	if !maps.Equal(got, want) {
		t.Errorf("SHOW SERVERS state and link %v, want %v", got, want)
	}

	var out strings.Builder
	p.svc.WriteMetrics(&out)
	for name, v := range map[string]int{"login": 1, "idle": 1, "active": 1, "being_canceled": 1} {
		line := "pgturnstile_pool_servers_" + name + `{database="bench",user="bench"} ` + strconv.Itoa(v) + "\n"
		if !strings.Contains(out.String(), line) {
			t.Errorf("metrics lack %q", line)
		}
	}
}
