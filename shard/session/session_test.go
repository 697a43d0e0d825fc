package session

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/pgturnstile/pgturnstile/shard"
	"github.com/pgturnstile/pgturnstile/wire"
)

// The decisions themselves are package shard's (and where a key lands is
// proven against Postgres by the integration tests); these tests check
// what the session adds: pins, the held transaction, statements' routing
// across Parse and Bind, a batch's decision and the pooler's answers.

const testFile = `
[[cluster]]
name = "app"
default_database = "app_main"
logical_shards = 256
target_users = ["ops"]

[[cluster.colo]]
name = "org"
key_type = "bigint"
tables = { files = "org_id" }
shards = [
  { range = "0-127",   database = "app_s0" },
  { range = "128-255", database = "app_s1" },
]
`

func testCluster(t *testing.T) *shard.Cluster {
	t.Helper()
	m, err := shard.Parse([]byte(testFile), "shards.toml", []string{"app_main", "app_s0", "app_s1"})
	if err != nil {
		t.Fatal(err)
	}
	return m.Cluster("app")
}

func newSession(t *testing.T) (*Session, *shard.Router) {
	t.Helper()
	s := New("app", shard.Pin{})
	r := s.Use(testCluster(t), func(*shard.Cluster) bool { return false })
	if r == nil {
		t.Fatal("Use returned no router")
	}
	return &s, r
}

// orgDB is where org key v lives.
func orgDB(cl *shard.Cluster, v int64) string {
	_, db := cl.Colo("org").Place(shard.HashInt64(v))
	return db
}

// noText: the pooler's mapping knows no statement.
func noText(string) (string, bool) { return "", false }

// frames splits a stream of backend messages into their types and bodies.
func frames(t *testing.T, out []byte) (types []byte, bodies [][]byte) {
	t.Helper()
	for len(out) > 0 {
		if len(out) < 5 {
			t.Fatalf("torn message %q", out)
		}
		n := int(binary.BigEndian.Uint32(out[1:5]))
		types = append(types, out[0])
		bodies = append(bodies, out[5:1+n])
		out = out[1+n:]
	}
	return types, bodies
}

func TestAnswerQueryHoldsTransaction(t *testing.T) {
	s, _ := newSession(t)
	out, a := s.AnswerQuery([]byte("BEGIN ISOLATION LEVEL REPEATABLE READ"), false)
	if a != Answered || !bytes.Contains(out, []byte("BEGIN\x00")) {
		t.Fatalf("BEGIN: %v %q", a, out)
	}
	if s.HeldStatus() != wire.TxInBlock || !s.InTransaction() {
		t.Fatalf("status %c after BEGIN", s.HeldStatus())
	}
	if _, a := s.AnswerQuery([]byte("savepoint a"), false); a != Answered {
		t.Fatalf("SAVEPOINT: %v", a)
	}
	out, a = s.AnswerQuery([]byte("BEGIN"), false)
	if a != Answered || !bytes.Contains(out, []byte("25001")) {
		t.Fatalf("second BEGIN: %v %q, want the 25001 warning", a, out)
	}
	if _, a := s.AnswerQuery([]byte("SELECT 1"), false); a != NotAnswered {
		t.Fatalf("SELECT answered: %v", a)
	}
	held, n := s.TakeHeld()
	want := wire.AppendQuery(wire.AppendQuery(nil, "BEGIN ISOLATION LEVEL REPEATABLE READ"), "savepoint a")
	if n != 2 || !bytes.Equal(held, want) {
		t.Fatalf("held %d %q, want 2 %q", n, held, want)
	}
	if s.InTransaction() || s.HeldStatus() != wire.TxIdle {
		t.Fatal("TakeHeld left the transaction held")
	}
}

func TestAnswerQueryCommitEndsHeld(t *testing.T) {
	s, _ := newSession(t)
	s.AnswerQuery([]byte("BEGIN"), false)
	out, a := s.AnswerQuery([]byte("COMMIT"), false)
	if a != Answered || !bytes.Contains(out, []byte("COMMIT\x00")) || s.InTransaction() {
		t.Fatalf("COMMIT: %v %q held=%v", a, out, s.InTransaction())
	}
	// With no held transaction, COMMIT goes to Postgres (its warning).
	if _, a := s.AnswerQuery([]byte("COMMIT"), false); a != NotAnswered {
		t.Fatalf("COMMIT outside a transaction answered: %v", a)
	}
	// A linked client's BEGIN is the server's.
	if _, a := s.AnswerQuery([]byte("BEGIN"), true); a != NotAnswered {
		t.Fatalf("linked BEGIN answered: %v", a)
	}
}

func TestSetPins(t *testing.T) {
	s, r := newSession(t)
	cl := s.Map()
	out, a := s.AnswerQuery([]byte("SET LOCAL pgturnstile.shard_key = '7'"), false)
	if a != Answered || !bytes.Contains(out, []byte("25P01")) || !s.Local.Empty() {
		t.Fatalf("SET LOCAL outside a transaction: %v %q local=%v", a, out, s.Local)
	}
	s.AnswerQuery([]byte("BEGIN"), false)
	if _, a := s.AnswerQuery([]byte("SET LOCAL pgturnstile.shard_key = '7'"), false); a != Answered {
		t.Fatalf("SET LOCAL: %v", a)
	}
	if _, a := s.AnswerQuery([]byte("SET LOCAL pgturnstile.colo = org"), false); a != Answered {
		t.Fatalf("SET LOCAL colo: %v", a)
	}
	if p := s.PinNow(); string(p.Key) != "7" || p.Colo != "org" {
		t.Fatalf("pin in force %+v", p)
	}
	d := s.Route(r, []byte("SELECT count(*) FROM files"))
	if d.Database != orgDB(cl, 7) {
		t.Fatalf("pinned keyless statement went to %q, want %q (%+v)", d.Database, orgDB(cl, 7), d)
	}
	s.AnswerQuery([]byte("ROLLBACK"), false)
	if !s.Local.Empty() {
		t.Fatalf("ROLLBACK kept SET LOCAL's pin %+v", s.Local)
	}
	if _, a := s.AnswerQuery([]byte("SET pgturnstile.nonsense = 1"), false); a != BadHint {
		t.Fatalf("unknown pgturnstile setting: %v, want BadHint", a)
	}
	// Session pins outlive transactions; EndLocal clears only SET LOCAL's.
	s.AnswerQuery([]byte("SET pgturnstile.shard_key TO '9'"), true)
	s.Local.Set("shard_key", []byte("1"))
	s.EndLocal(true)
	if p := s.PinNow(); string(p.Key) != "9" || !s.Local.Empty() {
		t.Fatalf("after EndLocal: pin %+v local %+v", p, s.Local)
	}
	if s.Movable() {
		t.Fatal("a pinned session reported movable")
	}
}

func TestParseThenBind(t *testing.T) {
	s, r := newSession(t)
	cl := s.Map()
	text := []byte("SELECT * FROM files WHERE org_id = $1")
	sr := s.Parse(r, nil, text)
	if !sr.St.Decision.Pending {
		t.Fatalf("a $1 key decided at Parse: %+v", sr.St.Decision)
	}
	if again := s.Parse(r, nil, text); again.St != sr.St {
		t.Fatal("the same unnamed text under the same map was prepared again")
	}
	for _, v := range []int64{7, 1 << 40, -3} {
		bind := wire.AppendBind(nil, "", "", []string{itoa(v)})
		d := s.Bind(bind[5:], noText)
		if d.Database != orgDB(cl, v) || d.Source != shard.SourceParam {
			t.Fatalf("key %d: %+v, want %s by param", v, d, orgDB(cl, v))
		}
	}
	// A Bind of a statement nobody prepared is refused; one the mapping
	// knows (a client moved by an online restart) is routed by its text.
	bind := wire.AppendBind(nil, "", "s9", []string{"7"})
	if d := s.Bind(bind[5:], noText); d.Source != shard.SourceRefused {
		t.Fatalf("unknown statement: %+v", d)
	}
	known := func(name string) (string, bool) { return string(text), name == "s9" }
	if d := s.Bind(bind[5:], known); d.Database != orgDB(cl, 7) {
		t.Fatalf("statement known to the mapping: %+v", d)
	}
	// A RELOAD's new map prepares the statement again at its Bind.
	cl2 := testCluster(t)
	s.Use(cl2, func(*shard.Cluster) bool { return false })
	sr2, ok := s.Lookup([]byte("s9"), noText)
	if !ok || sr2.Of != cl2 {
		t.Fatalf("after a new map: %+v %v", sr2, ok)
	}
}

func itoa(v int64) string {
	var b []byte
	neg := v < 0
	if neg {
		v = -v
	}
	for {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
		if v == 0 {
			break
		}
	}
	if neg {
		b = append([]byte{'-'}, b...)
	}
	return string(b)
}

// stream is frontend messages as the client's buffer holds them.
func stream(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

func TestBatchDecision(t *testing.T) {
	s, r := newSession(t)
	cl := s.Map()
	parse := wire.AppendParse(nil, "", "INSERT INTO files (org_id, name) VALUES ($1, $2)", nil)
	bind := wire.AppendBind(nil, "", "", []string{"1234", "x"})
	ahead := stream(bind, wire.AppendExecute(nil, "", 0), wire.AppendSync(nil))
	_, text, _, _ := wire.DecodeParse(parse[5:])
	cur := s.Parse(r, nil, text)
	d, undecided, _ := s.BatchDecision(NewBatch(parse[0], parse[5:], ahead), &cur, noText)
	if undecided || d.Database != orgDB(cl, 1234) {
		t.Fatalf("batch: %+v undecided=%v, want %s", d, undecided, orgDB(cl, 1234))
	}
	// The Bind ahead in the buffer keeps the batch's decision for when it
	// is read: the same bytes, not a copy.
	if md, ok := s.Memo.Of(ahead[5:len(bind)]); !ok || md.Database != d.Database || md.Source != d.Source {
		t.Fatalf("memo %+v %v", md, ok)
	}
	if _, ok := s.Memo.Of(append([]byte(nil), ahead[5:len(bind)]...)); ok {
		t.Fatal("the memo answered for a copy of the Bind")
	}

	// A Parse alone, not yet synced: undecided, and more may come.
	s2, r2 := newSession(t)
	cur2 := s2.Parse(r2, nil, text)
	d, undecided, more := s2.BatchDecision(NewBatch(parse[0], parse[5:], nil), &cur2, noText)
	if !undecided || !more || d.Database != "app_main" || d.Source != shard.SourceDefault {
		t.Fatalf("lone Parse: %+v undecided=%v more=%v", d, undecided, more)
	}
	// A torn message ahead is not read.
	d, undecided, _ = s2.BatchDecision(NewBatch(parse[0], parse[5:], bind[:len(bind)-1]), &cur2, noText)
	if !undecided {
		t.Fatalf("torn Bind decided: %+v", d)
	}
}

func TestTxOnlyBatch(t *testing.T) {
	s, r := newSession(t)
	begin := wire.AppendParse(nil, "b", "BEGIN", nil)
	rest := stream(wire.AppendBind(nil, "", "b", nil), wire.AppendDescribe(nil, 'S', "b"),
		wire.AppendExecute(nil, "", 0), wire.AppendSync(nil))
	cur := s.Parse(r, []byte("b"), []byte("BEGIN"))
	if !s.StartsWithTx(begin[0], begin[5:], &cur) {
		t.Fatal("a Parse of BEGIN does not start with transaction control")
	}
	tb, ok := s.TxOnly(NewBatch(begin[0], begin[5:], rest), &cur, func(string) bool { return false })
	if !ok {
		t.Fatal("BEGIN batch not approved")
	}
	b := NewBatch(begin[0], begin[5:], rest)
	var out []byte
	for m, more := b.Next(); more; m, more = b.Next() {
		out = s.Answer(out, tb, m)
	}
	types, bodies := frames(t, out)
	if string(types) != string([]byte{wire.MsgParseComplete, wire.MsgBindComplete, wire.MsgParameterDescription, wire.MsgNoData, wire.MsgCommandComplete}) {
		t.Fatalf("answers %q", types)
	}
	if string(bodies[4]) != "BEGIN\x00" || !s.InTransaction() {
		t.Fatalf("Execute answered %q, held=%v", bodies[4], s.InTransaction())
	}

	// Not approved: a statement Postgres must run, a batch not whole, a
	// name the client has on servers, COMMIT with nothing held.
	sel := wire.AppendParse(nil, "", "SELECT 1", nil)
	mixed := stream(wire.AppendBind(nil, "", "b", nil), wire.AppendExecute(nil, "", 0), sel,
		wire.AppendBind(nil, "", "", nil), wire.AppendExecute(nil, "", 0), wire.AppendSync(nil))
	bind := wire.AppendBind(nil, "", "b", nil)
	if _, ok := s.TxOnly(NewBatch(bind[0], bind[5:], mixed[len(bind):]), nil, func(string) bool { return false }); ok {
		t.Fatal("a batch with a SELECT was approved")
	}
	if _, ok := s.TxOnly(NewBatch(begin[0], begin[5:], rest[:len(rest)-5]), &cur, func(string) bool { return false }); ok {
		t.Fatal("a batch without its Sync was approved")
	}
	if _, ok := s.TxOnly(NewBatch(begin[0], begin[5:], rest), &cur, func(string) bool { return true }); ok {
		t.Fatal("a Parse of a name in use was approved")
	}
	s3, r3 := newSession(t)
	commit := wire.AppendParse(nil, "", "COMMIT", nil)
	c3 := s3.Parse(r3, nil, []byte("COMMIT"))
	tail := stream(wire.AppendBind(nil, "", "", nil), wire.AppendExecute(nil, "", 0), wire.AppendSync(nil))
	if _, ok := s3.TxOnly(NewBatch(commit[0], commit[5:], tail), &c3, func(string) bool { return false }); ok {
		t.Fatal("COMMIT with nothing held was approved (Postgres answers it)")
	}
}

func TestRefusalTextOfGoneCluster(t *testing.T) {
	s := New("app", shard.Pin{})
	msg, _, hint := s.RefusalText(shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape})
	if msg != `pgturnstile: cluster "app" is no longer in the shard file` || hint != "Reconnect." {
		t.Fatalf("%q %q", msg, hint)
	}
	if q := s.CrossShardQuery(shard.Decision{Source: shard.SourceRefused, Reason: shard.ReasonShape}, "app_s0"); q[0] != wire.MsgQuery {
		t.Fatalf("cross-shard raise is no Query: %q", q)
	}
}
