package session

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/wire"
)

// TestUnnamedScatterBatch: the extended batches a scatter serves are the
// unnamed statement's Bind, Execute of every row and Sync after its Parse,
// with Describes; anything else is refused.
func TestUnnamedScatterBatch(t *testing.T) {
	msg := func(frame []byte) Msg { return Msg{frame[0], frame[5:]} }
	bind := msg(wire.AppendBind(nil, "", "", []string{"x"}))
	descP := msg(wire.AppendDescribe(nil, 'P', ""))
	descS := msg(wire.AppendDescribe(nil, 'S', ""))
	exec := msg(wire.AppendExecute(nil, "", 0))
	sync := msg(wire.AppendSync(nil))
	for _, c := range []struct {
		name string
		msgs []Msg
		ok   bool
	}{
		{"pgx exec mode", []Msg{bind, descP, exec, sync}, true},
		{"describe statement first", []Msg{descS, bind, descP, exec, sync}, true},
		{"no describe", []Msg{bind, exec, sync}, true},
		{"no execute", []Msg{descS, sync}, false},
		{"no sync", []Msg{bind, descP, exec}, false},
		{"named portal", []Msg{msg(wire.AppendBind(nil, "p", "", nil)), exec, sync}, false},
		{"named statement", []Msg{msg(wire.AppendBind(nil, "", "s1", nil)), exec, sync}, false},
		{"max rows", []Msg{bind, msg(wire.AppendExecute(nil, "", 10)), sync}, false},
		{"two executes", []Msg{bind, exec, exec, sync}, false},
		{"two binds", []Msg{bind, exec, bind, exec, sync}, false},
		{"named describe", []Msg{msg(wire.AppendDescribe(nil, 'S', "s1")), bind, exec, sync}, false},
		{"close", []Msg{bind, exec, msg(wire.AppendClose(nil, 'S', "")), sync}, false},
		{"flush", []Msg{bind, exec, {wire.MsgFlush, nil}, sync}, false},
	} {
		if got := UnnamedScatter(c.msgs); got != c.ok {
			t.Errorf("%s: %v, want %v", c.name, got, c.ok)
		}
	}
}

// TestDescribesOnly: a batch that parses and describes the statement
// alone (pgx's describe-exec mode) waits for its Bind to scatter.
func TestDescribesOnly(t *testing.T) {
	msg := func(frame []byte) Msg { return Msg{frame[0], frame[5:]} }
	descS := msg(wire.AppendDescribe(nil, 'S', ""))
	sync := msg(wire.AppendSync(nil))
	for _, c := range []struct {
		name string
		msgs []Msg
		ok   bool
	}{
		{"describe, sync", []Msg{descS, sync}, true},
		{"sync", []Msg{sync}, true},
		{"no sync", []Msg{descS}, false},
		{"a portal", []Msg{msg(wire.AppendDescribe(nil, 'P', "")), sync}, false},
		{"a named statement", []Msg{msg(wire.AppendDescribe(nil, 'S', "s1")), sync}, false},
		{"a bind", []Msg{descS, msg(wire.AppendBind(nil, "", "", nil)), sync}, false},
	} {
		if got := DescribesOnly(c.msgs); got != c.ok {
			t.Errorf("%s: %v, want %v", c.name, got, c.ok)
		}
	}
}
