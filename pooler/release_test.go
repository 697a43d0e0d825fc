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
