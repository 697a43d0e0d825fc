package pooler

import (
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// linkState is where a client–server link stands in the protocol. The client
// goroutine updates it before it writes a message to the server; the pump
// updates it when it reads a reply. Both hold client.mu while they do.
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
}

// fromClient records that the client is about to send a message of type typ
// on the link.
func (ls *linkState) fromClient(typ byte) {
	switch typ {
	case wire.MsgQuery, wire.MsgFunctionCall:
		ls.outstanding++
	case wire.MsgSync:
		ls.outstanding++
		ls.pending = false
	case wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail:
		// Part of a COPY already counted by its Query or Sync.
	default:
		ls.pending = true
	}
}

// readyForQuery records a ReadyForQuery with status st.
func (ls *linkState) readyForQuery(st byte) {
	if ls.outstanding > 0 {
		ls.outstanding--
	}
	ls.txStatus = st
	ls.copyIn = false
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
