package session

import (
	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// What the pooler answers itself for a cluster's client while no server
// is linked: SET [LOCAL] pgturnstile.*, a BEGIN (held, and sent ahead of
// the transaction's first statement on the shard it picks), the
// SAVEPOINT, RELEASE, ROLLBACK TO and SET LOCAL of a held transaction,
// and its COMMIT or ROLLBACK — by simple Query or as a batch of only
// those.

// Answer is what AnswerQuery made of a simple Query.
type Answer uint8

const (
	NotAnswered Answer = iota // the pooler routes it
	Answered                  // out is the reply, to end with ReadyForQuery
	BadHint                   // a SET pgturnstile.* the router refuses (0A000)
)

// AnswerQuery answers the simple queries the pooler answers itself:
// SET [LOCAL] pgturnstile.* (linked or not), and BEGIN, COMMIT, ROLLBACK
// and what a held transaction says before its first statement while no
// server is linked. out is the reply to send, before ReadyForQuery
// (HeldStatus).
func (s *Session) AnswerQuery(text []byte, linked bool) (out []byte, a Answer) {
	if !shard.MaybeControl(text) {
		return nil, NotAnswered // the common case: not looked at again
	}
	if sh, found, err := shard.ReadSet(text); found {
		if err != nil {
			return nil, BadHint
		}
		switch {
		case sh.Local && s.Held == nil && !linked:
			// As Postgres: a warning, and nothing set.
			out = wire.AppendErrorResponse(nil, wire.MsgNoticeResponse, "WARNING", "25P01", "SET LOCAL can only be used in transaction blocks", "", "")
		case sh.Local:
			s.Local.Set(sh.Name, pinValue(sh))
			s.pins++
		default:
			s.Pin.Set(sh.Name, pinValue(sh))
			s.pins++
		}
		return wire.AppendCommandComplete(out, "SET"), Answered
	}
	if linked {
		return nil, NotAnswered
	}
	kind, start := shard.ReadTxControl(text)
	if kind == shard.TxBegin || s.Held != nil && kind != shard.TxNone {
		return s.ApplyTx(nil, kind, start, string(text)), Answered
	}
	return nil, NotAnswered
}

// pinValue is a SET's value for a pin (a copy: the statement's buffer
// is reused), nil for RESET.
func pinValue(sh shard.SetHint) []byte {
	if sh.Reset {
		return nil
	}
	return append([]byte(nil), sh.Value...)
}

// ApplyTx applies one transaction-control statement the pooler answers
// (text, as the client wrote it) to the held transaction and appends its
// reply to out.
func (s *Session) ApplyTx(out []byte, kind shard.TxControl, start bool, text string) []byte {
	switch {
	case kind == shard.TxBegin && s.Held != nil:
		out = wire.AppendErrorResponse(out, wire.MsgNoticeResponse, "WARNING", "25001", "there is already a transaction in progress", "", "")
	case kind == shard.TxBegin:
		s.Held, s.HeldN = wire.AppendQuery(nil, text), 1
	case kind.HeldInTransaction():
		s.Held = wire.AppendQuery(s.Held, text)
		s.HeldN++
	default: // COMMIT or ROLLBACK of the held transaction
		s.Held, s.HeldN, s.Local = nil, 0, shard.Pin{}
		s.pins++
	}
	return wire.AppendCommandComplete(out, kind.Tag(start))
}

// TxBatch is a whole buffered batch of only transaction control, which
// the pooler answers message by message (Answer).
type TxBatch struct {
	stmts   map[string]Route // the batch's Parses, by name
	portals map[string]Route // its Binds, by portal
}

// TxOnly approves a whole buffered batch b, with no server linked, that is
// only transaction control the pooler answers itself: a BEGIN (held, as a
// simple BEGIN is), the SAVEPOINT, RELEASE, ROLLBACK TO and SET LOCAL of
// a held transaction, its COMMIT or ROLLBACK. Anything else, or a batch
// not yet whole, is not approved (ok false). cur is the routing of the
// first message when it is a Parse; nameInUse reports a statement name the
// client has prepared on servers (a Parse of it is Postgres' 42P05).
func (s *Session) TxOnly(b Batch, cur *Route, nameInUse func(string) bool) (tb *TxBatch, ok bool) {
	held := s.Held != nil
	portals := map[string]shard.TxControl{}
	stmts := map[string]Route{}
	ok = true
	for m, more := b.Next(); more && ok; m, more = b.Next() {
		switch m.Type {
		case wire.MsgParse:
			name, text, _, okp := wire.DecodeParse(m.Body)
			if !okp {
				ok = false
				break
			}
			var sr Route
			if b.N == 1 && cur != nil {
				sr = *cur
			} else {
				st := &shard.Statement{Text: string(text)}
				st.Tx, _ = shard.ReadTxControl(text)
				sr.St = st
			}
			if sr.Tx() == shard.TxNone || len(name) > 0 && nameInUse(string(name)) {
				ok = false
				break
			}
			stmts[string(name)] = sr
		case wire.MsgBind:
			portal, stmt, _, okb := wire.DecodeBindHead(m.Body)
			sr, known := stmts[string(stmt)]
			if !known && okb {
				sr, known = s.Stmts.Get(stmt)
			}
			if !okb || !known || sr.Tx() == shard.TxNone {
				ok = false
				break
			}
			portals[string(portal)] = sr.Tx()
		case wire.MsgExecute:
			portal, oke := wire.DecodeExecute(m.Body)
			kind, known := portals[string(portal)]
			switch {
			case !oke || !known:
				ok = false
			case kind == shard.TxBegin:
				held = true
			case kind.HeldInTransaction() && held:
			case (kind == shard.TxCommit || kind == shard.TxRollback) && held:
				held = false
			default:
				ok = false // outside a held transaction: Postgres answers
			}
		case wire.MsgDescribe, wire.MsgClose, wire.MsgSync, wire.MsgFlush:
		default:
			ok = false
		}
	}
	if !ok || !b.Synced {
		return nil, false
	}
	return &TxBatch{stmts: stmts, portals: map[string]Route{}}, true
}

// Answer appends the reply to one message of an approved batch, as
// Postgres would answer it, and applies it to the session. A Flush or a
// Sync appends nothing: the pooler sends what it has then (with
// ReadyForQuery at the Sync).
func (s *Session) Answer(out []byte, tb *TxBatch, m Msg) []byte {
	switch m.Type {
	case wire.MsgParse:
		name, _, _, _ := wire.DecodeParse(m.Body)
		s.Stmts.Set(name, tb.stmts[string(name)])
		return append(out, wire.MsgParseComplete, 0, 0, 0, 4)
	case wire.MsgBind:
		portal, stmt, _, _ := wire.DecodeBindHead(m.Body)
		sr, ok := tb.stmts[string(stmt)]
		if !ok {
			sr, _ = s.Stmts.Get(stmt)
		}
		tb.portals[string(portal)] = sr
		return append(out, wire.MsgBindComplete, 0, 0, 0, 4)
	case wire.MsgDescribe:
		if len(m.Body) > 0 && m.Body[0] == 'S' {
			out = append(out, wire.MsgParameterDescription, 0, 0, 0, 6, 0, 0)
		}
		return append(out, wire.MsgNoData, 0, 0, 0, 4)
	case wire.MsgExecute:
		portal, _ := wire.DecodeExecute(m.Body)
		sr := tb.portals[string(portal)]
		_, start := shard.ReadTxControl([]byte(sr.Text()))
		return s.ApplyTx(out, sr.Tx(), start, sr.Text())
	case wire.MsgClose:
		if target, name, ok := wire.DecodeTarget(m.Body); ok && target == 'S' {
			s.Stmts.Del(name)
		}
		return append(out, wire.MsgCloseComplete, 0, 0, 0, 4)
	}
	return out
}
