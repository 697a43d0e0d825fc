package pooler

import (
	"context"
	"net"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// SHUTDOWN WAIT_FOR_SERVERS (and SIGINT) waits for the servers in use to
// be released; in the meantime a client that needs a server for a new
// transaction is not served and not left queued until query_wait_timeout
// either: it is closed with FATAL "server shutting down", as PgBouncer
// closes a client it would pause while shutting down (pause_client) and
// the clients its janitor finds waiting. A client in a transaction keeps
// its server and finishes.

// closeWaitersUntil is the shutdown's janitor: every shutdownSweepEvery
// until ctx ends it closes the clients queued in a pool, those that were
// waiting when SHUTDOWN came and any that began to wait just as it came
// (link.acquire refuses the rest). A pass, not at once: like
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
// client, link.acquire).
func (s *Service) failWaitersForShutdown() {
	for _, p := range s.poolsOf("") {
		p.mu.Lock()
		var failed []*poolWaiter
		for w := p.queue.oldest(); w != nil; w = p.queue.oldest() {
			p.queue.remove(w)
			failed = append(failed, w)
		}
		if failed != nil {
			p.queued.Store(int32(p.queue.len()))
		}
		p.mu.Unlock()
		// Each waiter owns its grant's one slot, emptied when its wait
		// began: these sends do not block.
		for _, w := range failed {
			w.give(grant{err: pgerror.New(pgerror.ServerShuttingDown)})
		}
	}
}

// SHUTDOWN WAIT_FOR_CLIENTS (SIGTERM) is the rolling restart's step: the
// TCP listeners close, so that new connections go to the other processes
// sharing the port (so_reuseport), and the process ends when its last
// client has left. A connection this process accepted on TCP was made
// before the listener closed, so it is one of the clients the shutdown
// waits for: its login goes on even if it was still under way when the
// shutdown came, where PgBouncer refuses it ("pooler is shutting down")
// and a rolling restart would lose it. Logins over the Unix socket, which
// stays open for the console and for cancel requests, are refused as in
// PgBouncer.

// admitDuringShutdown reports whether client c may still log in to a
// database while the pooler shuts down.
func (s *Service) admitDuringShutdown(c *client) bool {
	return s.waitForClients.Load() && !s.waitForServers.Load() && !c.local
}

// countTCPAccept counts a TCP listener's accept loop as running until the
// function it returns is called, when the loop has ended: the loop hands
// each connection to serveConn, which counts the client, before it ends,
// so that clientsGone cannot miss a connection accepted just before the
// listener closed.
func (s *Service) countTCPAccept(ln net.Listener) func() {
	if _, unix := ln.(*net.UnixListener); unix {
		return func() {}
	}
	s.tcpAccepting.Add(1)
	return func() {
		s.tcpAccepting.Add(-1)
		s.changes.Notify()
	}
}

// clientsGone is SHUTDOWN WAIT_FOR_CLIENTS's condition: no TCP accept loop
// left and no client.
func (s *Service) clientsGone() bool {
	return s.tcpAccepting.Load() == 0 && s.clientCount.Load() <= 0
}
