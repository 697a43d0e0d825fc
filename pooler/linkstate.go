package pooler

import (
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// linkState is where a client–server link stands in the protocol. The client
// goroutine updates it before it writes a message to the server; the pump
// updates it when it reads a reply. Both hold client.mu while they do.
//
// Counting ReadyForQuery per Query, Sync and FunctionCall is not enough:
// after an error in an extended-protocol message Postgres skips every
// message up to the next Sync, Query and FunctionCall included, and in
// COPY IN mode it ignores Sync and Flush. So the link keeps the kinds of
// the messages the server has not finished (sent), in order, and the pump
// counts the replies that complete an extended-protocol message since the
// last ReadyForQuery; with both, an ErrorResponse is attributed to the
// message that failed (serverError), and a CopyInResponse to the message
// that started the COPY (copyStarted). Where the outcome depends on timing
// the pooler cannot see (a Sync or other message sent in the middle of
// COPY data, which a data error may or may not precede), the link is
// marked unsure: the count errs low, never high, so nothing waits for a
// reply that will not come, and the server is closed at the end of the
// link instead of being handed to another client.
type linkState struct {
	// outstanding counts Query, Sync and FunctionCall messages sent to the
	// server whose ReadyForQuery has not arrived yet.
	outstanding int
	// pending is set when the client sent extended-protocol messages after
	// its last Sync: the server owes no reply yet, but the client is mid-batch
	// and the next messages must reach the same server.
	pending bool
	// copyIn is set between CopyInResponse/CopyBothResponse and the end of
	// the COPY: the client is streaming data to this server.
	copyIn bool
	// txStatus is the status byte of the last ReadyForQuery.
	txStatus byte
	// sent are the kinds of the messages sent and not yet finished by the
	// server (sentKinds), oldest first: the extended-protocol messages
	// P B D E C (and the pooler's own), the terminators Q F S, and the
	// COPY messages d c f.
	sent sentKinds
	// feeding is set from a CopyInResponse until the client sends
	// CopyDone or CopyFail: the server reads the client's messages as
	// COPY data, ignoring Sync and Flush. copyData: data was sent since.
	feeding, copyData bool
	// unsure: see the type's comment.
	unsure bool
	// cycleExt counts the extended-protocol messages recorded since the
	// last terminator (the client's and the pooler's): cyclePos.
	cycleExt int
}

// reset makes ls the state of a new link, keeping sent's buffer.
func (ls *linkState) reset() {
	sent := ls.sent
	sent.clear()
	*ls = linkState{txStatus: wire.TxIdle, sent: sent}
}

// fromClient records that the client is about to send a message of type typ
// on the link.
func (ls *linkState) fromClient(typ byte) {
	if ls.feeding {
		switch typ {
		case wire.MsgCopyData:
			ls.copyData = true
		case wire.MsgCopyDone, wire.MsgCopyFail:
			// Consumed by the COPY, whose initiator's reply follows.
			ls.feeding, ls.copyData = false, false
		case wire.MsgSync, wire.MsgFlush:
			// Ignored by the server in COPY IN, unless a data error
			// ended the COPY before it got there.
			if ls.copyData {
				ls.unsure = true
			}
		default:
			// Refused by serve before it gets here (route); the
			// server would consume it as the error ending the COPY.
			ls.feeding, ls.unsure = false, true
		}
		return
	}
	switch typ {
	case wire.MsgQuery, wire.MsgFunctionCall:
		ls.outstanding++
		ls.sent.push(typ)
		ls.cycleExt = 0
	case wire.MsgSync:
		ls.outstanding++
		ls.pending = false
		ls.sent.push(typ)
		ls.cycleExt = 0
	case wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail:
		// Part of a COPY already counted by its Query or Sync; kept for
		// copyStarted (a client may send them before CopyInResponse).
		ls.sent.push(typ)
	case wire.MsgFlush:
		ls.pending = true
	default:
		ls.pending = true
		ls.sent.push(typ)
		if isExtended(typ) {
			ls.cycleExt++
		}
	}
}

// injected records an extended-protocol message the pooler itself sends
// (a Parse or Close of a mapped statement): its reply counts like the
// client's.
func (ls *linkState) injected(typ byte) {
	ls.sent.push(typ)
	ls.cycleExt++
}

// unrecord takes back the last recorded message: the pooler answered it
// itself and did not send it.
func (ls *linkState) unrecord() {
	if ls.sent.len() > 0 && isExtended(ls.sent.at(ls.sent.len()-1)) && ls.cycleExt > 0 {
		ls.cycleExt--
	}
	ls.sent.dropLast()
}

// cyclePos is the place of the extended-protocol message just recorded
// (with the pooler's messages injected before it) among those of its Sync
// cycle, counted from 0. When that message fails, the server has
// completed exactly that many extended messages since its last
// ReadyForQuery (link.pump.replies): so an ErrorResponse is tied to the
// message whose op (opBind, opDescribe) carries its place.
func (ls *linkState) cyclePos() int { return ls.cycleExt - 1 }

// readyForQuery records a ReadyForQuery with status st: the server has
// finished everything up to its oldest terminator.
func (ls *linkState) readyForQuery(st byte) {
	if ls.outstanding > 0 {
		ls.outstanding--
	}
	for ls.sent.len() > 0 {
		if k := ls.sent.pop(); isTerminator(k) {
			break
		}
	}
	ls.txStatus = st
	ls.copyIn = false
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

// failing returns the index in sent of the message the server is working
// on, given the replies that completed extended-protocol messages since the
// last ReadyForQuery; -1 when every recorded message is finished.
func (ls *linkState) failing(replies int) int {
	for i := 0; i < ls.sent.len(); i++ {
		k := ls.sent.at(i)
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

// serverError applies an ErrorResponse. When it failed an extended-protocol
// message, the server skips to the next Sync: the messages before that
// Sync are dropped, and the Queries and FunctionCalls among them owe no
// ReadyForQuery. It returns skip (the server now skips to a Sync) and
// synced (that Sync has been sent: otherwise the client's messages up to
// its next Sync must not reach the server as if they counted).
func (ls *linkState) serverError(replies int) (skip, synced bool) {
	i := ls.failing(replies)
	if i < 0 || !isExtended(ls.sent.at(i)) {
		// A Query, FunctionCall or Sync failed: its ReadyForQuery follows.
		return false, false
	}
	n := 0
	for ; n < ls.sent.len() && ls.sent.at(n) != wire.MsgSync; n++ {
		if k := ls.sent.at(n); k == wire.MsgQuery || k == wire.MsgFunctionCall {
			ls.outstanding--
		}
	}
	ls.sent.dropFirst(n)
	ls.feeding, ls.copyData = false, false
	return true, ls.sent.len() > 0
}

// copyStarted applies a CopyInResponse: the message that started the COPY
// is the one the server is working on, and the messages recorded after it
// were read in COPY IN mode. Syncs among them were ignored; CopyDone or
// CopyFail ends the COPY; any other message ended it with an error and was
// consumed (the link is then unsure). Those messages are forgotten, and
// the positions among the recorded terminators of the Syncs, Queries and
// FunctionCalls among them are returned, so that their entries in the
// mapping queue go too, with the kind of the message consumed as the
// error, if any. When nothing ended the COPY, the server goes on
// reading the client as COPY data (feeding).
func (ls *linkState) copyStarted(replies int) (dropped []int, consumed byte) {
	ls.copyIn = true
	i := ls.failing(replies)
	if i < 0 {
		return nil, 0
	}
	terms := 0
	for j := 0; j <= i; j++ {
		if isTerminator(ls.sent.at(j)) {
			terms++
		}
	}
	ended, data := false, false
	for j := i + 1; j < ls.sent.len() && !ended; j++ {
		k := ls.sent.at(j)
		switch k {
		case wire.MsgCopyData:
			data = true
		case wire.MsgSync:
			if data {
				ls.unsure = true
			}
		case wire.MsgCopyDone, wire.MsgCopyFail:
			ended = true
		default:
			ended, ls.unsure, consumed = true, true, k
		}
		if isTerminator(k) {
			ls.outstanding--
			dropped = append(dropped, terms)
			terms++
		}
		ls.sent.set(j, 0)
	}
	ls.sent.compact()
	if !ended {
		ls.feeding, ls.copyData = true, data
	}
	return dropped, consumed
}

// idle reports that the server owes the client nothing and the client is not
// mid-batch: the point at which the link may end.
func (ls *linkState) idle() bool {
	return ls.outstanding == 0 && !ls.pending && !ls.copyIn
}

// releaseAction is what happens to the link after a ReadyForQuery.
type releaseAction int

const (
	keepLinked releaseAction = iota
	releaseServer
	// rejectTxBlock: statement mode saw a transaction block; PgBouncer closes
	// the server and the client with an error.
	rejectTxBlock
)

// afterReadyForQuery is the release rule, in one place: release only after
// ReadyForQuery 'I' has been written to the client, with no outstanding
// Query/Sync/FunctionCall, not mid-batch and not in COPY; never in session
// mode.
func afterReadyForQuery(mode config.PoolMode, ls *linkState) releaseAction {
	if !ls.idle() {
		return keepLinked
	}
	switch mode {
	case config.PoolModeTransaction:
		if ls.txStatus == wire.TxIdle {
			return releaseServer
		}
	case config.PoolModeStatement:
		if ls.txStatus == wire.TxIdle {
			return releaseServer
		}
		return rejectTxBlock
	}
	return keepLinked
}

// drainAction is what the pump does for a client that has gone while its
// server was linked.
type drainAction int

const (
	drainWait     drainAction = iota // replies still outstanding: keep discarding
	drainSync                        // client left mid-batch: send Sync
	drainRollback                    // in a transaction: send ROLLBACK
	drainReset                       // session-style reset query still to run
	drainRelease                     // clean: back to the pool
)

// nextDrainStep decides how to bring a server whose client left back to a
// clean, idle state without closing it.
func nextDrainStep(ls *linkState, resetDue bool) drainAction {
	switch {
	case ls.outstanding > 0 || ls.copyIn:
		return drainWait
	case ls.pending:
		return drainSync
	case ls.txStatus == wire.TxInBlock || ls.txStatus == wire.TxFailed:
		return drainRollback
	case resetDue:
		return drainReset
	}
	return drainRelease
}

// sentKinds is a FIFO of message kinds. It grows to the longest pipeline
// seen and keeps its buffer, so steady state does not allocate. Entries set
// to 0 are removed by compact.
type sentKinds struct {
	buf  []byte
	head int
}

func (q *sentKinds) len() int          { return len(q.buf) - q.head }
func (q *sentKinds) at(i int) byte     { return q.buf[q.head+i] }
func (q *sentKinds) set(i int, k byte) { q.buf[q.head+i] = k }

func (q *sentKinds) push(k byte) {
	if k == wire.MsgCopyData && q.len() > 0 && q.buf[len(q.buf)-1] == k {
		return // one entry per run of CopyData
	}
	if q.head > 0 && len(q.buf) == cap(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, k)
}

func (q *sentKinds) pop() byte {
	k := q.buf[q.head]
	q.head++
	if q.head == len(q.buf) {
		q.clear()
	}
	return k
}

func (q *sentKinds) dropFirst(n int) {
	q.head += n
	if q.head == len(q.buf) {
		q.clear()
	}
}

func (q *sentKinds) dropLast() {
	if q.len() > 0 {
		q.buf = q.buf[:len(q.buf)-1]
	}
}

func (q *sentKinds) clear() { q.buf, q.head = q.buf[:0], 0 }

// compact removes the entries set to 0.
func (q *sentKinds) compact() {
	out := q.buf[:0]
	for _, k := range q.buf[q.head:] {
		if k != 0 {
			out = append(out, k)
		}
	}
	q.buf, q.head = out, 0
}
