package pooler

import (
	"fmt"
	"strings"
	"testing"
)

// allClientStates lists every client state, for the exhaustive checks.
var allClientStates = []clientState{
	clientLogin, clientIdle, clientWaiting, clientActive, clientParked, clientDraining, clientClosed,
}

// legalClientTransitions is the client's life as the code lives it, written
// out here independently of clientTransitions, with where each happens.
var legalClientTransitions = []struct {
	from, to clientState
	where    string
}{
	{clientLogin, clientIdle, "startLoop after login"},
	{clientLogin, clientClosed, "login failed"},
	{clientIdle, clientWaiting, "linkServer"},
	{clientIdle, clientParked, "tryPark"},
	{clientIdle, clientClosed, "left with no server linked"},
	{clientWaiting, clientActive, "linkServer linked"},
	{clientWaiting, clientIdle, "endWait: cancelled, shed, failed"},
	{clientWaiting, clientClosed, "goroutine ended in the wait (recovered panic)"},
	{clientActive, clientIdle, "unlinkServerLocked: released, lost, closed"},
	{clientActive, clientDraining, "abandonLink, relayFailed"},
	{clientActive, clientClosed, "goroutine ended linked (recovered panic)"},
	{clientParked, clientIdle, "startLoop after resume"},
	{clientParked, clientClosed, "resume failed or killed"},
	{clientDraining, clientClosed, "clientClosed after leave"},
}

func TestClientTransitionsLegal(t *testing.T) {
	for _, tc := range legalClientTransitions {
		t.Run(tc.from.String()+"->"+tc.to.String(), func(t *testing.T) {
			c := &client{id: 7, state: tc.from}
			c.mu.Lock()
			c.setStateLocked(tc.to)
			c.mu.Unlock()
			if c.state != tc.to {
				t.Fatalf("%s (%s): state is %s, want %s", tc.from, tc.where, c.state, tc.to)
			}
			if want := tc.to == clientDraining; c.gone.Load() != want {
				t.Fatalf("%s -> %s: gone = %v, want %v", tc.from, tc.to, c.gone.Load(), want)
			}
		})
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
			msg := setStateRecovering(&client{id: 7, state: from}, to)
			want := fmt.Sprintf("BUG: client C-7: %s -> %s ", from, to)
			if !strings.HasPrefix(msg, want) {
				t.Errorf("%s -> %s: panic %q, want one starting %q", from, to, msg, want)
			}
		}
	}
	// 7 states, 14 legal moves: every other pair, the same state twice
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
		c := &client{id: 7, state: tc.from, link: newLink(nil)}
		c.link.srv = &server{}
		c.mu.Lock()
		c.unlinkServerLocked()
		c.mu.Unlock()
		if c.state != tc.want || c.link.srv != nil {
			t.Errorf("%s: after unlinkServerLocked state %s, srv %v; want %s, nil", tc.from, c.state, c.link.srv, tc.want)
		}
	}
}
