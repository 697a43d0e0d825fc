package pooler

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/wire"
)

// TestUnnamedScatterBatch: the extended batches a scatter serves are the
// unnamed statement's Bind, Execute of every row and Sync after its Parse,
// with Describes; anything else is refused.
func TestUnnamedScatterBatch(t *testing.T) {
	msg := func(frame []byte) batchMsg { return batchMsg{frame[0], frame[5:]} }
	bind := msg(wire.AppendBind(nil, "", "", []string{"x"}))
	descP := msg(wire.AppendDescribe(nil, 'P', ""))
	descS := msg(wire.AppendDescribe(nil, 'S', ""))
	exec := msg(wire.AppendExecute(nil, "", 0))
	sync := msg(wire.AppendSync(nil))
	for _, c := range []struct {
		name string
		msgs []batchMsg
		ok   bool
	}{
		{"pgx exec mode", []batchMsg{bind, descP, exec, sync}, true},
		{"describe statement first", []batchMsg{descS, bind, descP, exec, sync}, true},
		{"no describe", []batchMsg{bind, exec, sync}, true},
		{"no execute", []batchMsg{descS, sync}, false},
		{"no sync", []batchMsg{bind, descP, exec}, false},
		{"named portal", []batchMsg{msg(wire.AppendBind(nil, "p", "", nil)), exec, sync}, false},
		{"named statement", []batchMsg{msg(wire.AppendBind(nil, "", "s1", nil)), exec, sync}, false},
		{"max rows", []batchMsg{bind, msg(wire.AppendExecute(nil, "", 10)), sync}, false},
		{"two executes", []batchMsg{bind, exec, exec, sync}, false},
		{"two binds", []batchMsg{bind, exec, bind, exec, sync}, false},
		{"named describe", []batchMsg{msg(wire.AppendDescribe(nil, 'S', "s1")), bind, exec, sync}, false},
		{"close", []batchMsg{bind, exec, msg(wire.AppendClose(nil, 'S', "")), sync}, false},
		{"flush", []batchMsg{bind, exec, {wire.MsgFlush, nil}, sync}, false},
	} {
		if got := unnamedScatterBatch(c.msgs); got != c.ok {
			t.Errorf("%s: %v, want %v", c.name, got, c.ok)
		}
	}
}

// TestDescribesOnly: a batch that parses and describes the statement
// alone (pgx's describe-exec mode) waits for its Bind to scatter.
func TestDescribesOnly(t *testing.T) {
	msg := func(frame []byte) batchMsg { return batchMsg{frame[0], frame[5:]} }
	descS := msg(wire.AppendDescribe(nil, 'S', ""))
	sync := msg(wire.AppendSync(nil))
	for _, c := range []struct {
		name string
		msgs []batchMsg
		ok   bool
	}{
		{"describe, sync", []batchMsg{descS, sync}, true},
		{"sync", []batchMsg{sync}, true},
		{"no sync", []batchMsg{descS}, false},
		{"a portal", []batchMsg{msg(wire.AppendDescribe(nil, 'P', "")), sync}, false},
		{"a named statement", []batchMsg{msg(wire.AppendDescribe(nil, 'S', "s1")), sync}, false},
		{"a bind", []batchMsg{descS, msg(wire.AppendBind(nil, "", "", nil)), sync}, false},
	} {
		if got := describesOnly(c.msgs); got != c.ok {
			t.Errorf("%s: %v, want %v", c.name, got, c.ok)
		}
	}
}
