package session

import (
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// Route is a Parse's routing (St: final, or decided by its Binds) under
// the map of cluster Of and the session's pins then; a Bind after a
// RELOAD brought another map, or under other pins, prepares the text
// again. St is shared with the cluster's other clients when made with no
// pin (shard.Statements), and never changed.
type Route struct {
	St   *shard.Statement
	Of   *shard.Cluster
	pins uint64
}

// Text is the statement's text ("" for none).
func (sr Route) Text() string {
	if sr.St == nil {
		return ""
	}
	return sr.St.Text
}

// Tx is the statement's transaction control (TxNone for none).
func (sr Route) Tx() shard.TxControl {
	if sr.St == nil {
		return shard.TxNone
	}
	return sr.St.Tx
}

// Statements is a client's Route by statement name. The unnamed
// statement, which most drivers parse again at every transaction, is kept
// inline: its routing is read from the session's own memory, not from a
// map's.
type Statements struct {
	unnamed Route // St nil: none
	named   map[string]Route
}

// Get returns the routing of statement name.
func (s *Statements) Get(name []byte) (Route, bool) {
	if len(name) == 0 {
		return s.unnamed, s.unnamed.St != nil
	}
	sr, ok := s.named[string(name)]
	return sr, ok
}

// Set records the routing of statement name.
func (s *Statements) Set(name []byte, sr Route) {
	if len(name) == 0 {
		s.unnamed = sr
		return
	}
	if s.named == nil {
		s.named = map[string]Route{}
	}
	s.named[string(name)] = sr
}

// Del forgets statement name.
func (s *Statements) Del(name []byte) {
	if len(name) == 0 {
		s.unnamed = Route{}
		return
	}
	delete(s.named, string(name))
}

// Unnamed is the unnamed statement's text ("" for none).
func (s *Statements) Unnamed() string { return s.unnamed.Text() }

// Current reports whether sr was prepared from text under the session's
// map and pins: a Parse of the same text again needs no new routing.
func (s *Session) Current(sr Route, text []byte) bool {
	return sr.St != nil && sr.St.Text == string(text) && sr.Of == s.of && sr.pins == s.pins
}

// Parse records the routing of a Parse of text under name, prepared with
// r unless the client's statement of that name is the same text under the
// same map and pins (the unnamed one of a driver that parses each time).
func (s *Session) Parse(r *shard.Router, name, text []byte) Route {
	sr, ok := s.Stmts.Get(name)
	if !ok || !s.Current(sr, text) {
		sr = s.Prepare(r, text)
		s.Stmts.Set(name, sr)
	}
	return sr
}

// Prepare is a Parse's routing under the map and pins in force: the
// cluster's shared one when the session has no pin.
func (s *Session) Prepare(r *shard.Router, text []byte) Route {
	sr := Route{Of: r.Cluster(), pins: s.pins}
	r.SetEscapeStrings(s.Esc)
	if pin := s.PinNow(); pin.Empty() {
		sr.St = r.Statement(text, s.mayTarget)
	} else {
		sr.St = r.PrepareStatement(text, pin, s.mayTarget)
	}
	return sr
}

// Lookup is the routing of the client's statement stmt, prepared again
// under the map and pins in force when it was under others. textOf is the
// text the pooler's prepared-statement mapping keeps for a name the
// session has not seen (a client that came over in an online restart).
func (s *Session) Lookup(stmt []byte, textOf func(name string) (string, bool)) (Route, bool) {
	sr, known := s.Stmts.Get(stmt)
	if !known {
		text, ok := textOf(string(stmt))
		if !ok {
			return Route{}, false
		}
		sr = Route{St: &shard.Statement{Text: text}}
	}
	if sr.Of != s.of || sr.pins != s.pins {
		// Prepared under an earlier map (its ranges may have moved) or
		// other pins.
		sr = s.Prepare(s.router, []byte(sr.St.Text))
		s.Stmts.Set(stmt, sr)
	}
	return sr, true
}

// shapeRefusal is the decision for what nothing says the rows of.
var shapeRefusal = shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}

// Bind decides a Bind (its body) by its statement's routing.
func (s *Session) Bind(body []byte, textOf func(name string) (string, bool)) shard.Decision {
	_, stmt, _, ok := wire.DecodeBindHead(body)
	if !ok {
		return shard.Decision{}
	}
	sr, ok := s.Lookup(stmt, textOf)
	if !ok {
		// Prepared some other way (SQL PREPARE): nothing says where its
		// rows are.
		return shapeRefusal
	}
	return s.Decide(sr, body)
}

// Decide is the decision for one Bind (its body) of the statement sr.
// The body is handed to the router through the session's bindParams: a
// []byte converted to the BindParams interface would be copied to the
// heap at every Bind.
func (s *Session) Decide(sr Route, body []byte) shard.Decision {
	if sr.St.Prepared == nil {
		return sr.St.Decision
	}
	s.bind.body = body
	d, err := sr.St.Prepared.Bind(&s.bind)
	s.bind.body = nil // the read buffer's: not kept past the message
	if err != nil {
		return shapeRefusal
	}
	return d
}

// bindParams is a Bind body as shard.Prepared.Bind reads it.
type bindParams struct{ body []byte }

func (b *bindParams) Param(i int) (value []byte, binary, null, ok bool) {
	return wire.BindParam(b.body, i)
}

// BindMemo is a Bind's decision, made before the Bind was the current
// message: at, the first byte of its body in the read buffer, and n, its
// length, tell it when it is (the messages between it and the walk are
// already buffered, so it is not moved).
type BindMemo struct {
	at *byte
	n  int
	d  shard.Decision
}

// Of returns the memo's decision for the Bind body, if it is that Bind.
func (m *BindMemo) Of(body []byte) (shard.Decision, bool) {
	if m.at == nil || len(body) != m.n || &body[0] != m.at {
		return shard.Decision{}, false
	}
	return m.d, true
}
