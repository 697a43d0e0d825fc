package session

import (
	"testing"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// FuzzBatch: whatever a client has buffered behind its current message,
// the batch walk reads only whole messages within it, and deciding,
// approving and answering a batch never panics; an approved batch's
// answers are whole backend messages.
func FuzzBatch(f *testing.F) {
	parse := wire.AppendParse(nil, "", "SELECT * FROM files WHERE org_id = $1", nil)
	begin := wire.AppendParse(nil, "b", "BEGIN", nil)
	f.Add(parse[0], parse[5:], stream(wire.AppendBind(nil, "", "", []string{"7"}), wire.AppendExecute(nil, "", 0), wire.AppendSync(nil)))
	f.Add(begin[0], begin[5:], stream(wire.AppendBind(nil, "", "b", nil), wire.AppendExecute(nil, "", 0), wire.AppendSync(nil)))
	f.Add(byte(wire.MsgBind), []byte("\x00b\x00\x00\x00\x00\x00\x00\x00"), []byte("E\x00\x00\x00\x09\x00\x00\x00\x00\x00S\x00\x00\x00\x04"))
	f.Add(byte(wire.MsgParse), []byte("\x00COMMIT\x00\x00\x00"), []byte("B\xff\xff\xff\xff"))
	cl := func() *shard.Cluster {
		m, err := shard.Parse([]byte(testFile), "shards.toml", []string{"app_main", "app_s0", "app_s1"})
		if err != nil {
			f.Fatal(err)
		}
		return m.Cluster("app")
	}()
	f.Fuzz(func(t *testing.T, typ byte, body, ahead []byte) {
		s := New("app", shard.Pin{})
		r := s.Use(cl, func(*shard.Cluster) bool { return true })
		var cur *Route
		if typ == wire.MsgParse {
			if name, text, _, ok := wire.DecodeParse(body); ok {
				sr := s.Parse(r, name, text)
				cur = &sr
			}
		}
		b := NewBatch(typ, body, ahead)
		for m, ok := b.Next(); ok; m, ok = b.Next() {
			if b.N > 1 && !within(m.Body, ahead) {
				t.Fatalf("message %d's body is not within the buffer", b.N)
			}
		}
		s.BatchDecision(NewBatch(typ, body, ahead), cur, func(string) (string, bool) { return "SELECT 1", true })
		s.StartsWithTx(typ, body, cur)
		tb, ok := s.TxOnly(NewBatch(typ, body, ahead), cur, func(string) bool { return false })
		if !ok {
			return
		}
		var out []byte
		b = NewBatch(typ, body, ahead)
		for m, more := b.Next(); more; m, more = b.Next() {
			out = s.Answer(out, tb, m)
		}
		frames(t, out) // whole messages, or it fails
	})
}

// within reports that b lies in buf (or is empty).
func within(b, buf []byte) bool {
	if len(b) == 0 {
		return true
	}
	if cap(buf) == 0 {
		return false
	}
	full := buf[:cap(buf)]
	for i := range full {
		if &full[i] == &b[0] {
			return i+len(b) <= len(buf)
		}
	}
	return false
}
