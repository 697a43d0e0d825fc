package pooler

import (
	"context"
	"errors"
	"time"
)

// SHUTDOWN WAIT_FOR_SERVERS (and SIGINT) waits for the servers in use to
// be released; in the meantime a client that needs a server for a new
// transaction is not served and not left queued until query_wait_timeout
// either: it is closed with FATAL "server shutting down", as PgBouncer
// closes a client it would pause while shutting down (pause_client) and
// the clients its janitor finds waiting. A client in a transaction keeps
// its server and finishes.

// acquireUnlessShutdown is linkServer's checkout: during SHUTDOWN
// WAIT_FOR_SERVERS it refuses at once, and a wait that the shutdown ended
// (failWaitersForShutdown) is logged as PgBouncer logs the close. The
// error closes the client (FATAL).
func (c *client) acquireUnlessShutdown() (*server, error) {
	if c.svc.waitForServers.Load() {
		return nil, newError(CodeServerShuttingDown)
	}
	s, err := c.pool.acquire(nil, c.link.poolWait)
	var e *Error
	if errors.As(err, &e) && e.Code == CodeServerShuttingDown {
		// fail logs the close as PgBouncer does ("closing because:
		// server shutting down").
		return nil, e
	}
	return s, err
}

// closeWaitersUntil is the shutdown's janitor: every shutdownSweepEvery
// until ctx ends it closes the clients queued in a pool, those that were
// waiting when SHUTDOWN came and any that began to wait just as it came
// (acquireUnlessShutdown refuses the rest). A pass, not at once: like
// PgBouncer, whose janitor closes them (a third of a second later there),
// the SHUTDOWN's answer and the transactions in progress come first.
func (s *Service) closeWaitersUntil(ctx context.Context) {
	t := s.clock.NewTicker(shutdownSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.failWaitersForShutdown()
		}
	}
}

// shutdownSweepEvery is closeWaitersUntil's period, the janitor's.
const shutdownSweepEvery = 100 * time.Millisecond

// failWaitersForShutdown takes every client queued in a pool out of the
// queue and ends its wait with "server shutting down" (logged by the
// client, acquireUnlessShutdown).
func (s *Service) failWaitersForShutdown() {
	for _, p := range s.poolsOf("") {
		p.mu.Lock()
		var failed []*poolWaiter
		for w := p.queue.Oldest(); w != nil; w = p.queue.Oldest() {
			p.queue.Remove(w)
			failed = append(failed, w.Data.(*poolWaiter))
		}
		if failed != nil {
			p.queued.Store(int32(p.queue.Len()))
		}
		p.mu.Unlock()
		// Each waiter owns its grant's one slot, emptied when its wait
		// began: these sends do not block.
		for _, w := range failed {
			w.grant <- grant{err: newError(CodeServerShuttingDown)}
		}
	}
}
