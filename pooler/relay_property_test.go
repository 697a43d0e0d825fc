package pooler

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/wire"
)

// TestRelayProperty sends random, valid extended- and simple-protocol
// traffic from three clients through a Service in transaction mode with
// prepared statements mapped (two servers, so statements follow clients
// from server to server and are prepared again; max_prepared_statements
// = 3, so servers evict) to a fakePostgres, and asserts:
//
//   - each client gets exactly the replies Postgres would send, in order:
//     ParseComplete, BindComplete, CloseComplete, ParameterDescription
//     (with the client's parameter types), RowDescription or NoData,
//     DataRow and CommandComplete or EmptyQueryResponse, ReadyForQuery with
//     the right transaction status; and each DataRow echoes the digest of
//     the statement text the server executed and of the Bind parameter
//     section it got, which must be the client's own (so a statement
//     mapped to the wrong server name, a text or parameters corrupted on
//     the way, or a reply given to the wrong message all fail);
//   - the server saw no malformed message and raised no error (the pooler
//     never sends a Bind or Describe of a statement the server lacks, nor
//     prepares a name twice);
//   - the server got, as multisets, exactly the clients' Query bodies and
//     Bind parameter sections, and Execute as often as the clients sent it;
//     every Parse it got carries a query text and parameter types a client
//     sent (names may be rewritten: PGTS_n, or the pooler's empty scratch
//     statement).
//
// Statement texts run from 0 bytes to 2 MiB, with Parse messages of
// 4096 and 16384 bytes ± 1 (the client read buffer and the server
// buffer), and parameters up to 20 KiB, likewise around those sizes.
func TestRelayProperty(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"rp": "user=rp pool_mode=transaction"}, `default_pool_size = 2
max_client_conn = 10
max_prepared_statements = 3
max_packet_size = 16777216
`)
	defer tp.shutdown(t, fake)

	texts := newRelayPropTexts()
	const clients = 3
	rounds := 30
	if testing.Short() {
		rounds = 10
	}
	var wg sync.WaitGroup
	results := make([]*relayPropClient, clients)
	for i := range clients {
		c := &relayPropClient{id: i, rng: rand.New(rand.NewPCG(uint64(i)+1, 0x5eed)), texts: texts, named: map[string]relayPropStmt{}}
		results[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.err = c.run(tp.addr, rounds)
		}()
	}
	wg.Wait()
	failed := false
	for _, c := range results {
		if c.err != nil {
			t.Errorf("client %d: %v", c.id, c.err)
			failed = true
		}
	}
	if failed {
		t.Logf("pooler log:\n%s", tp.log.tail())
	}
	if p := tp.log.takePanics(); len(p) > 0 {
		t.Errorf("the pooler logged:\n%s", strings.Join(p, "\n"))
	}
	// Every client has read its last ReadyForQuery, so the server has
	// processed everything the clients sent.
	problems, errs := fake.takeProblems()
	if len(problems) > 0 || errs > 0 {
		t.Errorf("the server saw %d protocol problems and sent %d errors:\n%s", len(problems), errs, strings.Join(problems, "\n"))
	}
	relayPropCompareServer(t, results, fake.take())
}

// relayPropStmt is a statement a client holds.
type relayPropStmt struct {
	text  []byte
	types []uint32
}

// relayPropTexts are the statement texts the clients share, so that
// several clients map the same server statement.
type relayPropTexts struct {
	mu    sync.Mutex
	cache map[[2]int][]byte
}

func newRelayPropTexts() *relayPropTexts { return &relayPropTexts{cache: map[[2]int][]byte{}} }

// text is a statement text of n bytes ("" for 0), variant v of that size.
func (x *relayPropTexts) text(n, v int) []byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := [2]int{n, v}
	if b, ok := x.cache[k]; ok {
		return b
	}
	var b []byte
	switch {
	case n == 0:
		b = []byte{}
	case n < 8:
		b = []byte("SELECT " + strings.Repeat("x", n))[:n]
	default:
		b = append([]byte("SELECT "), fill(n-7, byte(v))...)
	}
	x.cache[k] = b
	return b
}

// relayPropClient is one client of the test and what it sent.
type relayPropClient struct {
	id    int
	rng   *rand.Rand
	texts *relayPropTexts
	conn  net.Conn
	br    *backendReader

	named   map[string]relayPropStmt // statements the client holds
	unnamed *relayPropStmt
	inTx    bool
	nextID  int

	// What it sent, for the comparison with the server.
	queries  [][]byte
	parses   []relayPropStmt
	binds    [][]byte // parameter sections
	executes int

	err error
}

// expected is one reply a client waits for; check looks at its body.
type expected struct {
	typ   byte
	check func([]byte) error
	what  string
}

func (c *relayPropClient) run(addr string, rounds int) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	c.conn = conn
	c.br = newBackendReader(conn)
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", fmt.Sprintf("c%d", c.id)}, {"database", "rp"}})); err != nil {
		return err
	}
	for {
		typ, body, err := c.br.next()
		if err != nil {
			return fmt.Errorf("login: %v", err)
		}
		if typ == 'E' {
			return fmt.Errorf("login refused: %q", body)
		}
		if typ == 'Z' {
			break
		}
	}
	prologue := c.prologue()
	for r := 0; r < len(prologue)+rounds; r++ {
		var out []byte
		var want []expected
		if r < len(prologue) {
			out, want = prologue[r]()
		} else {
			// One batch, or two pipelined in one write.
			for range 1 + c.rng.IntN(4)/3 {
				o, w := c.batch()
				out = append(out, o...)
				want = append(want, w...)
			}
		}
		if _, err := conn.Write(out); err != nil {
			return fmt.Errorf("round %d: write: %v", r, err)
		}
		for i, w := range want {
			typ, body, err := c.br.next()
			if err != nil {
				return fmt.Errorf("round %d: reply %d (%s): %v", r, i, w.what, err)
			}
			if typ != w.typ {
				return fmt.Errorf("round %d: reply %d: got %q %s, want %q (%s)", r, i, typ, quoteShort(body), w.typ, w.what)
			}
			if w.check != nil {
				if err := w.check(body); err != nil {
					return fmt.Errorf("round %d: reply %d (%s): %v", r, i, w.what, err)
				}
			}
		}
	}
	if c.inTx {
		c.conn.Write(encode(&pgproto3.Query{String: "COMMIT"}))
	}
	c.conn.Write(encode(&pgproto3.Terminate{}))
	if c.inTx {
		for {
			typ, _, err := c.br.next()
			if err != nil || typ == 'Z' {
				break
			}
		}
		c.queries = append(c.queries, []byte("COMMIT\x00"))
	}
	return nil
}

// prologue is the rounds every client starts with: a small named Parse
// of a statement no other client has (so the pooler reads it on a link,
// with the body in its read buffer), then Parses of 4097 and 16385 bytes,
// each first in its batch, executed: 2a24b78 assembled the first Parse
// larger than the 4 KiB client buffer inside that buffer, and the server
// got a corrupted text.
func (c *relayPropClient) prologue() []func() ([]byte, []expected) {
	parse := func(name string, st relayPropStmt, execute bool) ([]byte, []expected) {
		out := encode(&pgproto3.Parse{Name: name, Query: string(st.text), ParameterOIDs: st.types})
		want := []expected{{typ: '1', what: "ParseComplete of " + name}}
		c.named[name] = st
		c.parses = append(c.parses, st)
		if execute {
			bind := encode(&pgproto3.Bind{PreparedStatement: name, Parameters: [][]byte{[]byte("v")}})
			params := paramSection(bind)
			out = append(out, bind...)
			out = append(out, encode(&pgproto3.Execute{})...)
			c.binds = append(c.binds, params)
			c.executes++
			want = append(want, expected{typ: '2', what: "BindComplete of " + name})
			want = append(want, executeReply(st, params)...)
		}
		out = append(out, encode(&pgproto3.Sync{})...)
		return out, append(want, wantStatus('I'))
	}
	sized := func(name string, msgLen int) relayPropStmt {
		// Parse: 5 header bytes, name and NUL, text and NUL, 2 bytes
		// of parameter count.
		text := append([]byte(fmt.Sprintf("SELECT /* c%d */ ", c.id)), fill(msgLen-5-len(name)-1-1-2-16, byte(c.id))...)
		return relayPropStmt{text: text[:msgLen-5-len(name)-1-1-2], types: []uint32{}}
	}
	return []func() ([]byte, []expected){
		func() ([]byte, []expected) {
			return parse("small", relayPropStmt{text: []byte(fmt.Sprintf("SELECT %d", c.id)), types: []uint32{}}, false)
		},
		func() ([]byte, []expected) { return parse("big4097", sized("big4097", 4097), true) },
		func() ([]byte, []expected) { return parse("big16385", sized("big16385", 16385), true) },
	}
}

// textSize picks a statement text size: mostly small, often so that the
// Parse message (name and 9 bytes of framing added) is 4096 or 16384
// bytes ± 1, and now and then 2 MiB.
func (c *relayPropClient) textSize(nameLen int) int {
	switch k := c.rng.IntN(20); {
	case k < 7:
		return c.rng.IntN(200)
	case k < 10:
		return 4096 + c.rng.IntN(3) - 1 - nameLen - 9
	case k < 13:
		return 16384 + c.rng.IntN(3) - 1 - nameLen - 9
	case k < 15:
		return []int{4095, 4096, 4097, 16383, 16384, 16385}[c.rng.IntN(6)]
	case k < 16:
		return 0
	case k < 19:
		return 1000 + c.rng.IntN(30000)
	default:
		if c.rng.IntN(4) == 0 {
			return 2 << 20
		}
		return c.rng.IntN(200)
	}
}

func (c *relayPropClient) newStmt(nameLen int) relayPropStmt {
	n := c.textSize(nameLen)
	text := c.texts.text(n, c.rng.IntN(3)) // shared between clients
	types := make([]uint32, c.rng.IntN(3))
	for i := range types {
		types[i] = []uint32{23, 25, 20}[c.rng.IntN(3)]
	}
	return relayPropStmt{text: text, types: types}
}

func (c *relayPropClient) params() [][]byte {
	ps := make([][]byte, c.rng.IntN(3))
	for i := range ps {
		var n int
		switch k := c.rng.IntN(10); {
		case k < 6:
			n = c.rng.IntN(40)
		case k < 8:
			n = []int{4080, 4090, 4096, 16370, 16380, 16384}[c.rng.IntN(6)] + c.rng.IntN(3) - 1
		case k < 9:
			n = c.rng.IntN(20000)
		default:
			ps[i] = nil // NULL
			continue
		}
		ps[i] = fill(n, byte(c.rng.IntN(256)))
	}
	return ps
}

// paramSection is what the server echoes for a Bind: its bytes after the
// portal and statement names.
func paramSection(bind []byte) []byte {
	_, rest, _ := fakeCut(bind[5:])
	_, params, _ := fakeCut(rest)
	return params
}

func wantRow(text, params []byte) expected {
	want := [2]string{fakeDigest(text), fakeDigest(params)}
	return expected{typ: 'D', what: "DataRow", check: func(b []byte) error {
		var row pgproto3.DataRow
		if err := row.Decode(b); err != nil {
			return err
		}
		if len(row.Values) != 2 || string(row.Values[0]) != want[0] || string(row.Values[1]) != want[1] {
			return fmt.Errorf("the server executed %q with parameters %q, want %q with %q", row.Values[0], row.Values[1], want[0], want[1])
		}
		return nil
	}}
}

func wantStatus(st byte) expected {
	return expected{typ: 'Z', what: fmt.Sprintf("ReadyForQuery %q", st), check: func(b []byte) error {
		if b[0] != st {
			return fmt.Errorf("status %q, want %q", b[0], st)
		}
		return nil
	}}
}

func (c *relayPropClient) status() byte {
	if c.inTx {
		return 'T'
	}
	return 'I'
}

// batch makes one request: a simple Query (sometimes BEGIN or COMMIT),
// or a run of extended-protocol messages ended by Sync. It returns the
// bytes and the replies expected.
func (c *relayPropClient) batch() ([]byte, []expected) {
	if c.rng.IntN(5) == 0 {
		return c.simpleQuery()
	}
	b := &relayPropBatch{portals: map[string]relayPropStmt{}, portalParams: map[string][]byte{}}
	for range 1 + c.rng.IntN(6) {
		switch k := c.rng.IntN(9); {
		case k < 2:
			c.parseNamed(b)
		case k < 3:
			c.parseUnnamed(b)
		case k < 6:
			c.bindExecute(b)
		case k < 7:
			c.describeStmt(b)
		case k < 8:
			c.executeAgain(b)
		default:
			c.closeNamed(b)
		}
	}
	b.out = append(b.out, encode(&pgproto3.Sync{})...)
	return b.out, append(b.want, wantStatus(c.status()))
}

// relayPropBatch is an extended-protocol batch being made: its bytes, the
// replies expected, and the portals it bound (with their parameters).
type relayPropBatch struct {
	out          []byte
	want         []expected
	portals      map[string]relayPropStmt
	portalParams map[string][]byte
}

// add appends a message and the replies expected for it.
func (b *relayPropBatch) add(msg []byte, want ...expected) {
	b.out = append(b.out, msg...)
	b.want = append(b.want, want...)
}

// simpleQuery makes a simple Query request (sometimes BEGIN or COMMIT).
func (c *relayPropClient) simpleQuery() ([]byte, []expected) {
	var out []byte
	var want []expected
	var text []byte
	switch k := c.rng.IntN(8); {
	case k == 0 && !c.inTx:
		text = []byte("BEGIN")
		c.inTx = true
	case k == 1 && c.inTx:
		text = []byte("COMMIT")
		c.inTx = false
	default:
		text = c.texts.text(c.textSize(0), c.rng.IntN(3))
	}
	msg := encode(&pgproto3.Query{String: string(text)})
	c.queries = append(c.queries, msg[5:])
	out = append(out, msg...)
	switch {
	case len(text) == 0:
		want = append(want, expected{typ: 'I', what: "EmptyQueryResponse"})
	case string(text) == "BEGIN" || string(text) == "COMMIT":
		want = append(want, expected{typ: 'C', what: string(text)})
	default:
		want = append(want, expected{typ: 'T', what: "RowDescription"}, wantRow(text, nil), expected{typ: 'C', what: "CommandComplete"})
	}
	// A simple query replaces the unnamed statement.
	c.unnamed = nil
	return out, append(want, wantStatus(c.status()))
}

// parseNamed adds a Parse of a new named statement, after a Close of the
// name when the client holds it.
func (c *relayPropClient) parseNamed(b *relayPropBatch) {
	c.nextID++
	name := fmt.Sprintf("c%ds%d", c.id, c.nextID%5)
	if _, held := c.named[name]; held {
		b.add(encode(&pgproto3.Close{ObjectType: 'S', Name: name}), expected{typ: '3', what: "CloseComplete of " + name})
		delete(c.named, name)
	}
	st := c.newStmt(len(name))
	b.add(encode(&pgproto3.Parse{Name: name, Query: string(st.text), ParameterOIDs: st.types}),
		expected{typ: '1', what: "ParseComplete of " + name})
	c.named[name] = st
	c.parses = append(c.parses, st)
}

// parseUnnamed adds a Parse of the unnamed statement.
func (c *relayPropClient) parseUnnamed(b *relayPropBatch) {
	st := c.newStmt(0)
	b.add(encode(&pgproto3.Parse{Query: string(st.text), ParameterOIDs: st.types}),
		expected{typ: '1', what: "ParseComplete of the unnamed statement"})
	c.unnamed = &st
	c.parses = append(c.parses, st)
}

// bindExecute adds a Bind of a statement the client holds to the unnamed
// or a new named portal, maybe a Describe of the portal, and maybe its
// Execute.
func (c *relayPropClient) bindExecute(b *relayPropBatch) {
	name, st, ok := c.pickStmt()
	if !ok {
		return
	}
	portal := ""
	if c.rng.IntN(3) == 0 {
		portal = fmt.Sprintf("p%d", len(b.portals))
	}
	if _, used := b.portals[portal]; used && portal != "" {
		return
	}
	msg := encode(&pgproto3.Bind{DestinationPortal: portal, PreparedStatement: name, Parameters: c.params()})
	b.add(msg, expected{typ: '2', what: "BindComplete of " + name})
	params := paramSection(msg)
	c.binds = append(c.binds, params)
	b.portals[portal], b.portalParams[portal] = st, params
	if c.rng.IntN(2) == 0 {
		b.add(encode(&pgproto3.Describe{ObjectType: 'P', Name: portal}), describeReply(st)...)
	}
	if c.rng.IntN(4) != 0 {
		b.out = append(b.out, encode(&pgproto3.Execute{Portal: portal})...)
		c.executes++
		b.want = append(b.want, executeReply(st, params)...)
	}
}

// describeStmt adds a Describe of a statement the client holds.
func (c *relayPropClient) describeStmt(b *relayPropBatch) {
	name, st, ok := c.pickStmt()
	if !ok {
		return
	}
	types := st.types
	b.add(encode(&pgproto3.Describe{ObjectType: 'S', Name: name}), expected{typ: 't', what: "ParameterDescription of " + name, check: func(body []byte) error {
		var pd pgproto3.ParameterDescription
		if err := pd.Decode(body); err != nil {
			return err
		}
		if fmt.Sprint(pd.ParameterOIDs) != fmt.Sprint(types) {
			return fmt.Errorf("parameter types %v, want %v", pd.ParameterOIDs, types)
		}
		return nil
	}})
	b.want = append(b.want, describeReply(st)...)
}

// executeAgain adds an Execute of a portal this batch bound.
func (c *relayPropClient) executeAgain(b *relayPropBatch) {
	if keys := sortedKeys(b.portals); len(keys) > 0 {
		portal := keys[c.rng.IntN(len(keys))]
		b.out = append(b.out, encode(&pgproto3.Execute{Portal: portal})...)
		c.executes++
		b.want = append(b.want, executeReply(b.portals[portal], b.portalParams[portal])...)
	}
}

// closeNamed adds a Close of a named statement the client holds.
func (c *relayPropClient) closeNamed(b *relayPropBatch) {
	if keys := sortedKeys(c.named); len(keys) > 0 {
		name := keys[c.rng.IntN(len(keys))]
		b.add(encode(&pgproto3.Close{ObjectType: 'S', Name: name}), expected{typ: '3', what: "CloseComplete of " + name})
		delete(c.named, name)
	}
}

// pickStmt picks a statement the client holds: a named one or the unnamed.
func (c *relayPropClient) pickStmt() (string, relayPropStmt, bool) {
	names := sortedKeys(c.named)
	if c.unnamed != nil {
		names = append(names, "")
	}
	if len(names) == 0 {
		return "", relayPropStmt{}, false
	}
	n := names[c.rng.IntN(len(names))]
	if n == "" {
		return "", *c.unnamed, true
	}
	return n, c.named[n], true
}

func describeReply(st relayPropStmt) []expected {
	if len(st.text) == 0 {
		return []expected{{typ: 'n', what: "NoData"}}
	}
	return []expected{{typ: 'T', what: "RowDescription"}}
}

func executeReply(st relayPropStmt, params []byte) []expected {
	if len(st.text) == 0 {
		return []expected{{typ: 'I', what: "EmptyQueryResponse"}}
	}
	return []expected{wantRow(st.text, params), {typ: 'C', what: "CommandComplete"}}
}

// relayPropCompareServer checks what the server got against what the
// clients sent.
func relayPropCompareServer(t *testing.T, clients []*relayPropClient, msgs []fakeMsg) {
	t.Helper()
	count := func(m map[string]int, b []byte, d int) { m[fakeDigest(b)] += d }
	queries, binds := map[string]int{}, map[string]int{}
	stmts := map[string]bool{}
	executes := 0
	for _, c := range clients {
		for _, q := range c.queries {
			count(queries, q, 1)
		}
		for _, b := range c.binds {
			count(binds, b, 1)
		}
		for _, p := range c.parses {
			stmts[relayPropStmtKey(p.text, p.types)] = true
		}
		executes += c.executes
	}
	noop := string(wire.AppendParse(nil, noopStmt, "", nil)[5:])
	for _, m := range msgs {
		switch m.typ {
		case 'Q':
			count(queries, m.body, -1)
		case 'B':
			count(binds, paramSection(append([]byte{'B', 0, 0, 0, 0}, m.body...)), -1)
		case 'E':
			executes--
		case 'P':
			if string(m.body) == noop {
				continue
			}
			name, q, types, ok := wire.DecodeParse(m.body)
			var oids []uint32
			for i := 2; ok && i+4 <= len(types); i += 4 {
				oids = append(oids, uint32(types[i])<<24|uint32(types[i+1])<<16|uint32(types[i+2])<<8|uint32(types[i+3]))
			}
			if !ok || !stmts[relayPropStmtKey(q, oids)] {
				t.Errorf("the server got a Parse (name %q) of a statement no client prepared: %s", name, quoteShort(m.body))
			}
		}
	}
	for what, m := range map[string]map[string]int{"Query": queries, "Bind parameters": binds} {
		for d, n := range m {
			switch {
			case n > 0:
				t.Errorf("%d %s sent by clients (digest %s) did not reach the server", n, what, d)
			case n < 0:
				t.Errorf("the server got %d %s (digest %s) no client sent", -n, what, d)
			}
		}
	}
	if executes != 0 {
		t.Errorf("clients sent %d more Execute than the server got", executes)
	}
}

func relayPropStmtKey(text []byte, types []uint32) string {
	return fakeDigest(text) + fmt.Sprint(types)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
