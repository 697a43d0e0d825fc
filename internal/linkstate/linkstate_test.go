package linkstate

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/wire"
)

// step is one event of a release-rule case: a message the client sends or
// a ReadyForQuery the server sends.
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
		want  ReleaseAction
	}{
		{"simple query idle", tx, []step{{client: 'Q'}, {rfq: 'I'}}, ReleaseServer},
		{"simple query in tx", tx, []step{{client: 'Q'}, {rfq: 'T'}}, KeepLinked},
		{"failed tx stays", tx, []step{{client: 'Q'}, {rfq: 'E'}}, KeepLinked},
		{"session never releases", se, []step{{client: 'Q'}, {rfq: 'I'}}, KeepLinked},
		{"extended one sync", tx, []step{{client: 'P'}, {client: 'B'}, {client: 'E'}, {client: 'S'}, {rfq: 'I'}}, ReleaseServer},
		{"pipeline of three syncs, first answered", tx, []step{
			{client: 'P'}, {client: 'S'}, {client: 'B'}, {client: 'S'}, {client: 'E'}, {client: 'S'}, {rfq: 'I'}}, KeepLinked},
		{"pipeline of three syncs, all answered", tx, []step{
			{client: 'P'}, {client: 'S'}, {client: 'B'}, {client: 'S'}, {client: 'E'}, {client: 'S'},
			{rfq: 'I'}, {rfq: 'I'}, {rfq: 'I'}}, ReleaseServer},
		{"error mid-pipeline still waits for every sync", tx, []step{
			{client: 'P'}, {client: 'S'}, {client: 'B'}, {client: 'S'}, {rfq: 'I'}}, KeepLinked},
		{"flush without sync keeps link", tx, []step{{client: 'P'}, {client: 'H'}}, KeepLinked},
		{"answered sync but client mid-batch", tx, []step{{client: 'S'}, {client: 'P'}, {rfq: 'I'}}, KeepLinked},
		{"function call", tx, []step{{client: 'F'}, {rfq: 'I'}}, ReleaseServer},
		{"statement mode releases", st, []step{{client: 'Q'}, {rfq: 'I'}}, ReleaseServer},
		{"statement mode rejects tx block", st, []step{{client: 'Q'}, {rfq: 'T'}}, RejectTxBlock},
		{"copy data does not count", tx, []step{{client: 'Q'}, {client: 'd'}, {client: 'c'}, {rfq: 'I'}}, ReleaseServer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s State
			s.Reset()
			got := KeepLinked
			for _, e := range c.steps {
				if e.client != 0 {
					s.FromClient(e.client)
				}
				if e.rfq != 0 {
					s.ReadyForQuery(e.rfq)
					got = s.AfterReadyForQuery(c.mode)
				}
			}
			if got != c.want {
				t.Fatalf("got %v want %v (state %+v)", got, c.want, s)
			}
		})
	}
}

func TestReleaseRuleCopyIn(t *testing.T) {
	var s State
	s.Reset()
	s.FromClient(wire.MsgQuery)
	s.copyIn = true
	s.outstanding = 0 // even if counts were off, COPY-in blocks release
	if s.AfterReadyForQuery(config.PoolModeTransaction) != KeepLinked {
		t.Fatal("released during COPY")
	}
}

func TestDrainSteps(t *testing.T) {
	cases := []struct {
		name     string
		s        State
		resetDue bool
		want     DrainStep
	}{
		{"query running", State{outstanding: 1, txStatus: 'T'}, false, DrainWait},
		{"left mid-batch", State{pending: true, txStatus: 'I'}, false, DrainSync},
		{"left in tx", State{txStatus: 'T'}, false, DrainRollback},
		{"left in failed tx", State{txStatus: 'E'}, true, DrainRollback},
		{"session reset", State{txStatus: 'I'}, true, DrainReset},
		{"clean", State{txStatus: 'I'}, false, DrainRelease},
	}
	for _, c := range cases {
		if got := c.s.NextDrainStep(c.resetDue); got != c.want {
			t.Errorf("%s: got %v want %v", c.name, got, c.want)
		}
	}
}

// TestDrainSequence walks a server whose client left mid-batch inside a
// transaction through the drain, as the pooler's drain does: each step's
// message recorded with FromClient, its reply with ReadyForQuery, until
// the server is clean.
func TestDrainSequence(t *testing.T) {
	var s State
	s.Reset()
	for _, m := range []byte("QPB") { // BEGIN answered below; then a batch without Sync
		s.FromClient(m)
		if m == wire.MsgQuery {
			s.ReadyForQuery(wire.TxInBlock)
		}
	}
	var got []DrainStep
	resetDue := true
	for step := s.NextDrainStep(resetDue); step != DrainRelease; step = s.NextDrainStep(resetDue) {
		if got = append(got, step); len(got) > 3 {
			t.Fatalf("the drain does not end: %v", got)
		}
		switch step {
		case DrainSync:
			s.FromClient(wire.MsgSync)
			s.ReadyForQuery(wire.TxInBlock)
		case DrainRollback, DrainReset:
			s.FromClient(wire.MsgQuery)
			s.ReadyForQuery(wire.TxIdle)
			resetDue = resetDue && step != DrainReset
		default:
			t.Fatalf("step %v with nothing outstanding", step)
		}
	}
	want := []DrainStep{DrainSync, DrainRollback, DrainReset}
	if len(got) != len(want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("steps %v, want %v", got, want)
		}
	}
	if !s.Clean() || s.NextDrainStep(false) != DrainRelease {
		t.Fatalf("not clean after the drain: %+v", s)
	}
}

// TestStateFollowsServerSkips replays client messages and server replies
// through a State as the pooler's pump and serve drive it: an error in an
// extended-protocol message makes Postgres skip to the next Sync, Query
// and FunctionCall included; COPY IN ignores Sync and Flush and consumes
// any other message as the error that ends it. The link must end idle with
// nothing outstanding, and be marked unsure exactly where timing decides.
func TestStateFollowsServerSkips(t *testing.T) {
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
	replay := func(s *State, replies *int, server string) {
		for _, r := range []byte(server) {
			switch r {
			case 'E':
				if skip, _ := s.ServerError(*replies); skip {
					*replies = 0
				}
			case 'G':
				s.CopyStarted(*replies)
			case 'Z':
				s.ReadyForQuery(wire.TxIdle)
				*replies = 0
			default:
				if CompletesExtended(r) {
					*replies++
				}
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s State
			s.Reset()
			replies := 0
			for _, m := range []byte(c.client) {
				s.FromClient(m)
			}
			replay(&s, &replies, c.server)
			for _, m := range []byte(c.later) {
				s.FromClient(m)
			}
			replay(&s, &replies, c.then)
			if !s.Idle() || s.Outstanding() != 0 || s.sent.len() != 0 {
				t.Fatalf("not idle at the end: outstanding %d, pending %v, copyIn %v, sent %q", s.outstanding, s.pending, s.copyIn, s.sent.buf[s.sent.head:])
			}
			if s.Unsure() != c.unsure {
				t.Fatalf("unsure = %v, want %v", s.Unsure(), c.unsure)
			}
		})
	}
}

// TestCopyStartedDrops: the terminators read as COPY data are returned by
// their place among the recorded terminators, and a message the COPY
// consumed as its error is named.
func TestCopyStartedDrops(t *testing.T) {
	var s State
	s.Reset()
	for _, m := range []byte("QSQ") {
		s.FromClient(m)
	}
	dropped, consumed := s.CopyStarted(0)
	if len(dropped) != 2 || dropped[0] != 1 || dropped[1] != 2 || consumed != wire.MsgQuery {
		t.Fatalf("dropped %v, consumed %q; want [1 2] and Q", dropped, consumed)
	}
	if !s.Unsure() || s.Feeding() || !s.InCopy() || s.Outstanding() != 1 {
		t.Fatalf("after the COPY consumed a Query: %+v", s)
	}
}

// TestCyclePos: the place of an extended message in its Sync cycle counts
// the injected messages before it, not those the caller answered itself
// (Unrecord), and starts again after each terminator.
func TestCyclePos(t *testing.T) {
	var s State
	s.Reset()
	s.FromClient(wire.MsgParse)
	s.Injected(wire.MsgParse)
	s.FromClient(wire.MsgBind)
	if p := s.CyclePos(); p != 2 {
		t.Fatalf("Bind after Parse and an injected Parse: place %d, want 2", p)
	}
	s.FromClient(wire.MsgDescribe)
	s.Unrecord() // answered without the server
	s.FromClient(wire.MsgExecute)
	if p := s.CyclePos(); p != 3 {
		t.Fatalf("Execute after an unrecorded Describe: place %d, want 3", p)
	}
	s.FromClient(wire.MsgSync)
	s.FromClient(wire.MsgBind)
	if p := s.CyclePos(); p != 0 {
		t.Fatalf("Bind after a Sync: place %d, want 0", p)
	}
}

// TestCopyInput: while the server reads the client as COPY data, only COPY
// messages, Sync and Flush are taken as such; outside COPY nothing breaks it.
func TestCopyInput(t *testing.T) {
	var s State
	s.Reset()
	if s.BreaksCopy(wire.MsgQuery) {
		t.Fatal("a Query breaks a COPY that has not started")
	}
	s.FromClient(wire.MsgQuery)
	s.CopyStarted(0)
	if !s.Feeding() {
		t.Fatal("not feeding after CopyInResponse")
	}
	for _, m := range []byte{wire.MsgCopyData, wire.MsgCopyDone, wire.MsgCopyFail, wire.MsgSync, wire.MsgFlush} {
		if s.BreaksCopy(m) {
			t.Errorf("%q breaks the COPY", m)
		}
	}
	for _, m := range []byte{wire.MsgQuery, wire.MsgParse, wire.MsgBind, wire.MsgFunctionCall} {
		if !s.BreaksCopy(m) {
			t.Errorf("%q does not break the COPY", m)
		}
	}
	s.FromClient(wire.MsgCopyData)
	s.FromClient(wire.MsgCopyDone)
	s.ReadyForQuery(wire.TxIdle)
	if !s.Clean() || s.Unsure() {
		t.Fatalf("not clean after the COPY: %+v", s)
	}
}

// TestCleanAndAwaitsOnlySync: what a parked link and a request sent again
// rely on.
func TestCleanAndAwaitsOnlySync(t *testing.T) {
	var s State
	s.Reset()
	if !s.Clean() || s.AwaitsOnlySync() {
		t.Fatalf("a new link: clean %v, awaits only Sync %v", s.Clean(), s.AwaitsOnlySync())
	}
	for _, m := range []byte("PBES") {
		s.FromClient(m)
	}
	if s.Clean() || s.AwaitsOnlySync() {
		t.Fatal("a batch in flight is clean or awaits only its Sync")
	}
	s.ServerError(0) // the Parse failed: the server skips to the Sync
	if !s.AwaitsOnlySync() || s.Outstanding() != 1 {
		t.Fatalf("after a failed Parse: %+v", s)
	}
	s.ReadyForQuery(wire.TxInBlock)
	if !s.Idle() || s.Clean() {
		t.Fatal("idle in a transaction: not idle, or clean")
	}
	s.FromClient(wire.MsgQuery)
	s.ReadyForQuery(wire.TxIdle)
	if !s.Clean() || s.TxStatus() != wire.TxIdle {
		t.Fatalf("after COMMIT: %+v", s)
	}
}

// The kinds queue keeps its buffer: steady state does not allocate.
func TestSentKindsAllocations(t *testing.T) {
	var s State
	s.Reset()
	if n := testing.AllocsPerRun(100, func() {
		for _, m := range []byte("PBDES") {
			s.FromClient(m)
		}
		s.ReadyForQuery(wire.TxIdle)
	}); n != 0 {
		t.Fatalf("%v allocations per transaction", n)
	}
}
