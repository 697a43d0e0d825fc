package session

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// rowDesc is a one-column RowDescription (an int8 column org_id) of the
// table with OID table, as each database describes it.
func rowDesc(table uint32, name string) []byte {
	body := binary.BigEndian.AppendUint16(nil, 1)
	body = append(append(body, name...), 0)
	body = binary.BigEndian.AppendUint32(body, table)
	body = binary.BigEndian.AppendUint16(body, 1)
	body = binary.BigEndian.AppendUint32(body, 20)
	body = binary.BigEndian.AppendUint16(body, 8)
	body = binary.BigEndian.AppendUint32(body, 0xffffffff)
	body = binary.BigEndian.AppendUint16(body, 0)
	return append(wire.AppendHeader(nil, wire.MsgRowDescription, len(body)), body...)
}

func dataRow(v string) []byte {
	body := binary.BigEndian.AppendUint16(nil, 1)
	body = binary.BigEndian.AppendUint32(body, uint32(len(v)))
	body = append(body, v...)
	return append(wire.AppendHeader(nil, wire.MsgDataRow, len(body)), body...)
}

// gathered feeds each database's replies to a Gather and returns what was
// relayed, what was answered, and the acts.
func gathered(g *Gather, dbs []string, replies [][][]byte) (relayed, answer []byte, acts []Act) {
	for i, rs := range replies {
		g.Next(i)
		for _, m := range rs {
			a := g.Reply(dbs[i], m[0], m)
			acts = append(acts, a)
			if a == Relay {
				relayed = append(relayed, m...)
			}
		}
	}
	return relayed, g.Answer(), acts
}

func TestGatherRows(t *testing.T) {
	dbs := []string{"s0", "s1"}
	g := NewGather(shard.ScatterRows, true, "s0")
	pc, bc := []byte{wire.MsgParseComplete, 0, 0, 0, 4}, []byte{wire.MsgBindComplete, 0, 0, 0, 4}
	relayed, answer, _ := gathered(g, dbs, [][][]byte{
		{pc, bc, rowDesc(16390, "org_id"), dataRow("1"), dataRow("2"), wire.AppendCommandComplete(nil, "SELECT 2")},
		{pc, bc, rowDesc(24600, "org_id"), dataRow("3"), wire.AppendCommandComplete(nil, "SELECT 1")},
	})
	want := slicesConcat(bc, rowDesc(16390, "org_id"), dataRow("1"), dataRow("2"), dataRow("3"))
	if !bytes.Equal(relayed, want) {
		t.Errorf("relayed %q, want %q (the replayed ParseComplete dropped, the first database's acks once)", relayed, want)
	}
	if !bytes.Equal(answer, wire.AppendCommandComplete(nil, "SELECT 3")) || g.Failed() {
		t.Errorf("answer %q, want SELECT 3", answer)
	}
	if g.ParseAcked() {
		t.Error("a replayed Parse's ParseComplete taken as the client's")
	}
	// The client's own Parse, then an error at execution: the statement
	// exists for the client (it got the ParseComplete).
	g = NewGather(shard.ScatterRows, false, "s0")
	errMsg := wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "22012", "division by zero", "", "")
	relayed, answer, _ = gathered(g, dbs, [][][]byte{{pc, bc, rowDesc(1, "org_id"), errMsg}, {pc, bc, rowDesc(2, "org_id")}})
	if !g.ParseAcked() || !bytes.Equal(answer, errMsg) || !bytes.HasPrefix(relayed, slicesConcat(pc, bc)) {
		t.Errorf("execution error after the Parse: acked %v, answer %q, relayed %q", g.ParseAcked(), answer, relayed)
	}
}

func TestGatherFailures(t *testing.T) {
	dbs := []string{"s0", "s1", "s2"}
	errMsg := wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "22012", "division by zero", "", "")
	// The first error wins; what follows is dropped.
	g := NewGather(shard.ScatterRows, false, "s0")
	relayed, answer, acts := gathered(g, dbs, [][][]byte{
		{rowDesc(1, "org_id"), dataRow("1")},
		{errMsg},
		{rowDesc(2, "org_id"), dataRow("2")},
	})
	if !bytes.Equal(answer, errMsg) || acts[2] != Fail || acts[3] != Drop || acts[4] != Drop {
		t.Errorf("error: answer %q acts %v", answer, acts)
	}
	if !bytes.Equal(relayed, slicesConcat(rowDesc(1, "org_id"), dataRow("1"))) {
		t.Errorf("relayed after the error: %q", relayed)
	}
	// Other columns on another database.
	g = NewGather(shard.ScatterRows, false, "s0")
	_, answer, _ = gathered(g, dbs[:2], [][][]byte{{rowDesc(1, "org_id")}, {rowDesc(2, "name")}})
	if !bytes.Contains(answer, []byte("0A000")) || !bytes.Contains(answer, []byte("shard s1 differs from s0")) {
		t.Errorf("different columns: %q", answer)
	}
	// A database lost: an error, never the others' rows as the answer.
	g = NewGather(shard.ScatterRows, false, "s0")
	g.Next(0)
	g.Reply("s0", wire.MsgRowDescription, rowDesc(1, "org_id"))
	g.Next(1)
	g.Lost("s1", "failed: EOF")
	if !g.Failed() || !bytes.Contains(g.Answer(), []byte("pgturnstile: shard s1 failed: EOF")) || !bytes.Contains(g.Answer(), []byte("08006")) {
		t.Errorf("lost: %q", g.Answer())
	}
}

func TestGatherCopy(t *testing.T) {
	out := []byte{wire.MsgCopyOutResponse, 0, 0, 0, 7, 0, 0, 0}
	data := func(s string) []byte { return append(wire.AppendHeader(nil, wire.MsgCopyData, len(s)), s...) }
	g := NewGather(shard.ScatterCopy, false, "s0")
	relayed, answer, _ := gathered(g, []string{"s0", "s1"}, [][][]byte{
		{out, data("1\n"), {wire.MsgCopyDone, 0, 0, 0, 4}, wire.AppendCommandComplete(nil, "COPY 1")},
		{out, data("2\n"), data("3\n"), {wire.MsgCopyDone, 0, 0, 0, 4}, wire.AppendCommandComplete(nil, "COPY 2")},
	})
	if !bytes.Equal(relayed, slicesConcat(out, data("1\n"), data("2\n"), data("3\n"))) {
		t.Errorf("relayed %q", relayed)
	}
	if !bytes.Equal(answer, wire.AppendCommandComplete([]byte{wire.MsgCopyDone, 0, 0, 0, 4}, "COPY 3")) {
		t.Errorf("answer %q", answer)
	}
}

func TestEach(t *testing.T) {
	pc, bc, nd := []byte{wire.MsgParseComplete, 0, 0, 0, 4}, []byte{wire.MsgBindComplete, 0, 0, 0, 4}, []byte{wire.MsgNoData, 0, 0, 0, 4}
	e := NewEach(2, false)
	for i, db := range []string{"s0", "s1"} {
		e.Next(i)
		for _, m := range [][]byte{pc, bc, nd, wire.AppendCommandComplete(nil, "CREATE INDEX")} {
			e.Reply(m[0], m)
		}
		e.Done(db)
	}
	out, ok := e.Answer()
	if !ok || !bytes.Equal(out, wire.AppendCommandComplete(slicesConcat(pc, bc, nd), "CREATE INDEX")) {
		t.Errorf("every database: %v %q", ok, out)
	}
	// One fails, one is lost: both counted, each named.
	e = NewEach(3, true)
	e.Next(0)
	e.Reply(wire.MsgParseComplete, pc)
	e.Reply(wire.MsgCommandComplete, wire.AppendCommandComplete(nil, "CREATE INDEX"))
	e.Done("s0")
	e.Next(1)
	e.Reply(wire.MsgErrorResponse, wire.AppendErrorResponse(nil, wire.MsgErrorResponse, "ERROR", "42P07", `relation "i" already exists`, "", ""))
	e.Done("s1")
	e.Next(2)
	e.Lost("broken pipe")
	e.Done("s2")
	out, ok = e.Answer()
	f, _ := wire.ParseErrorResponse(out[5:])
	if ok || f.Code != "XX000" || f.Message != "pgturnstile: failed on 2 of 3 shards" ||
		f.Detail != `s0: ok; s1: ERROR: relation "i" already exists; s2: lost: broken pipe` {
		t.Errorf("failures: %v %+v", ok, f)
	}
	if strings.Contains(string(out), "\x31\x00\x00\x00\x04") {
		t.Error("a replayed ParseComplete in the answer")
	}
}

// FuzzGather: whatever the servers send (each input a message's type and
// body, framed as the pooler's reader hands it over), gathering never
// panics, and the answer is whole messages.
func FuzzGather(f *testing.F) {
	f.Add(rowDesc(1, "a"), rowDesc(2, "a"), dataRow("x"), wire.AppendCommandComplete(nil, "SELECT 1"))
	f.Add([]byte("T\x00\x00\x00\x06\x00\x09"), []byte("E\x00\x00\x00\x04"), []byte("C\x00\x00\x00\x05\x00"), []byte("C\x00\x00\x00\x0eSELECT 99999\x00"))
	f.Fuzz(func(t *testing.T, a, b, c, d []byte) {
		for _, kind := range []shard.ScatterKind{shard.ScatterRows, shard.ScatterCopy} {
			g := NewGather(kind, true, "s0")
			e := NewEach(2, false)
			for i := range 2 {
				g.Next(i)
				e.Next(i)
				for _, x := range [][]byte{a, b, c, d} {
					if len(x) == 0 {
						continue
					}
					m := append(wire.AppendHeader(nil, x[0], len(x)-1), x[1:]...)
					g.Reply("s", m[0], m)
					e.Reply(m[0], m)
				}
				e.Done("s")
			}
			frames(t, g.Answer())
			out, _ := e.Answer()
			frames(t, out)
		}
	})
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
