package pooler

import "github.com/pgturnstile/pgturnstile/wire"

// server_fast_close: in session mode a server that RECONNECT or a RELOAD
// marked close_needed would otherwise stay with its client until the
// client leaves. With the setting, the janitor's pass (and RECONNECT's own
// maintain) takes it as soon as it is idle between transactions: the
// client gets FATAL "database configuration changed" and the server is
// closed with that reason, as PgBouncer's janitor does for a ready server.
// The server is closed under the pump's feet, like an eviction: its pump
// reports it (lostReasonLocked reads fastClosed).

// fastClose closes the close_needed servers of p linked to a client and
// idle outside a transaction. Called with no lock held.
func (p *serverPool) fastClose() {
	var doomed map[*server]bool
	p.mu.Lock()
	for s := range p.servers {
		if s.state == serverActive && s.closeNeeded && s.linkedTo.Load() != 0 {
			if doomed == nil {
				doomed = map[*server]bool{}
			}
			doomed[s] = true
		}
	}
	p.mu.Unlock()
	if doomed == nil {
		return
	}
	for _, c := range p.svc.allClients() {
		c.mu.Lock()
		var s *server
		if c.mu.link != nil && doomed[c.mu.link.mu.srv] && c.mu.link.serve.pumpStarted && !c.gone.Load() && !c.mu.link.mu.detach &&
			!c.mu.link.mu.writing && c.mu.link.mu.ls.Idle() && c.mu.link.mu.ls.TxStatus() == wire.TxIdle {
			s = c.mu.link.mu.srv
			s.fastClosed.Store(true)
		}
		c.mu.Unlock()
		if s != nil {
			s.conn.Close() // wakes the pump, which tells the client
		}
	}
}
