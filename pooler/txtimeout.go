package pooler

import (
	"time"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// transaction_timeout (PgBouncer 1.25) bounds how long a client's
// transaction may hold its server, from the first request of the
// transaction (link.xactStart) to the ReadyForQuery 'I' that ends it,
// whether a query is running or the client is idle in it. Like
// query_timeout and idle_transaction_timeout it is a read deadline: on the
// server while a reply is awaited (forward, pumpTimeout), on the client
// while serve reads it (armClientDeadline, clientTimedOut); whichever
// fires closes the client with "transaction timeout" and the server with
// that reason.

// txRemainingLocked returns how much of transaction_timeout the client's
// open transaction has left (<= 0: it is over), and false when none is
// timed: the setting is off, no server is linked, or the link is idle
// outside a transaction. Called with c.mu held.
func (c *client) txRemainingLocked(st *config.Settings) (time.Duration, bool) {
	l := c.mu.link
	if st.TransactionTimeout <= 0 || l.mu.srv == nil || (l.mu.ls.Idle() && l.mu.ls.TxStatus() == wire.TxIdle) {
		return 0, false
	}
	return st.TransactionTimeout - c.svc.clock.Since(l.mu.xactStart), true
}

// earliest returns the shorter of two durations, each counted only when
// its flag is set; false when neither is.
func earliest(a time.Duration, aOK bool, b time.Duration, bOK bool) (time.Duration, bool) {
	switch {
	case aOK && bOK:
		return min(a, b), true
	case aOK:
		return a, true
	case bOK:
		return b, true
	}
	return 0, false
}
