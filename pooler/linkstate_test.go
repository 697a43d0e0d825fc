package pooler

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// replay feeds client messages and server ReadyForQuery statuses through a
// linkState and returns the action after the last ReadyForQuery.
type step struct {
	client byte // message type sent by the client, or 0
	rfq    byte // ReadyForQuery status received, or 0
}

func TestReleaseRule(t *testing.T) {
	tx, st, se := config.PoolModeTransaction, config.PoolModeStatement, config.PoolModeSession
	cases := []struct {
		name  string
		mode  config.PoolMode
		steps []step
		want  releaseAction
	}{
		{"simple query idle", tx, []step{{client: 'Q'}, {rfq: 'I'}}, releaseServer},
		{"simple query in tx", tx, []step{{client: 'Q'}, {rfq: 'T'}}, keepLinked},
		{"failed tx stays", tx, []step{{client: 'Q'}, {rfq: 'E'}}, keepLinked},
		{"session never releases", se, []step{{client: 'Q'}, {rfq: 'I'}}, keepLinked},
		{"extended one sync", tx, []step{{client: 'P'}, {client: 'B'}, {client: 'E'}, {client: 'S'}, {rfq: 'I'}}, releaseServer},
		{"pipeline of three syncs, first answered", tx, []step{
			{client: 'P'}, {client: 'S'}, {client: 'B'}, {client: 'S'}, {client: 'E'}, {client: 'S'}, {rfq: 'I'}}, keepLinked},
		{"pipeline of three syncs, all answered", tx, []step{
			{client: 'P'}, {client: 'S'}, {client: 'B'}, {client: 'S'}, {client: 'E'}, {client: 'S'},
			{rfq: 'I'}, {rfq: 'I'}, {rfq: 'I'}}, releaseServer},
		{"error mid-pipeline still waits for every sync", tx, []step{
			{client: 'P'}, {client: 'S'}, {client: 'B'}, {client: 'S'}, {rfq: 'I'}}, keepLinked},
		{"flush without sync keeps link", tx, []step{{client: 'P'}, {client: 'H'}}, keepLinked},
		{"answered sync but client mid-batch", tx, []step{{client: 'S'}, {client: 'P'}, {rfq: 'I'}}, keepLinked},
		{"function call", tx, []step{{client: 'F'}, {rfq: 'I'}}, releaseServer},
		{"statement mode releases", st, []step{{client: 'Q'}, {rfq: 'I'}}, releaseServer},
		{"statement mode rejects tx block", st, []step{{client: 'Q'}, {rfq: 'T'}}, rejectTxBlock},
		{"copy data does not count", tx, []step{{client: 'Q'}, {client: 'd'}, {client: 'c'}, {rfq: 'I'}}, releaseServer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ls linkState
			got := keepLinked
			for _, s := range c.steps {
				if s.client != 0 {
					ls.fromClient(s.client)
				}
				if s.rfq != 0 {
					ls.readyForQuery(s.rfq)
					got = afterReadyForQuery(c.mode, &ls)
				}
			}
			if got != c.want {
				t.Fatalf("got %v want %v (state %+v)", got, c.want, ls)
			}
		})
	}
}

func TestReleaseRuleCopyIn(t *testing.T) {
	ls := linkState{}
	ls.fromClient(wire.MsgQuery)
	ls.copyIn = true
	ls.outstanding = 0 // even if counts were off, COPY-in blocks release
	ls.txStatus = wire.TxIdle
	if afterReadyForQuery(config.PoolModeTransaction, &ls) != keepLinked {
		t.Fatal("released during COPY")
	}
}

func TestDrainSteps(t *testing.T) {
	cases := []struct {
		name     string
		ls       linkState
		resetDue bool
		want     drainAction
	}{
		{"query running", linkState{outstanding: 1, txStatus: 'T'}, false, drainWait},
		{"left mid-batch", linkState{pending: true, txStatus: 'I'}, false, drainSync},
		{"left in tx", linkState{txStatus: 'T'}, false, drainRollback},
		{"left in failed tx", linkState{txStatus: 'E'}, true, drainRollback},
		{"session reset", linkState{txStatus: 'I'}, true, drainReset},
		{"clean", linkState{txStatus: 'I'}, false, drainRelease},
	}
	for _, c := range cases {
		if got := nextDrainStep(&c.ls, c.resetDue); got != c.want {
			t.Errorf("%s: got %v want %v", c.name, got, c.want)
		}
	}
}

// TestLinkStateFollowsServerSkips replays client messages and server
// replies through a linkState as the pump and serve drive it: an error in
// an extended-protocol message makes Postgres skip to the next Sync, Query
// and FunctionCall included; COPY IN ignores Sync and Flush and consumes
// any other message as the error that ends it. The link must end idle with
// nothing outstanding, and be marked unsure exactly where timing decides.
func TestLinkStateFollowsServerSkips(t *testing.T) {
	cases := []struct {
		name   string
		client string // messages sent, in order, before the server's replies
		server string // replies: 1 2 3 n T C I s complete a message, E error, G CopyInResponse, Z ReadyForQuery
		later  string // messages sent after the replies so far
		then   string // replies after those
		unsure bool
	}{
		{name: "Parse fails, Query skipped", client: "PQS", server: "EZ"},
		{name: "Parse fails, FunctionCall skipped", client: "PFS", server: "EZ"},
		{name: "Parse fine, Query fails", client: "PQS", server: "1EZZ"},
		{name: "Execute fails after Parse and Bind", client: "PBES", server: "12EZ"},
		{name: "two batches, the first fails", client: "PBESPBES", server: "EZ12CZ"},
		{name: "Parse fails before the client's Sync", client: "PB", server: "E", later: "S", then: "Z"},
		{name: "simple COPY with a Sync sent early", client: "QS", server: "G", later: "dc", then: "CZ"},
		{name: "extended COPY, libpq's way", client: "PBDES", server: "12nG", later: "dcS", then: "CZ"},
		{name: "COPY consumes a pipelined Query", client: "QQ", server: "GEZ", unsure: true},
		{name: "Sync among COPY data", client: "Q", server: "G", later: "dSd", then: "EZ", unsure: true},
		{name: "COPY ended by CopyDone before CopyInResponse", client: "QdcS", server: "GCZZ"},
	}
	replay := func(ls *linkState, replies *int, server string) {
		for _, r := range []byte(server) {
			switch r {
			case 'E':
				if skip, _ := ls.serverError(*replies); skip {
					*replies = 0
				}
			case 'G':
				ls.copyStarted(*replies)
			case 'Z':
				ls.readyForQuery(wire.TxIdle)
				*replies = 0
			default:
				if completesExtended(r) {
					*replies++
				}
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ls linkState
			ls.reset()
			replies := 0
			for _, m := range []byte(c.client) {
				ls.fromClient(m)
			}
			replay(&ls, &replies, c.server)
			for _, m := range []byte(c.later) {
				ls.fromClient(m)
			}
			replay(&ls, &replies, c.then)
			if !ls.idle() || ls.outstanding != 0 || ls.sent.len() != 0 {
				t.Fatalf("not idle at the end: outstanding %d, pending %v, copyIn %v, sent %q", ls.outstanding, ls.pending, ls.copyIn, ls.sent.buf[ls.sent.head:])
			}
			if ls.unsure != c.unsure {
				t.Fatalf("unsure = %v, want %v", ls.unsure, c.unsure)
			}
		})
	}
}

// The kinds queue keeps its buffer: steady state does not allocate.
func TestSentKindsAllocations(t *testing.T) {
	var ls linkState
	ls.reset()
	if n := testing.AllocsPerRun(100, func() {
		for _, m := range []byte("PBDES") {
			ls.fromClient(m)
		}
		ls.readyForQuery(wire.TxIdle)
	}); n != 0 {
		t.Fatalf("%v allocations per transaction", n)
	}
}
