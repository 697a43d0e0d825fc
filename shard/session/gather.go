package session

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// A scatter's answer: the pooler reads each database's replies in turn and
// asks Gather (a read on every database at once) or Each (a statement run
// on each database in turn) what to do with each; at the end they compose
// the one answer the client gets, before its ReadyForQuery. The replies
// are the servers' bytes, read whole; nothing in them is trusted to be
// well formed.

// Act is what the pooler does with one reply.
type Act uint8

const (
	Drop  Act = iota // not relayed
	Relay            // written to the client as it is
	Fail             // not relayed; the answer is an error now: cancel the databases not yet read
)

// Gather composes a scatter read's answer: the first database's
// descriptions (RowDescription, or CopyOutResponse), every database's
// rows, and SELECT (or COPY) with their sum; the first error instead, or
// an error when a database describes other columns or is lost.
type Gather struct {
	kind     shard.ScatterKind
	replayed bool // the batch's Parse is one the client did not send
	first    string
	// descs are the first database's descriptions (an extended batch
	// that describes its statement and its portal has two); nd counts
	// those of the database being read (db).
	descs  [][]byte
	nd, db int
	total  uint64
	failed []byte // the error the client gets
	// parsed: the client got the first database's ParseComplete.
	parsed bool
}

// NewGather starts the answer of a scatter of kind whose first database
// is first; replayed: a Parse the client did not send leads the batch.
func NewGather(kind shard.ScatterKind, replayed bool, first string) *Gather {
	return &Gather{kind: kind, replayed: replayed, first: first}
}

// Next starts the replies of database i (0 the first).
func (g *Gather) Next(i int) { g.db, g.nd = i, 0 }

// Failed reports that the answer is an error.
func (g *Gather) Failed() bool { return g.failed != nil }

// ParseAcked reports that the client got a ParseComplete for the batch's
// own Parse: its statement exists for the client, as after a Parse that
// Postgres ran, even when the execution after it failed.
func (g *Gather) ParseAcked() bool { return g.parsed }

// Lost records a database that could not be written or read whole (why:
// "was lost", "failed: …"); the answer is an error unless it already is.
func (g *Gather) Lost(db, why string) {
	if g.failed == nil {
		g.failed = wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "08006", "pgturnstile: shard "+db+" "+why, "", "")
	}
}

// Reply takes one reply (typ, msg whole, header included) of database db,
// the one Next started; ReadyForQuery is the pooler's.
func (g *Gather) Reply(db string, typ byte, msg []byte) Act {
	switch {
	case g.failed != nil:
		return Drop // the answer is the first error
	case typ == wire.MsgErrorResponse:
		g.failed = append([]byte(nil), msg...)
		return Fail
	case typ == wire.MsgRowDescription || typ == wire.MsgCopyOutResponse:
		g.nd++
		if g.db == 0 {
			g.descs = append(g.descs, append([]byte(nil), msg...))
			return Relay
		}
		if g.nd > len(g.descs) || !sameDescription(g.descs[g.nd-1], msg) {
			g.failed = wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "0A000",
				"pgturnstile: the shards answered with different columns", "shard "+db+" differs from "+g.first, "Make the table the same on every shard.")
			return Fail
		}
		return Drop
	case typ == wire.MsgDataRow || typ == wire.MsgCopyData:
		// (A batch without a Describe gets rows with no description: the
		// client has its columns from an earlier one.)
		return Relay
	case typ == wire.MsgCommandComplete:
		g.total += tagCount(msg)
		return Drop
	case typ == wire.MsgParseComplete || typ == wire.MsgBindComplete || typ == wire.MsgParameterDescription || typ == wire.MsgNoData:
		// An extended batch's: once, the first database's.
		if g.db == 0 && !(g.replayed && typ == wire.MsgParseComplete) {
			g.parsed = g.parsed || typ == wire.MsgParseComplete
			return Relay
		}
		return Drop
	case typ == wire.MsgNoticeResponse:
		return Relay
	}
	// ParameterStatus (the pooler tracks its servers' own), CopyDone (once,
	// at the end), anything else of a read (EmptyQueryResponse, a second
	// result): not relayed.
	return Drop
}

// Answer is what the client gets after the relayed replies: the error, or
// the summed tag.
func (g *Gather) Answer() []byte {
	switch {
	case g.failed != nil:
		return g.failed
	case g.kind == shard.ScatterCopy:
		out := append([]byte(nil), wire.MsgCopyDone, 0, 0, 0, 4)
		return wire.AppendCommandComplete(out, "COPY "+strconv.FormatUint(g.total, 10))
	}
	return wire.AppendCommandComplete(nil, "SELECT "+strconv.FormatUint(g.total, 10))
}

// tagCount is the row count a CommandComplete ends with (0 for none).
func tagCount(msg []byte) uint64 {
	if len(msg) < 5 {
		return 0
	}
	tag := string(wire.CommandTag(msg[5:]))
	k := strings.LastIndexByte(tag, ' ')
	if k < 0 {
		return 0
	}
	n, _ := strconv.ParseUint(tag[k+1:], 10, 64)
	return n
}

// sameDescription: another database's RowDescription (or CopyOutResponse)
// says what the first one's does. A RowDescription's table OIDs and column
// numbers are each database's own (wire.SameColumns); the client gets the
// first database's.
func sameDescription(first, msg []byte) bool {
	if first[0] == wire.MsgRowDescription {
		return wire.SameColumns(first, msg)
	}
	return string(first) == string(msg)
}

// Each composes the answer of a statement shard=all runs on each database
// in turn (DDL, a write): the first database's answers to the batch's
// messages (ParseComplete, BindComplete, ParameterDescription, NoData) and
// CommandComplete when every one succeeded, else an error whose DETAIL
// says how each database fared.
type Each struct {
	replayed bool
	db       int
	res      string // the outcome of the database being read
	detail   strings.Builder
	tag      string
	acks     []byte
	failures int
	n        int
}

// NewEach starts the answer of a statement run on n databases in turn;
// replayed as for NewGather.
func NewEach(n int, replayed bool) *Each { return &Each{n: n, replayed: replayed} }

// Next starts the replies of database i (0 the first).
func (e *Each) Next(i int) { e.db, e.res = i, "ok" }

// Lost records that the database being read could not be written or read
// whole.
func (e *Each) Lost(why string) {
	if e.res == "ok" {
		e.res = "lost: " + why
	}
}

// Reply takes one reply of the database being read (ReadyForQuery is the
// pooler's).
func (e *Each) Reply(typ byte, msg []byte) {
	switch typ {
	case wire.MsgErrorResponse:
		e.res = "ERROR: (no message)"
		if len(msg) > 5 {
			if f, _ := wire.ParseErrorResponse(msg[5:]); f.Message != "" {
				e.res = "ERROR: " + f.Message
			}
		}
	case wire.MsgCommandComplete:
		if e.tag == "" && len(msg) >= 5 {
			e.tag = string(wire.CommandTag(msg[5:]))
		}
	case wire.MsgParseComplete, wire.MsgBindComplete, wire.MsgParameterDescription, wire.MsgNoData:
		if e.db == 0 && !(e.replayed && typ == wire.MsgParseComplete) {
			e.acks = append(e.acks, msg...)
		}
	}
}

// Done ends the replies of database db.
func (e *Each) Done(db string) {
	if e.res != "ok" {
		e.failures++
	}
	if e.detail.Len() > 0 {
		e.detail.WriteString("; ")
	}
	fmt.Fprintf(&e.detail, "%s: %s", db, e.res)
}

// Answer is what the client gets (before ReadyForQuery), and whether
// every database succeeded.
func (e *Each) Answer() (out []byte, ok bool) {
	if e.failures > 0 {
		return wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "XX000", fmt.Sprintf("pgturnstile: failed on %d of %d shards", e.failures, e.n),
			e.detail.String(), "What succeeded stays done: fix the failures and run it again where it failed (shard=NAME)."), false
	}
	if e.tag == "" {
		return e.acks, true
	}
	return wire.AppendCommandComplete(e.acks, e.tag), true
}
