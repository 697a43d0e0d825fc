package session

import (
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Session is a sharded cluster client's routing state.
type Session struct {
	// Cluster is the cluster's name, as the client gave it.
	Cluster string
	// router is the cluster's router under the map it was made from
	// (of); remade when a RELOAD brings another map (Use).
	router *shard.Router
	of     *shard.Cluster
	// Pin is SET pgturnstile.* for the session (and the startup
	// options); Local is SET LOCAL's, for the transaction.
	Pin, Local shard.Pin
	// pins counts changes of Pin and Local: a statement prepared under
	// other pins is prepared again at its Bind.
	pins uint64
	// Held is a BEGIN the pooler answered while no server was linked,
	// and the SAVEPOINT, RELEASE, ROLLBACK TO and SET LOCAL after it:
	// their Query messages (HeldN of them), sent ahead of the
	// transaction's first statement (TakeHeld).
	Held  []byte
	HeldN int
	// Stmts is the routing part of the client's prepared statements, by
	// the client's name ("" for the unnamed one): what a later Bind needs.
	Stmts Statements
	// Last is the database of the client's last transaction, where a
	// Parse or Describe that decides nothing goes.
	Last string
	// mayTarget: the client may name a shard (admin_users,
	// target_users), as of the map of is from.
	mayTarget bool
	// Esc is the session's standard_conforming_strings as the router
	// needs it (off: '…' takes backslash escapes).
	Esc bool
	// Memo is the decision the batch walk (BatchDecision) made for a
	// Bind still ahead in the read buffer, for that Bind when it is read:
	// one decision per Bind. The pooler clears it at every message it
	// decides.
	Memo BindMemo
	// bind is the current Bind's body as Route.Decide hands it to the
	// router.
	bind bindParams
}

// New is the session of a client of cluster, pinned by its startup
// options (pin).
func New(cluster string, pin shard.Pin) Session {
	return Session{Cluster: cluster, Pin: pin}
}

// Use makes the session's router the one of cl, the cluster's entry in
// the map in force; mayTarget says whether the client may name a shard
// under it, asked only when the map changed. nil when cl is (a RELOAD
// removed the cluster).
func (s *Session) Use(cl *shard.Cluster, mayTarget func(*shard.Cluster) bool) *shard.Router {
	if cl == nil {
		return nil
	}
	if s.of != cl {
		s.router, s.of = shard.NewRouter(cl), cl
		s.mayTarget = mayTarget(cl)
	}
	return s.router
}

// Router is the router Use last made (nil before).
func (s *Session) Router() *shard.Router { return s.router }

// Map is the cluster's entry in the map the router is from (nil before
// Use).
func (s *Session) Map() *shard.Cluster { return s.of }

// MayTarget reports whether the client may name a shard.
func (s *Session) MayTarget() bool { return s.mayTarget }

// PinNow is the pin in force: SET LOCAL's over the session's.
func (s *Session) PinNow() shard.Pin {
	p := s.Pin
	if s.Local.Key != nil {
		p.Key, p.Colo = s.Local.Key, s.Local.Colo
	}
	if s.Local.Shard != "" {
		p.Shard = s.Local.Shard
	}
	return p
}

// EndLocal forgets SET LOCAL's pin once its transaction is over (idle:
// the client's server, if any, is idle outside a transaction).
func (s *Session) EndLocal(idle bool) {
	if idle && s.Held == nil && !s.Local.Empty() {
		s.Local = shard.Pin{}
		s.pins++
	}
}

// Route decides a simple Query's text under the pins in force.
func (s *Session) Route(r *shard.Router, text []byte) shard.Decision {
	r.SetEscapeStrings(s.Esc) // with off, '…' takes backslash escapes, for the router as for Postgres
	return r.Route(text, s.PinNow(), s.mayTarget)
}

// LastDecision sends what decides nothing (a Parse, a Describe) where the
// client's last transaction ran, or to the default database.
func (s *Session) LastDecision() shard.Decision {
	db := s.Last
	if db == "" && s.of != nil {
		db = s.of.DefaultDatabase
	}
	return shard.Decision{Source: shard.SourceDefault, Database: db}
}

// InTransaction reports a BEGIN the pooler holds.
func (s *Session) InTransaction() bool { return s.Held != nil }

// HeldStatus is the transaction status of the client while no server is
// linked: 'T' while its BEGIN is held.
func (s *Session) HeldStatus() byte {
	if s.Held != nil {
		return wire.TxInBlock
	}
	return wire.TxIdle
}

// TakeHeld returns the held statements (n Query messages) to send ahead
// of the transaction's first statement, and forgets them.
func (s *Session) TakeHeld() (msgs []byte, n int) {
	msgs, n = s.Held, s.HeldN
	s.Held, s.HeldN = nil, 0
	return msgs, n
}

// Movable reports whether the session holds nothing another process
// could not rebuild from the client's statements (an online restart):
// no held BEGIN, no pins.
func (s *Session) Movable() bool {
	return s.Held == nil && s.Pin.Empty() && s.Local.Empty()
}

// RefusalText is a refusal's message, DETAIL and HINT (the router's
// words), or, for a cluster a RELOAD removed, the word to reconnect.
func (s *Session) RefusalText(d shard.Decision) (msg, detail, hint string) {
	if d.Reason == shard.ReasonShape && len(d.Table) == 0 && s.of == nil {
		return "pgturnstile: cluster \"" + s.Cluster + "\" is no longer in the shard file", "", "Reconnect."
	}
	return shard.RefusalText(d)
}

// CrossShardText is shard.CrossShardText, with RefusalText's words for a
// refusal.
func (s *Session) CrossShardText(d shard.Decision, pinned string) (msg, detail, hint string) {
	if d.Source == shard.SourceRefused {
		return s.RefusalText(d)
	}
	return shard.CrossShardText(d, pinned)
}

// CrossShardQuery is what a linked transaction's server gets in place of
// a simple Query the router sends to another shard, or refuses: a Query
// on which Postgres raises 0A000 itself, so the transaction ends failed on
// both sides and the client's ROLLBACK works as usual.
func (s *Session) CrossShardQuery(d shard.Decision, pinned string) []byte {
	return RaiseQuery(s.CrossShardText(d, pinned))
}

// RaiseQuery is a Query that makes Postgres raise 0A000 with msg, detail
// and hint.
func RaiseQuery(msg, detail, hint string) []byte {
	return wire.AppendQuery(nil, shard.RaiseSQL(msg, detail, hint))
}
