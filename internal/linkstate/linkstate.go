// Package linkstate is where a link (a client and the server it is linked
// to) stands in the PostgreSQL protocol: what the client has sent that the
// server has not finished, and what the server has answered. From that it
// decides when the server may go back to its pool (AfterReadyForQuery),
// how a server whose client left is brought back to a clean state
// (NextDrainStep), and which server replies complete an extended-protocol
// message (CompletesExtended).
//
// Counting ReadyForQuery per Query, Sync and FunctionCall is not enough:
// after an error in an extended-protocol message Postgres skips every
// message up to the next Sync, Query and FunctionCall included, and in
// COPY IN mode it ignores Sync and Flush. So a State keeps the kinds of
// the messages the server has not finished, in order, and its caller (the
// pooler's pump) counts the replies that complete an extended-protocol
// message since the last ReadyForQuery; with both, an ErrorResponse is
// attributed to the message that failed (ServerError), and a
// CopyInResponse to the message that started the COPY (CopyStarted).
//
// Where the outcome depends on timing the pooler cannot see (a Sync or
// other message sent in the middle of COPY data, which a data error may
// or may not precede), the State is marked unsure: its count errs low,
// never high, so nothing waits for a reply that will not come, and the
// caller closes the server at the end of the link instead of handing it
// to another client.
//
// The package knows nothing of connections or locks: a State is plain
// data that its owner guards.
package linkstate

import (
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// State is where one link stands. The zero State is not a new link's (its
// transaction status is unknown): call Reset first.
type State struct {
	// outstanding counts Query, Sync and FunctionCall messages sent to the
	// server whose ReadyForQuery has not arrived yet.
	outstanding int
	// pending is set when the client sent extended-protocol messages after
	// its last Sync: the server owes no reply yet, but the client is
	// mid-batch and its next messages must reach the same server.
	pending bool
	// copyIn is set between CopyInResponse/CopyBothResponse and the
	// ReadyForQuery that ends the COPY's command.
	copyIn bool
	// txStatus is the status byte of the last ReadyForQuery.
	txStatus byte
	// sent are the kinds of the messages sent and not yet finished by the
	// server, oldest first: the extended-protocol messages P B D E C (the
	// client's and those the caller injects), the terminators Q F S, and
	// the COPY messages d c f.
	sent kinds
	// feeding is set from a CopyInResponse until the client sends
	// CopyDone or CopyFail: the server reads the client's messages as
	// COPY data, ignoring Sync and Flush. copyData: data was sent since,
	// so a data error may already have ended the COPY.
	feeding, copyData bool
	// unsure: see the package comment.
	unsure bool
	// cycleExt counts the extended-protocol messages recorded since the
	// last terminator: CyclePos.
	cycleExt int
}

// Reset makes s the state of a new link, keeping the buffer of sent kinds
// so that a reused link does not allocate.
func (s *State) Reset() {
	sent := s.sent
	sent.clear()
	*s = State{txStatus: wire.TxIdle, sent: sent}
}

// FromClient records that the client is about to send a message of type
// typ to the server.
func (s *State) FromClient(typ byte) {
	if s.feeding {
		s.fromClientInCopy(typ)
		return
	}
	switch typ {
	case wire.MsgQuery, wire.MsgFunctionCall:
		s.outstanding++
		s.sent.push(typ)
		s.cycleExt = 0
	case wire.MsgSync:
		s.outstanding++
		s.pending = false
		s.sent.push(typ)
		s.cycleExt = 0
	case wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail:
		// Part of a COPY already counted by its Query or Sync; kept for
		// CopyStarted, since a client may send them before the server's
		// CopyInResponse arrives.
		s.sent.push(typ)
	case wire.MsgFlush:
		s.pending = true
	default:
		s.pending = true
		s.sent.push(typ)
		if isExtended(typ) {
			s.cycleExt++
		}
	}
}

// fromClientInCopy is FromClient while the server reads the client as
// COPY data.
func (s *State) fromClientInCopy(typ byte) {
	switch typ {
	case wire.MsgCopyData:
		s.copyData = true
	case wire.MsgCopyDone, wire.MsgCopyFail:
		// Consumed by the COPY, whose initiator's reply follows.
		s.feeding, s.copyData = false, false
	case wire.MsgSync, wire.MsgFlush:
		// Ignored by the server in COPY IN, unless a data error ended
		// the COPY before it got there.
		if s.copyData {
			s.unsure = true
		}
	default:
		// The caller refuses these (BreaksCopy); if one gets here, the
		// server consumes it as the error that ends the COPY.
		s.feeding, s.unsure = false, true
	}
}

// Injected records an extended-protocol message the caller itself sends
// (a Parse or Close of a mapped statement): its reply counts like the
// client's.
func (s *State) Injected(typ byte) {
	s.sent.push(typ)
	s.cycleExt++
}

// Unrecord takes back the last recorded message: the caller answered it
// itself and did not send it.
func (s *State) Unrecord() {
	if n := s.sent.len(); n > 0 && isExtended(s.sent.at(n-1)) && s.cycleExt > 0 {
		s.cycleExt--
	}
	s.sent.dropLast()
}

// CyclePos is the place of the extended-protocol message just recorded
// (with the injected messages before it) among those of its Sync cycle,
// counted from 0. When that message fails, the server has completed
// exactly that many extended messages since its last ReadyForQuery: so the
// caller can tie an ErrorResponse to the message that carried this place.
func (s *State) CyclePos() int { return s.cycleExt - 1 }

// ReadyForQuery records a ReadyForQuery with transaction status st: the
// server has finished everything up to its oldest terminator.
func (s *State) ReadyForQuery(st byte) {
	if s.outstanding > 0 {
		s.outstanding--
	}
	for s.sent.len() > 0 {
		if k := s.sent.pop(); isTerminator(k) {
			break
		}
	}
	s.txStatus = st
	s.copyIn = false
}

// failing returns the index in sent of the message the server is working
// on, given the replies that completed extended-protocol messages since the
// last ReadyForQuery; -1 when every recorded message is finished.
func (s *State) failing(replies int) int {
	for i := 0; i < s.sent.len(); i++ {
		k := s.sent.at(i)
		switch {
		case isExtended(k):
			if replies == 0 {
				return i
			}
			replies--
		case isTerminator(k):
			return i
		}
	}
	return -1
}

// ServerError applies an ErrorResponse, given the replies that completed
// extended-protocol messages since the last ReadyForQuery. When it failed
// an extended-protocol message, the server skips to the next Sync: the
// messages before that Sync are dropped, and the Queries and
// FunctionCalls among them owe no ReadyForQuery. It returns skip (the
// server now skips to a Sync) and synced (that Sync has been sent:
// otherwise the client's messages up to its next Sync must not reach the
// server as if they counted).
func (s *State) ServerError(replies int) (skip, synced bool) {
	i := s.failing(replies)
	if i < 0 || !isExtended(s.sent.at(i)) {
		// A Query, FunctionCall or Sync failed: its ReadyForQuery follows.
		return false, false
	}
	n := 0
	for ; n < s.sent.len() && s.sent.at(n) != wire.MsgSync; n++ {
		if k := s.sent.at(n); k == wire.MsgQuery || k == wire.MsgFunctionCall {
			s.outstanding--
		}
	}
	s.sent.dropFirst(n)
	s.feeding, s.copyData = false, false
	return true, s.sent.len() > 0
}

// CopyStarted applies a CopyInResponse, given the replies that completed
// extended-protocol messages since the last ReadyForQuery. The message
// that started the COPY is the one the server is working on, and the
// messages recorded after it were read in COPY IN mode: Syncs among them
// were ignored; CopyDone or CopyFail ends the COPY; any other message
// ended it with an error and was consumed (s is then unsure). Those
// messages are forgotten. It returns the positions, among the recorded
// terminators, of the Syncs, Queries and FunctionCalls among them (so
// that the caller can forget what it expected of them), and the kind of
// the message consumed as the error, if any. When nothing ended the COPY,
// the server goes on reading the client as COPY data (Feeding).
func (s *State) CopyStarted(replies int) (dropped []int, consumed byte) {
	s.copyIn = true
	i := s.failing(replies)
	if i < 0 {
		return nil, 0
	}
	terms := 0
	for j := 0; j <= i; j++ {
		if isTerminator(s.sent.at(j)) {
			terms++
		}
	}
	ended, data := false, false
	for j := i + 1; j < s.sent.len() && !ended; j++ {
		k := s.sent.at(j)
		switch k {
		case wire.MsgCopyData:
			data = true
		case wire.MsgSync:
			if data {
				s.unsure = true
			}
		case wire.MsgCopyDone, wire.MsgCopyFail:
			ended = true
		default:
			ended, s.unsure, consumed = true, true, k
		}
		if isTerminator(k) {
			s.outstanding--
			dropped = append(dropped, terms)
			terms++
		}
		s.sent.set(j, 0)
	}
	s.sent.compact()
	if !ended {
		s.feeding, s.copyData = true, data
	}
	return dropped, consumed
}

// Idle reports that the server owes the client nothing and the client is
// not mid-batch: the point at which the link may end.
func (s *State) Idle() bool {
	return s.outstanding == 0 && !s.pending && !s.copyIn
}

// Clean reports that the server is idle outside a transaction and that
// nothing about it is in doubt: it may be kept by the same client across
// an interruption (parked) exactly as it is.
func (s *State) Clean() bool {
	return s.Idle() && !s.feeding && !s.unsure && s.txStatus == wire.TxIdle
}

// Outstanding is the number of Query, Sync and FunctionCall messages whose
// ReadyForQuery has not arrived.
func (s *State) Outstanding() int { return s.outstanding }

// InCopy reports that a COPY has started and its command has not finished.
func (s *State) InCopy() bool { return s.copyIn }

// Feeding reports that the server reads the client's messages as COPY data.
func (s *State) Feeding() bool { return s.feeding }

// BreaksCopy reports that the server, reading the client as COPY data,
// would take a message of type typ as the error that ends the COPY:
// anything but COPY data, CopyDone, CopyFail and the Sync and Flush it
// ignores. What the client's later messages then get depends on how far
// the server had read, so callers refuse such a message instead.
func (s *State) BreaksCopy(typ byte) bool {
	if !s.feeding {
		return false
	}
	switch typ {
	case wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail, wire.MsgSync, wire.MsgFlush:
		return false
	}
	return true
}

// Unsure reports that timing the pooler cannot see decided what the
// server skipped (see the package comment): the server must be closed,
// not reused.
func (s *State) Unsure() bool { return s.unsure }

// TxStatus is the transaction status of the last ReadyForQuery.
func (s *State) TxStatus() byte { return s.txStatus }

// AwaitsOnlySync reports that the only message the server has not
// finished is one Sync: a request can be sent again in its place.
func (s *State) AwaitsOnlySync() bool {
	return s.sent.len() == 1 && s.sent.at(0) == wire.MsgSync
}

// ReleaseAction is what happens to the link after a ReadyForQuery.
type ReleaseAction int

const (
	// KeepLinked: the client keeps its server.
	KeepLinked ReleaseAction = iota
	// ReleaseServer: the server goes back to its pool.
	ReleaseServer
	// RejectTxBlock: statement mode saw a transaction block; PgBouncer
	// closes the server and the client with an error.
	RejectTxBlock
)

// AfterReadyForQuery is the release rule, in one place, for a ReadyForQuery
// just recorded and written to the client: release only with no
// outstanding Query, Sync or FunctionCall, not mid-batch, not in COPY, and
// outside a transaction; never in session mode.
func (s *State) AfterReadyForQuery(mode config.PoolMode) ReleaseAction {
	if !s.Idle() {
		return KeepLinked
	}
	switch mode {
	case config.PoolModeTransaction:
		if s.txStatus == wire.TxIdle {
			return ReleaseServer
		}
	case config.PoolModeStatement:
		if s.txStatus == wire.TxIdle {
			return ReleaseServer
		}
		return RejectTxBlock
	}
	return KeepLinked
}

// DrainStep is what to do next with a server whose client has gone while
// the server was linked.
type DrainStep int

const (
	DrainWait     DrainStep = iota // replies still outstanding: keep discarding
	DrainSync                      // client left mid-batch: send Sync
	DrainRollback                  // in a transaction: send ROLLBACK
	DrainReset                     // the session's reset query still to run
	DrainRelease                   // clean: back to the pool
)

// NextDrainStep decides how to bring a server whose client left back to a
// clean, idle state without closing it. resetDue: the server's session
// state must be reset (server_reset_query) before another client gets it.
func (s *State) NextDrainStep(resetDue bool) DrainStep {
	switch {
	case s.outstanding > 0 || s.copyIn:
		return DrainWait
	case s.pending:
		return DrainSync
	case s.txStatus == wire.TxInBlock || s.txStatus == wire.TxFailed:
		return DrainRollback
	case resetDue:
		return DrainReset
	}
	return DrainRelease
}

// CompletesExtended reports whether a server message of type typ is the
// last reply to an extended-protocol message, which the caller counts for
// ServerError and CopyStarted: Parse, Bind and Close have one reply each,
// Describe ends with RowDescription or NoData, Execute with
// CommandComplete, EmptyQueryResponse or PortalSuspended. A Query's own
// RowDescription and CommandComplete count too, harmlessly: by then every
// earlier extended message has finished.
func CompletesExtended(typ byte) bool {
	switch typ {
	case wire.MsgParseComplete, wire.MsgBindComplete, wire.MsgCloseComplete, wire.MsgNoData,
		wire.MsgRowDescription, wire.MsgCommandComplete, wire.MsgEmptyQueryResponse, wire.MsgPortalSuspended:
		return true
	}
	return false
}

func isTerminator(k byte) bool {
	return k == wire.MsgQuery || k == wire.MsgSync || k == wire.MsgFunctionCall
}

func isExtended(k byte) bool {
	switch k {
	case wire.MsgParse, wire.MsgBind, wire.MsgDescribe, wire.MsgExecute, wire.MsgClose:
		return true
	}
	return false
}
