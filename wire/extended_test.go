package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// checkFrame fails unless msg is one message of type typ whose length
// field counts exactly the bytes after the type, and returns its body.
func checkFrame(t *testing.T, msg []byte, typ byte) []byte {
	t.Helper()
	if len(msg) < 5 || msg[0] != typ || int(binary.BigEndian.Uint32(msg[1:5])) != len(msg)-1 {
		t.Fatalf("bad %q framing: % x", typ, msg)
	}
	return msg[5:]
}

func TestDecodeParse(t *testing.T) {
	body := AppendParse(nil, "s1", "SELECT $1", []byte{0, 1, 0, 0, 0, 23})[5:]
	name, query, types, ok := DecodeParse(body)
	if !ok || string(name) != "s1" || string(query) != "SELECT $1" || len(types) != 6 || binary.BigEndian.Uint32(types[2:]) != 23 {
		t.Fatalf("got %q %q %v %v", name, query, types, ok)
	}
	body = AppendParse(nil, "", "SELECT 1", nil)[5:]
	if name, query, types, ok := DecodeParse(body); !ok || len(name) != 0 || string(query) != "SELECT 1" || types != nil {
		t.Fatalf("unnamed: %q %q %v %v", name, query, types, ok)
	}
	for _, bad := range [][]byte{
		nil,
		[]byte("s1"),
		[]byte("s1\x00SELECT"),
		[]byte("s1\x00q\x00"),     // no type count
		[]byte("s1\x00q\x00\x00"), // half a type count
		[]byte("s1\x00q\x00\x00\x02\x00\x00\x00\x17"),     // two types claimed, one there
		[]byte("s1\x00q\x00\x00\x00\x00"),                 // a byte after an empty type section
		[]byte("s1\x00q\x00\x00\x01\x00\x00\x00\x17\x00"), // a byte after the types
	} {
		if _, _, _, ok := DecodeParse(bad); ok {
			t.Errorf("accepted malformed %q", bad)
		}
	}
}

// The pooler's Parse agrees with pgproto3's, split around a query written
// separately or not.
func TestAppendParse(t *testing.T) {
	types := binary.BigEndian.AppendUint16(nil, 2)
	types = binary.BigEndian.AppendUint32(types, 23)
	types = binary.BigEndian.AppendUint32(types, 25)
	msg := AppendParse([]byte("x"), "PGTS_7", "SELECT $1, $2", types)[1:]
	body := checkFrame(t, msg, MsgParse)
	var p pgproto3.Parse
	if err := p.Decode(body); err != nil || p.Name != "PGTS_7" || p.Query != "SELECT $1, $2" || len(p.ParameterOIDs) != 2 || p.ParameterOIDs[1] != 25 {
		t.Fatalf("pgproto3 reads %+v, %v", p, err)
	}
	split := AppendParseHead(nil, "PGTS_7", len("SELECT $1, $2"), types)
	split = append(split, "SELECT $1, $2"...)
	split = AppendParseTail(split, types)
	if !bytes.Equal(split, msg) {
		t.Fatalf("head+query+tail %q, AppendParse %q", split, msg)
	}
	want, _ := (&pgproto3.Parse{Query: "SELECT 1"}).Encode(nil)
	if got := AppendParse(nil, "", "SELECT 1", nil); !bytes.Equal(got, want) {
		t.Fatalf("unnamed Parse %q, want %q", got, want)
	}
}

func TestAppendBind(t *testing.T) {
	msg := AppendBind(nil, "", "", []string{"alice", ""})
	body := checkFrame(t, msg, MsgBind)
	var b pgproto3.Bind
	if err := b.Decode(body); err != nil {
		t.Fatal(err)
	}
	if b.DestinationPortal != "" || b.PreparedStatement != "" || len(b.ParameterFormatCodes) != 0 || len(b.ResultFormatCodes) != 0 ||
		len(b.Parameters) != 2 || string(b.Parameters[0]) != "alice" || b.Parameters[1] == nil || len(b.Parameters[1]) != 0 {
		t.Fatalf("pgproto3 reads %+v", b)
	}
	// The Bind of a statement without parameters is the fixed 13 bytes
	// the pooler used to spell out.
	if got := AppendBind(nil, "", "", nil); !bytes.Equal(got, []byte{'B', 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("Bind without parameters: % x", got)
	}
}

// A client's Bind renamed: its names are decoded from a prefix, the head
// rebuilt with another statement name, and the rest forwarded as it was.
func TestBindHeadRename(t *testing.T) {
	orig, _ := (&pgproto3.Bind{DestinationPortal: "c1", PreparedStatement: "s", ParameterFormatCodes: []int16{1},
		Parameters: [][]byte{{0, 0, 0, 42}}, ResultFormatCodes: []int16{1}}).Encode(nil)
	body := orig[5:]
	portal, stmt, n, ok := DecodeBindHead(body[:6]) // a prefix holding both names
	if !ok || string(portal) != "c1" || string(stmt) != "s" || n != 5 {
		t.Fatalf("DecodeBindHead = %q %q %d %v", portal, stmt, n, ok)
	}
	msg := AppendBindHead(nil, portal, "PGTS_12", len(body)-n)
	msg = append(msg, body[n:]...)
	var b pgproto3.Bind
	if err := b.Decode(checkFrame(t, msg, MsgBind)); err != nil || b.DestinationPortal != "c1" || b.PreparedStatement != "PGTS_12" ||
		len(b.Parameters) != 1 || !bytes.Equal(b.Parameters[0], []byte{0, 0, 0, 42}) || b.ResultFormatCodes[0] != 1 {
		t.Fatalf("renamed Bind reads %+v, %v", b, err)
	}
	for _, bad := range [][]byte{nil, []byte("c1"), []byte("c1\x00s")} {
		if _, _, _, ok := DecodeBindHead(bad); ok {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestDescribeCloseExecute(t *testing.T) {
	d := AppendDescribe(nil, TargetStatement, "PGTS_3")
	want, _ := (&pgproto3.Describe{ObjectType: 'S', Name: "PGTS_3"}).Encode(nil)
	if !bytes.Equal(d, want) {
		t.Fatalf("Describe %q, want %q", d, want)
	}
	c := AppendClose(nil, TargetPortal, "")
	want, _ = (&pgproto3.Close{ObjectType: 'P'}).Encode(nil)
	if !bytes.Equal(c, want) {
		t.Fatalf("Close %q, want %q", c, want)
	}
	e := AppendExecute(nil, "", 0)
	want, _ = (&pgproto3.Execute{}).Encode(nil)
	if !bytes.Equal(e, want) {
		t.Fatalf("Execute %q, want %q", e, want)
	}
	if target, name, ok := DecodeTarget(d[5:]); !ok || target != TargetStatement || string(name) != "PGTS_3" {
		t.Fatalf("DecodeTarget = %q %q %v", target, name, ok)
	}
	if target, name, ok := DecodeTarget(c[5:]); !ok || target != TargetPortal || len(name) != 0 {
		t.Fatalf("DecodeTarget = %q %q %v", target, name, ok)
	}
	for _, bad := range [][]byte{nil, {'S'}, []byte("Sname")} {
		if _, _, ok := DecodeTarget(bad); ok {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestAppendCopyFail(t *testing.T) {
	b := AppendCopyFail(nil, "client disconnected")
	if body := string(checkFrame(t, b, MsgCopyFail)); body != "client disconnected\x00" {
		t.Fatalf("CopyFail body %q", body)
	}
}

func TestAppendHeader(t *testing.T) {
	if got := AppendHeader([]byte{1}, MsgParse, 7); !bytes.Equal(got, []byte{1, 'P', 0, 0, 0, 11}) {
		t.Fatalf("header % x", got)
	}
}

func TestDecodeDataRow(t *testing.T) {
	body, _ := (&pgproto3.DataRow{Values: [][]byte{[]byte("a"), nil, {}, []byte("xyz")}}).Encode(nil)
	row, ok := DecodeDataRow(body[5:])
	if !ok || row.Len() != 4 {
		t.Fatalf("DecodeDataRow: %v, %d columns", ok, row.Len())
	}
	type col struct {
		v    string
		null bool
	}
	var got []col
	for row.Len() > 0 {
		v, null, ok := row.Next()
		if !ok {
			t.Fatalf("column %d malformed", len(got))
		}
		got = append(got, col{string(v), null})
	}
	want := []col{{"a", false}, {"", true}, {"", false}, {"xyz", false}}
	if len(got) != len(want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("columns %v, want %v", got, want)
		}
	}
	if _, _, ok := row.Next(); ok {
		t.Fatal("a column past the last")
	}
	if _, ok := DecodeDataRow([]byte{0}); ok {
		t.Fatal("accepted a one-byte DataRow")
	}
	// A length past the body ends the row.
	for _, bad := range [][]byte{
		{0, 1, 0, 0, 0},            // half a length
		{0, 1, 0, 0, 0, 5, 'a'},    // 5 bytes claimed, 1 there
		{0, 2, 0, 0, 0, 1, 'a', 0}, // second length cut short
	} {
		row, ok := DecodeDataRow(bad)
		if !ok {
			t.Fatalf("%q: no column count", bad)
		}
		malformed := false
		for row.Len() > 0 {
			if _, _, ok := row.Next(); !ok {
				malformed = true
				break
			}
		}
		if !malformed || row.Len() != 0 {
			t.Errorf("%q: malformed %v, %d columns left", bad, malformed, row.Len())
		}
	}
}

// The decoders run on every Parse, Bind and auth_query row: they allocate
// nothing.
func TestExtendedDecodersAllocateNothing(t *testing.T) {
	parse := AppendParse(nil, "", "SELECT abalance FROM pgbench_accounts WHERE aid = $1", []byte{0, 1, 0, 0, 0, 23})[5:]
	bind := []byte("\x00PGTS_1\x00\x00\x00")
	desc := []byte("SPGTS_1\x00")
	row, _ := (&pgproto3.DataRow{Values: [][]byte{[]byte("md5abc"), nil}}).Encode(nil)
	n := testing.AllocsPerRun(100, func() {
		if _, query, _, ok := DecodeParse(parse); !ok || len(query) == 0 {
			t.Fatal("DecodeParse failed")
		}
		if _, stmt, _, ok := DecodeBindHead(bind); !ok || len(stmt) != 6 {
			t.Fatal("DecodeBindHead failed")
		}
		if _, name, ok := DecodeTarget(desc); !ok || len(name) != 6 {
			t.Fatal("DecodeTarget failed")
		}
		r, _ := DecodeDataRow(row[5:])
		for r.Len() > 0 {
			if _, _, ok := r.Next(); !ok {
				t.Fatal("DataRow failed")
			}
		}
	})
	if n != 0 {
		t.Fatalf("%v allocs per decode, want 0", n)
	}
}

func TestAppendBindTooManyParameters(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("a Bind of 65536 parameters was encoded")
		}
	}()
	AppendBind(nil, "", "", make([]string, 0x10000))
}

func TestBindParam(t *testing.T) {
	// Two parameters, text then binary (per-parameter format codes), a
	// NULL third.
	body := []byte("p\x00s\x00")
	body = append(body, 0, 3, 0, 0, 0, 1, 0, 0)
	body = append(body, 0, 3)
	body = append(body, 0, 0, 0, 2, '4', '2')
	body = append(body, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 42)
	body = append(body, 0xff, 0xff, 0xff, 0xff)
	body = append(body, 0, 0)
	for _, c := range []struct {
		i            int
		value        string
		binary, null bool
		ok           bool
	}{
		{0, "42", false, false, true},
		{1, "\x00\x00\x00\x00\x00\x00\x00\x2a", true, false, true},
		{2, "", false, true, true},
		{3, "", false, false, false},
		{-1, "", false, false, false},
	} {
		v, bin, null, ok := BindParam(body, c.i)
		if string(v) != c.value || bin != c.binary || null != c.null || ok != c.ok {
			t.Errorf("BindParam(%d) = %q %v %v %v", c.i, v, bin, null, ok)
		}
	}
	// One format code for all; a body cut short.
	one := AppendBind(nil, "", "s", []string{"7"})[5:]
	if v, bin, _, ok := BindParam(one, 0); string(v) != "7" || bin || !ok {
		t.Errorf("AppendBind's parameter: %q %v %v", v, bin, ok)
	}
	for n := range len(body) - 6 {
		if _, _, _, ok := BindParam(body[:n], 1); ok && n < 20 {
			t.Errorf("BindParam of %d bytes read parameter 1", n)
		}
	}
}

// FuzzBindParam: any body, any index: no panic, and a value returned lies
// inside the body.
func FuzzBindParam(f *testing.F) {
	f.Add(AppendBind(nil, "", "s", []string{"1", "two"})[5:], 1)
	f.Add([]byte("\x00\x00\x00\x01\x00\x01\x00\x01\xff\xff\xff\xff\x00\x00"), 0)
	f.Add([]byte("p\x00s\x00\x00\x00\x00\x02\x00\x00\x00\x09x"), 1)
	f.Fuzz(func(t *testing.T, body []byte, i int) {
		v, _, null, ok := BindParam(body, i)
		if !ok && (v != nil || null) {
			t.Fatal("not ok, but a value")
		}
		if len(v) > len(body) {
			t.Fatal("a value longer than the body")
		}
	})
}
