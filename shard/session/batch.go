package session

import (
	"encoding/binary"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// An extended-protocol batch of a sharded cluster's client: the messages
// up to its Sync are one transaction, so the batch is routed as a whole,
// by its first Bind that decides a shard — a JDBC batch of BEGIN and an
// INSERT goes, BEGIN included, to the INSERT's shard. A batch of only
// transaction control (pgbench -M extended's BEGIN, a driver's prepared
// COMMIT of a transaction that never reached a server) is answered by the
// pooler, as a simple BEGIN is (txanswer.go). Only what the client has
// sent is looked at: a batch still arriving is routed by what has come.

// Msg is one message of a batch, read from the client's buffer.
type Msg struct {
	Type byte
	Body []byte
}

// Batch walks the current message and each whole message buffered
// behind it (ahead: the read buffer after the current message), up to and
// including a Sync.
type Batch struct {
	cur   Msg
	ahead []byte
	// N is the number of messages returned; Synced reports that the
	// Sync was reached (the batch is whole in the buffer).
	N      int
	Synced bool
}

// NewBatch walks the batch that starts with the current message (typ,
// body), ahead being the bytes buffered after it.
func NewBatch(typ byte, body, ahead []byte) Batch {
	return Batch{cur: Msg{typ, body}, ahead: ahead}
}

// Next returns the next message, false at the batch's end (its Sync
// returned, or the buffer's end).
func (b *Batch) Next() (Msg, bool) {
	if b.Synced {
		return Msg{}, false
	}
	var m Msg
	if b.N == 0 {
		m = b.cur
	} else {
		if len(b.ahead) < 5 {
			return Msg{}, false
		}
		mlen := int(binary.BigEndian.Uint32(b.ahead[1:5]))
		if mlen < 4 || len(b.ahead) < 1+mlen {
			return Msg{}, false
		}
		m = Msg{b.ahead[0], b.ahead[5 : 1+mlen]}
		b.ahead = b.ahead[1+mlen:]
	}
	b.N++
	b.Synced = m.Type == wire.MsgSync
	return m, true
}

// namedRoute is a statement Parsed in the batch being walked.
type namedRoute struct {
	name string
	sr   Route
}

// BatchDecision decides the buffered batch b from its Parses and Binds:
// the first Bind that decides a shard (a key, a target, a refusal)
// decides the batch; Binds of statements without a colo table decide the
// default database; with no Bind but of transaction control the batch is
// undecided (LastDecision). cur is the routing of the batch's first
// message when it is a Parse (Session.Parse's). more reports that the
// buffered batch ends with no Sync or Flush: the client expects no reply
// yet, and the pooler may wait for the rest.
func (s *Session) BatchDecision(b Batch, cur *Route, textOf func(string) (string, bool)) (d shard.Decision, undecided, more bool) {
	var parsed []namedRoute // Parses of this batch, beyond the current one
	var fallback *shard.Decision
	var fb shard.Decision
	flushed := false
	for m, ok := b.Next(); ok; m, ok = b.Next() {
		flushed = m.Type == wire.MsgFlush
		switch m.Type {
		case wire.MsgParse:
			if b.N == 1 {
				// cur: its own decision stands when it needs no Bind (a
				// refusal, literal keys).
				if cur != nil && cur.Tx() == shard.TxNone && !cur.St.Decision.Pending && cur.St.Decision.Source != shard.SourceDefault {
					return cur.St.Decision, false, false
				}
				continue
			}
			if name, text, _, ok := wire.DecodeParse(m.Body); ok {
				parsed = append(parsed, namedRoute{string(name), s.Prepare(s.router, text)})
			}
		case wire.MsgBind:
			_, stmt, _, ok := wire.DecodeBindHead(m.Body)
			if !ok {
				continue
			}
			sr, ok := s.batchStmt(parsed, stmt, textOf)
			if !ok {
				return shapeRefusal, false, false
			}
			if sr.Tx() != shard.TxNone {
				continue
			}
			d := s.Decide(sr, m.Body)
			if b.N > 1 && s.Memo.at == nil {
				// The Bind is ahead in the buffer: when it is read, this
				// decision is its decision.
				s.Memo = BindMemo{at: &m.Body[0], n: len(m.Body), d: d}
			}
			if d.Source != shard.SourceDefault {
				return d, false, false
			}
			if fallback == nil {
				fb = d
				fallback = &fb
			}
		}
	}
	if fallback != nil {
		return fb, false, false
	}
	return s.LastDecision(), true, !b.Synced && !flushed
}

// batchStmt is the routing of a statement a Bind of the batch names: the
// batch's own last Parse of it, else the client's.
func (s *Session) batchStmt(parsed []namedRoute, stmt []byte, textOf func(string) (string, bool)) (Route, bool) {
	for i := len(parsed) - 1; i >= 0; i-- {
		if parsed[i].name == string(stmt) {
			return parsed[i].sr, true
		}
	}
	return s.Lookup(stmt, textOf)
}

// StartsWithTx says whether a batch's first message (typ, body) is a
// Parse of, or a Bind of a statement that is, transaction control: only
// such a batch may be answered by the pooler (TxBatch). cur is the Parse's
// routing.
func (s *Session) StartsWithTx(typ byte, body []byte, cur *Route) bool {
	switch typ {
	case wire.MsgParse:
		return cur != nil && cur.Tx() != shard.TxNone
	case wire.MsgBind:
		_, stmt, _, ok := wire.DecodeBindHead(body)
		if !ok {
			return false
		}
		sr, known := s.Stmts.Get(stmt)
		return known && sr.Tx() != shard.TxNone
	}
	return false
}

// DescribesOnly: the rest of a batch after its Parse only describes the
// statement it parsed (name, "" for the unnamed one).
func DescribesOnly(msgs []Msg, name []byte) bool {
	for _, m := range msgs {
		switch {
		case m.Type == wire.MsgSync:
			return true
		case m.Type != wire.MsgDescribe || len(m.Body) != len(name)+2 || m.Body[0] != 'S' ||
			string(m.Body[1:1+len(name)]) != string(name) || m.Body[len(m.Body)-1] != 0:
			return false
		}
	}
	return false
}

// Unname rewrites a batch's Binds and statement Describes of the named
// statement name as the unnamed statement's, in place in msgs (the bodies
// are new; the client's buffer is not written): a scatter runs a named
// statement's Bind on every shard as the unnamed statement, parsed ahead
// of it, so no shard's server needs the name.
func Unname(msgs []Msg, name []byte) {
	if len(name) == 0 {
		return
	}
	for k, m := range msgs {
		switch m.Type {
		case wire.MsgBind:
			portal, stmt, n, ok := wire.DecodeBindHead(m.Body)
			if !ok || string(stmt) != string(name) {
				continue
			}
			body := make([]byte, 0, len(m.Body)-len(name))
			body = append(append(body, portal...), 0, 0)
			msgs[k].Body = append(body, m.Body[n:]...)
		case wire.MsgDescribe:
			if len(m.Body) == len(name)+2 && m.Body[0] == 'S' && string(m.Body[1:1+len(name)]) == string(name) {
				msgs[k].Body = []byte{'S', 0}
			}
		}
	}
}

// UnnamedScatter: after the Parse, Describes of the unnamed statement or
// portal, one Bind of the unnamed statement to the unnamed portal, one
// Execute of it for all its rows, and the Sync — the only batch a scatter
// runs.
func UnnamedScatter(msgs []Msg) bool {
	bound, executed := false, false
	for _, m := range msgs {
		switch m.Type {
		case wire.MsgDescribe:
			if len(m.Body) != 2 || m.Body[1] != 0 || executed {
				return false
			}
		case wire.MsgBind:
			portal, stmt, _, ok := wire.DecodeBindHead(m.Body)
			if !ok || bound || len(portal) > 0 || len(stmt) > 0 {
				return false
			}
			bound = true
		case wire.MsgExecute:
			// "" then max rows 0: the portal's every row.
			if !bound || executed || len(m.Body) != 5 || m.Body[0] != 0 || m.Body[1]|m.Body[2]|m.Body[3]|m.Body[4] != 0 {
				return false
			}
			executed = true
		case wire.MsgSync:
			return executed
		default:
			return false
		}
	}
	return false
}
