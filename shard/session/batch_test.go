package session

import (
	"bytes"
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
		if got := DescribesOnly(c.msgs, nil); got != c.ok {
			t.Errorf("%s: %v, want %v", c.name, got, c.ok)
		}
	}
}

// TestDescribesOnlyNamed: pgx's default mode parses a named statement and
// describes it in a batch of its own.
func TestDescribesOnlyNamed(t *testing.T) {
	msg := func(frame []byte) Msg { return Msg{frame[0], frame[5:]} }
	name := []byte("stmtcache_1")
	sync := msg(wire.AppendSync(nil))
	if !DescribesOnly([]Msg{msg(wire.AppendDescribe(nil, 'S', "stmtcache_1")), sync}, name) {
		t.Error("Describe of the statement parsed: not describes-only")
	}
	for _, other := range []string{"", "stmtcache_2", "stmtcache_1x", "stmtcache_"} {
		if DescribesOnly([]Msg{msg(wire.AppendDescribe(nil, 'S', other)), sync}, name) {
			t.Errorf("Describe of %q taken for the statement parsed", other)
		}
	}
}

// TestUnname: a named statement's Bind and Describe become the unnamed
// statement's, parameters and portal kept; other statements' are left.
func TestUnname(t *testing.T) {
	msg := func(frame []byte) Msg { return Msg{frame[0], frame[5:]} }
	bind := wire.AppendBind(nil, "", "S_1", []string{"n1", "x"})
	other := wire.AppendBind(nil, "", "S_2", []string{"n1"})
	msgs := []Msg{msg(bind), msg(wire.AppendDescribe(nil, 'S', "S_1")), msg(wire.AppendDescribe(nil, 'P', "")),
		msg(other), msg(wire.AppendExecute(nil, "", 0)), msg(wire.AppendSync(nil))}
	clientBind := append([]byte(nil), msgs[0].Body...)
	Unname(msgs, []byte("S_1"))
	want := wire.AppendBind(nil, "", "", []string{"n1", "x"})
	if !bytes.Equal(msgs[0].Body, want[5:]) {
		t.Errorf("Bind %q, want %q", msgs[0].Body, want[5:])
	}
	if !bytes.Equal(bind[5:], clientBind) {
		t.Error("the client's Bind was written")
	}
	if string(msgs[1].Body) != "S\x00" || string(msgs[2].Body) != "P\x00" {
		t.Errorf("Describes %q %q", msgs[1].Body, msgs[2].Body)
	}
	if !bytes.Equal(msgs[3].Body, other[5:]) {
		t.Errorf("another statement's Bind changed: %q", msgs[3].Body)
	}
	if !UnnamedScatter(append(append([]Msg(nil), msgs[:3]...), msgs[4], msgs[5])) {
		t.Error("the unnamed batch is no scatter batch")
	}
}
