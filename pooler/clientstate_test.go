package pooler

import (
	"fmt"
	"strings"
	"testing"
)

// allClientStates lists every client state, for the exhaustive checks.
var allClientStates = []clientState{
	clientLogin, clientWelcome, clientIdle, clientWaiting, clientActive, clientParked, clientDraining, clientClosed,
}

// legalClientTransitions is the client's life as the code lives it, written
// out here independently of clientTransitions, with where each happens.
var legalClientTransitions = []struct {
	from, to clientState
	where    string
}{
	{clientLogin, clientWelcome, "joinPool: enterPool"},
	{clientLogin, clientClosed, "login failed before joining a pool; an admin console session"},
	{clientWelcome, clientIdle, "startLoop after login"},
	{clientWelcome, clientClosed, "first server login or welcome failed"},
	{clientIdle, clientWaiting, "linkServer"},
	{clientIdle, clientParked, "tryPark"},
	{clientIdle, clientClosed, "left with no server linked"},
	{clientWaiting, clientActive, "linkServer linked"},
	{clientWaiting, clientIdle, "endWait: cancelled, shed, failed"},
	{clientWaiting, clientClosed, "goroutine ended in the wait (recovered panic)"},
	{clientActive, clientIdle, "unlinkServerLocked: released, lost, closed"},
	{clientActive, clientDraining, "abandonLink, relayFailed"},
	{clientActive, clientClosed, "goroutine ended linked (recovered panic)"},
	{clientActive, clientParked, "tryPark: a session client with its idle server, suspended"},
	{clientParked, clientIdle, "startLoop after resume"},
	{clientParked, clientActive, "startLoop after resume, the server it parked with linked again"},
	{clientParked, clientClosed, "resume failed or killed"},
	{clientDraining, clientClosed, "clientClosed after leave"},
}

// TestClientTransitionsLegal drives every legal transition on a client of
// a pool whose counts already hold other clients, and checks the state,
// gone, and that the pool's count of the old state went down by one and of
// the new state up by one (a state out of the pool, login or closed, not
// counted at all), the others untouched.
func TestClientTransitionsLegal(t *testing.T) {
	for _, tc := range legalClientTransitions {
		t.Run(tc.from.String()+"->"+tc.to.String(), func(t *testing.T) {
			p := &serverPool{}
			// Other clients of the pool, two in each state it counts,
			// and this one in its state.
			for _, s := range allClientStates {
				if s.inPool() {
					p.clientsIn[s].Store(2)
					p.clients.Add(2)
				}
			}
			c := testClientIn(tc.from, p)
			if tc.from.inPool() {
				p.clientsIn[tc.from].Add(1)
				p.clients.Add(1)
			}
			before := clientCounts(p)
			c.mu.Lock()
			c.setStateLocked(tc.to)
			c.mu.Unlock()
			if c.mu.state != tc.to {
				t.Fatalf("%s (%s): state is %s, want %s", tc.from, tc.where, c.mu.state, tc.to)
			}
			if want := tc.to == clientDraining; c.gone.Load() != want {
				t.Fatalf("%s -> %s: gone = %v, want %v", tc.from, tc.to, c.gone.Load(), want)
			}
			want := before
			if tc.from.inPool() {
				want[tc.from]--
				want[numClientStates]--
			}
			if tc.to.inPool() {
				want[tc.to]++
				want[numClientStates]++
			}
			if got := clientCounts(p); got != want {
				t.Fatalf("%s -> %s (%s): pool counts %v, want %v", tc.from, tc.to, tc.where, got, want)
			}
			wantIn := 2 * 6 // the others: two in each of the six states counted
			if tc.to.inPool() {
				wantIn++
			}
			if got := p.clientsInPool(); got != wantIn {
				t.Fatalf("%s -> %s: %d clients in the pool, want %d", tc.from, tc.to, got, wantIn)
			}
		})
	}
}

// clientCounts copies the pool's per-state client counts and, last, their
// sum as the pool keeps it, after checking that it is their sum.
func clientCounts(p *serverPool) (n [numClientStates + 1]int32) {
	var sum int32
	for s := range numClientStates {
		n[s] = p.clientsIn[s].Load()
		sum += n[s]
	}
	n[numClientStates] = p.clients.Load()
	if sum != n[numClientStates] {
		panic(fmt.Sprintf("the pool counts %d clients, its states %d (%v)", n[numClientStates], sum, n))
	}
	return n
}

// TestClientCountsFollowALife drives one client of a pool through a life
// that visits every state (login, welcome, idle, waiting, active, idle,
// parked, idle, waiting, active, draining, closed) and checks after each
// step that the pool counts it once, in its state, from welcome until
// closed, and not at all before or after; then a second client whose
// login fails after it joined leaves the counts at zero too.
func TestClientCountsFollowALife(t *testing.T) {
	p := &serverPool{}
	c := &client{id: 7, pool: p}
	check := func(step string) {
		t.Helper()
		var want [numClientStates + 1]int32
		if c.mu.state.inPool() {
			want[c.mu.state] = 1
			want[numClientStates] = 1
		}
		if got := clientCounts(p); got != want {
			t.Fatalf("%s: pool counts %v, want %v", step, got, want)
		}
		if got, want := p.clientsInPool(), int(want[c.mu.state]); got != want {
			t.Fatalf("%s: %d clients in the pool, want %d", step, got, want)
		}
	}
	check("login")
	c.enterPool()
	check("joined")
	for _, to := range []clientState{clientIdle, clientWaiting, clientActive, clientIdle,
		clientParked, clientIdle, clientWaiting, clientActive, clientDraining, clientClosed} {
		c.mu.Lock()
		c.setStateLocked(to)
		c.mu.Unlock()
		check(to.String())
	}

	failed := &client{id: 8, pool: p}
	failed.enterPool()
	if got := p.clientsIn[clientWelcome].Load(); got != 1 {
		t.Fatalf("a client that joined the pool: welcome count %d, want 1", got)
	}
	failed.mu.Lock()
	failed.setStateLocked(clientClosed)
	failed.mu.Unlock()
	if got := p.clientsInPool(); got != 0 {
		t.Fatalf("after a login that failed in the pool: %d clients, want 0", got)
	}
}

// TestClientWithoutPoolCannotEnterCounts: a state the pool counts cannot be
// entered by a client with no pool (it would be counted nowhere); the
// panic leaves the client as it was.
func TestClientWithoutPoolCannotEnterCounts(t *testing.T) {
	c := testClientIn(clientLogin, nil)
	msg := setStateRecovering(c, clientWelcome)
	if want := "BUG: client C-7: login -> welcome with no pool"; !strings.HasPrefix(msg, want) {
		t.Fatalf("panic %q, want one starting %q", msg, want)
	}
	if c.mu.state != clientLogin {
		t.Fatalf("state after the refused move %s, want login", c.mu.state)
	}
	// An admin console client has no pool and leaves from login.
	if msg := setStateRecovering(c, clientClosed); msg != "" {
		t.Fatalf("login -> closed with no pool: panic %q", msg)
	}
}

func TestClientTransitionsIllegalPanic(t *testing.T) {
	legal := map[[2]clientState]bool{}
	for _, tc := range legalClientTransitions {
		legal[[2]clientState{tc.from, tc.to}] = true
	}
	illegal := 0
	for _, from := range allClientStates {
		for _, to := range allClientStates {
			if legal[[2]clientState{from, to}] {
				continue
			}
			illegal++
			p := &serverPool{}
			if from.inPool() {
				p.clientsIn[from].Store(1)
				p.clients.Store(1)
			}
			before := clientCounts(p)
			msg := setStateRecovering(testClientIn(from, p), to)
			want := fmt.Sprintf("BUG: client C-7: %s -> %s is not a legal transition", from, to)
			if !strings.HasPrefix(msg, want) {
				t.Errorf("%s -> %s: panic %q, want one starting %q", from, to, msg, want)
			}
			if got := clientCounts(p); got != before {
				t.Errorf("%s -> %s refused, yet the pool counts changed: %v, were %v", from, to, got, before)
			}
		}
	}
	// 8 states, 16 legal moves: every other pair, the same state twice
	// included, must be refused.
	if want := len(allClientStates)*len(allClientStates) - len(legalClientTransitions); illegal != want {
		t.Fatalf("checked %d illegal transitions, want %d", illegal, want)
	}
}

// setStateRecovering runs setStateLocked and returns its panic message, ""
// when it did not panic.
func setStateRecovering(c *client, to clientState) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setStateLocked(to)
	return ""
}

// TestClientStateShow pins SHOW CLIENTS' words for each state, as they
// were derived from the link's flags before the states existed.
func TestClientStateShow(t *testing.T) {
	cases := []struct {
		st     clientState
		linked bool
		want   string
	}{
		{clientLogin, false, "idle"},
		{clientWelcome, false, "idle"},
		{clientIdle, false, "idle"},
		{clientWaiting, false, "waiting"},
		{clientActive, true, "active"},
		{clientParked, false, "idle"},
		{clientDraining, true, "active"},
		{clientDraining, false, "idle"},
		{clientClosed, false, "idle"},
	}
	for _, tc := range cases {
		if got := tc.st.show(tc.linked); got != tc.want {
			t.Errorf("%s (linked %v): SHOW CLIENTS state %q, want %q", tc.st, tc.linked, got, tc.want)
		}
	}
}

// TestUnlinkServerKeepsDraining: a server leaving the link makes an active
// client idle, and leaves a draining or closed one as it is.
func TestUnlinkServerKeepsDraining(t *testing.T) {
	for _, tc := range []struct{ from, want clientState }{
		{clientActive, clientIdle},
		{clientDraining, clientDraining},
		{clientClosed, clientClosed},
	} {
		c := testClientIn(tc.from, &serverPool{})
		c.mu.link = newLink(c)
		c.mu.link.mu.srv = &server{}
		c.mu.Lock()
		c.mu.link.unlinkServerLocked()
		c.mu.Unlock()
		if c.mu.state != tc.want || c.mu.link.mu.srv != nil {
			t.Errorf("%s: after unlinkServerLocked state %s, srv %v; want %s, nil", tc.from, c.mu.state, c.mu.link.mu.srv, tc.want)
		}
	}
}

// testClientIn is client C-7 of pool p in state st.
func testClientIn(st clientState, p *serverPool) *client {
	c := &client{id: 7, pool: p}
	c.mu.state = st
	return c
}
