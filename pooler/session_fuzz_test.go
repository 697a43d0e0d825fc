package pooler

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/admin"
)

// FuzzSession drives one whole client session per input through a Service
// in front of a fakePostgres: startup parameters, then a stream of
// frontend messages built from the input (valid ones of many sizes,
// bodies around the 4 KiB client buffer and the 16 KiB server buffer,
// prepared-statement traffic, COPY, and raw garbage), in transaction mode
// with prepared statements mapped (max_prepared_statements = 3, so the
// LRU evicts), in session mode and in statement mode, as the first input
// byte picks. One Service and one fake serve every input of a run.
//
// What is asserted, for every input:
//
//  1. The pooler logs no panic ("panic in client" from the per-connection
//     recover, or any other).
//  2. Every byte the client receives belongs to a well-framed backend
//     message of a known type whose body decodes (checkBackendMessage).
//  3. A login with a valid database, user and options succeeds.
//  4. The acknowledgements the client receives (ParseComplete,
//     BindComplete, CloseComplete, ReadyForQuery) are, in order, a
//     subsequence of those its messages ask for (Parse, Bind, Close, and
//     Sync/Query/FunctionCall): an error may drop some, nothing may add,
//     reorder or duplicate one. This catches a reply the pooler injected
//     for itself leaking to the client.
//  5. When the stream is well framed and the client stays, the session
//     ends with CopyDone, Sync, Query "ROLLBACK" and a marker Query; the
//     marker's row (whose echo is checked) and its ReadyForQuery must
//     arrive within 2 s, unless the pooler closed the connection because
//     of something the client sent that justifies it (a message type
//     Postgres does not know, Terminate, a message over Postgres's length
//     limits, a "fail_fatal" statement, statement mode, a length the
//     pooler refuses). A timeout here is a hang: every request had a Sync
//     after it.
//  6. In transaction and statement mode, once the marker's ReadyForQuery
//     'I' has arrived, the client's server link ends within 1 s (the
//     release rule: nothing is outstanding any more).
//  7. Within 3 s of the client closing its socket, the pooler has no
//     goroutine serving it (serve, serveLoggedIn, loop, resume, login) and
//     counts no client; no pump goroutine lives longer than drainTimeout
//     plus 2 s; and at the end of the run, after Shutdown and the fake
//     closing, no pooler goroutine is left.
//  8. What reached the fake is made of what clients sent (within
//     sentWindow: a drain may hold a client's bytes for drainTimeout):
//     each Query body, Execute body and Bind parameter section is
//     byte-identical to one a client sent; each Parse is byte-identical to
//     a client's, or is the pooler's mapped PGTS_n with exactly a client's
//     query text and parameter types (and a PGTS_n name always has the
//     same text), or its empty scratch statement; Describe and Close name
//     a client's object, a PGTS_n or the scratch name. The pooler's own
//     queries (SET name = 'value'; ..., ROLLBACK, DISCARD ALL, the
//     DEALLOCATE stand-in) are recognised and allowed.
//
// The fake answers as Postgres does where that matters to the pooler's
// accounting (see fakePostgres): it skips to Sync after an error, Query and
// FunctionCall included, ignores Sync and Flush in COPY IN, and consumes
// any other message there as the error that ends the COPY.
//
// After a failure the next input gets a fresh Service and fake; the
// failure's log names the inputs before it, since the Service's state
// (pooled servers, prepared statements) carries over from input to input.
func FuzzSession(f *testing.F) {
	for _, seed := range fuzzSessionSeeds() {
		f.Add(seed)
	}
	h := newSessionHarness(f)
	f.Cleanup(func() { h.close(f) })
	f.Fuzz(func(t *testing.T, data []byte) {
		h.run(t, data)
	})
}

// sessionHarness is the Service and fake shared by the inputs of a run,
// and what checks across inputs need.
type sessionHarness struct {
	fake *fakePostgres
	tp   *testPooler

	// sent is what clients sent lately (invariant 8).
	sent sentIndex
	// pgts maps a PGTS_n name to the statement it was first seen with.
	pgts map[string][17]byte
	// pumps maps a pump goroutine's id to when it was first seen.
	pumps map[int]time.Time
	// history is the last inputs, for reproducing a failure that
	// depends on what came before.
	history [][]byte
}

const (
	fuzzMaxPacket   = 4 << 20
	fuzzMaxPrepared = 3
)

func newSessionHarness(tb testing.TB) *sessionHarness {
	fake := startFakePostgres(tb)
	tp := startTestPooler(tb, fake, map[string]string{
		"fz_tx":   "user=fz pool_mode=transaction",
		"fz_sess": "user=fz pool_mode=session",
		"fz_stmt": "user=fz pool_mode=statement",
	}, fmt.Sprintf(`default_pool_size = 40
max_client_conn = 50
max_prepared_statements = %d
max_packet_size = %d
query_wait_timeout = 10
`, fuzzMaxPrepared, fuzzMaxPacket))
	return &sessionHarness{fake: fake, tp: tp, pgts: map[string][17]byte{}, pumps: map[int]time.Time{}}
}

func (h *sessionHarness) close(tb testing.TB) { h.tp.shutdown(tb, h.fake) }

// restart replaces the Service and the fake after a failure, without the
// shutdown checks: closing the fake first ends what was stuck on it.
func (h *sessionHarness) restart(tb testing.TB) {
	h.fake.Close()
	h.tp.svc.Shutdown(admin.ShutdownImmediate)
	h.tp.stop()
	fresh := newSessionHarness(tb)
	h.fake, h.tp, h.sent, h.pgts, h.pumps = fresh.fake, fresh.tp, sentIndex{}, fresh.pgts, fresh.pumps
}

// sentIndex remembers what clients sent, for invariant 8: keys made of
// the message kind and a hash of the bytes, with when they were last
// sent. An entry counts for sentWindow: a drain may hold bytes a client
// sent for drainTimeout before they reach the server.
type sentIndex struct {
	m         map[[17]byte]time.Time
	lastPrune time.Time
}

const sentWindow = drainTimeout + 5*time.Second

// Kinds of sentIndex keys.
const (
	sentQuery   = 'Q'
	sentParse   = 'P'
	sentStmt    = 's' // query text + type section of a well-formed Parse
	sentBind    = 'B' // portal + parameter section
	sentBindRaw = 'b' // whole Bind body
	sentExecute = 'E'
	sentObject  = 'o' // Describe and Close bodies
)

func sentKey(kind byte, parts ...[]byte) [17]byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
		h.Write([]byte{0})
	}
	var k [17]byte
	k[0] = kind
	copy(k[1:], h.Sum(nil))
	return k
}

func (x *sentIndex) put(now time.Time, kind byte, parts ...[]byte) {
	if x.m == nil {
		x.m = map[[17]byte]time.Time{}
	}
	x.m[sentKey(kind, parts...)] = now
}

func (x *sentIndex) has(now time.Time, kind byte, parts ...[]byte) bool {
	t, ok := x.m[sentKey(kind, parts...)]
	return ok && now.Sub(t) < sentWindow
}

// add records a message the client is about to send.
func (x *sentIndex) add(typ byte, body []byte) {
	now := time.Now()
	if now.Sub(x.lastPrune) > time.Second {
		for k, t := range x.m {
			if now.Sub(t) >= sentWindow {
				delete(x.m, k)
			}
		}
		x.lastPrune = now
	}
	switch typ {
	case 'Q':
		x.put(now, sentQuery, body)
	case 'P':
		x.put(now, sentParse, body)
		if _, q, types, ok := parseParse(body); ok {
			x.put(now, sentStmt, q, types)
		}
	case 'B':
		x.put(now, sentBindRaw, body)
		if portal, rest, ok := fakeCut(body); ok {
			if _, params, ok := fakeCut(rest); ok {
				x.put(now, sentBind, portal, params)
			}
		}
	case 'E':
		x.put(now, sentExecute, body)
	case 'D', 'C':
		x.put(now, sentObject, body)
	}
}

// sessionPlan is a session decoded from a fuzz input.
type sessionPlan struct {
	db, user  string
	params    [][2]string
	minor     uint16
	parkFirst bool // stay silent 150 ms after login (the client parks)
	// validLogin: the login must succeed (invariant 3).
	validLogin bool
	writeMode  byte // 0 all at once, 1 one write per message, 2 split messages
	split      int  // mode 2: where each message is split
	frames     [][]byte
	// ending: what follows the frames.
	ending byte
	// mayClose: something sent lets the pooler close the connection.
	mayClose bool
}

const (
	endTail       = iota // CopyDone, Sync, ROLLBACK, marker (invariant 5)
	endTerminate         // Terminate
	endAbrupt            // close without a word
	endMidMessage        // close in the middle of a Query
	endRefused           // the last frame is one the pooler refuses (bad length)
)

// fuzzInput hands out the bytes of a fuzz input; past its end, zeros.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) bytes(n int) []byte {
	n = min(n, len(in.b))
	out := in.b[:n]
	in.b = in.b[n:]
	return out
}

func (in *fuzzInput) pick(list []string) string { return list[int(in.byte())%len(list)] }

var (
	fuzzDBs     = []string{"fz_tx", "fz_sess", "fz_tx", "fz_stmt", "fz_sess", "fz_tx", "nosuchdb", ""}
	fuzzUsers   = []string{"u0", "u1", "fz", ""}
	fuzzOptions = []struct {
		value string
		valid bool
	}{
		{"-c application_name=fzopt", true},
		{"--DateStyle=ISO", true},
		{"-cTimeZone=UTC -c pgturnstile.priority=low", true},
		{"-c work_mem=1MB", false},
		{"bogus", false},
		{"", true},
	}
	fuzzNames   = []string{"", "s1", "s2", "s3", "S1", "", "pgturnstile_noop", "PGTS_1"}
	fuzzPortals = []string{"", "p1", "", "p2"}
	fuzzQueries = []string{
		"SELECT 1", "BEGIN", "COMMIT", "ROLLBACK", "SELECT fail_exec", "SELECT fail_parse",
		"DISCARD ALL", "DEALLOCATE ALL", "DEALLOCATE s1", `DEALLOCATE PREPARE "S1"`,
		"SET application_name = 'fz2'", "COPY t FROM STDIN", "", "SELECT notice", "END",
		"SELECT 2", "SELECT 1 -- fail_fatal",
	}
	fuzzSizes = []int{4096, 16384, 8192, 4096 + 16384, 65536, 16384, 4096, 200000}
)

// fill is n bytes of a pattern with no short period, so a shifted or
// overwritten copy differs from the original.
func fill(n int, seed byte) []byte {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[(i*7+int(seed)+i/61+i/3721)%len(alphabet)]
	}
	return b
}

// fuzzText is a statement text from the input (no NUL), sometimes one of
// the texts the fake acts on.
func fuzzText(in *fuzzInput) string {
	c := in.byte()
	if c&1 == 0 {
		return fuzzQueries[int(c>>1)%len(fuzzQueries)]
	}
	t := bytes.ReplaceAll(in.bytes(int(c>>1)%48), []byte{0}, []byte{'0'})
	return "SELECT " + string(t)
}

func encode(m pgproto3.FrontendMessage) []byte {
	b, err := m.Encode(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func rawFrame(typ byte, body []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

// decodePlan turns a fuzz input into a session.
func decodePlan(data []byte) *sessionPlan {
	in := &fuzzInput{b: data}
	p := &sessionPlan{}
	b0, b1, b2 := in.byte(), in.byte(), in.byte()
	p.db = fuzzDBs[b0&7]
	p.user = fuzzUsers[b1&3]
	p.minor = 0
	if b0&0x20 != 0 {
		p.minor = 2
	}
	p.parkFirst = b0&0x80 != 0 && b1&0x80 != 0
	p.params = [][2]string{{"user", p.user}}
	if p.db != "" {
		p.params = append(p.params, [2]string{"database", p.db})
	}
	validOpts := true
	if b0&0x08 != 0 {
		p.params = append(p.params, [2]string{"application_name", "fzapp"})
	}
	if b0&0x10 != 0 {
		o := fuzzOptions[int(b1>>2)%len(fuzzOptions)]
		p.params = append(p.params, [2]string{"options", o.value})
		validOpts = o.valid
	}
	if b0&0x40 != 0 {
		p.params = append(p.params, [2]string{"_pq_.fuzz", "1"})
	}
	db := p.db
	if db == "" {
		db = p.user
	}
	p.validLogin = validOpts && p.user != "" && strings.HasPrefix(db, "fz_")
	if p.db == "fz_stmt" {
		p.mayClose = true // a transaction block closes the client
	}
	p.writeMode = b2 % 3
	p.split = int(b2>>2) + 1
	p.ending = endTail
	switch b2 >> 5 {
	case 6:
		p.ending = endAbrupt
	case 7:
		p.ending = endTerminate
	}

	total := 0
	for len(in.b) > 0 && len(p.frames) < 300 && total < 2<<20 {
		var fr []byte
		op := in.byte()
		switch op % 26 {
		case 0, 1:
			fr = encode(&pgproto3.Query{String: fuzzText(in)})
		case 2, 3:
			n := int(in.byte() % 3)
			oids := make([]uint32, n)
			for i := range oids {
				oids[i] = uint32(in.byte())
			}
			fr = encode(&pgproto3.Parse{Name: in.pick(fuzzNames), Query: fuzzText(in), ParameterOIDs: oids})
		case 4, 5:
			c := in.byte()
			params := make([][]byte, c%4)
			for i := range params {
				l := int(in.byte())
				if l == 255 {
					params[i] = nil // NULL
				} else {
					params[i] = append([]byte{}, in.bytes(l%32)...)
				}
			}
			var formats []int16
			if c&0x10 != 0 {
				formats = []int16{1}
			}
			fr = encode(&pgproto3.Bind{DestinationPortal: in.pick(fuzzPortals), PreparedStatement: in.pick(fuzzNames),
				ParameterFormatCodes: formats, Parameters: params})
		case 6:
			fr = encode(&pgproto3.Describe{ObjectType: 'S', Name: in.pick(fuzzNames)})
		case 7:
			fr = encode(&pgproto3.Describe{ObjectType: 'P', Name: in.pick(fuzzPortals)})
		case 8:
			fr = encode(&pgproto3.Execute{Portal: in.pick(fuzzPortals), MaxRows: uint32(in.byte() % 2)})
		case 9:
			c := in.byte()
			if c&1 == 0 {
				fr = encode(&pgproto3.Close{ObjectType: 'S', Name: fuzzNames[int(c>>1)%len(fuzzNames)]})
			} else {
				fr = encode(&pgproto3.Close{ObjectType: 'P', Name: fuzzPortals[int(c>>1)%len(fuzzPortals)]})
			}
		case 10, 11:
			fr = encode(&pgproto3.Sync{})
		case 12:
			fr = encode(&pgproto3.Flush{})
		case 13, 14:
			fr = bigFrame(in)
		case 15:
			// A frame of any type with a consistent length.
			typ := in.byte()
			fr = rawFrame(typ, in.bytes(int(in.byte())))
		case 16:
			// A length the pooler refuses: below 4, or over max_packet_size.
			if in.byte()&1 == 0 {
				fr = []byte{'Q', 0, 0, 0, 3}
			} else {
				fr = []byte{'Q', 0x7f, 0xff, 0xff, 0xff}
			}
			p.frames = append(p.frames, fr)
			p.ending = endRefused
			p.mayClose = true
			return p
		case 17:
			fr = encode(&pgproto3.FunctionCall{Function: 1, Arguments: [][]byte{in.bytes(4)}})
		case 18:
			fr = encode(&pgproto3.CopyData{Data: in.bytes(int(in.byte()))})
		case 19:
			fr = encode(&pgproto3.CopyDone{})
		case 20:
			fr = encode(&pgproto3.CopyFail{Message: "fuzz"})
		case 21:
			if in.byte()&3 == 0 {
				p.ending = endMidMessage
				return p
			}
			fr = encode(&pgproto3.Terminate{})
			p.frames = append(p.frames, fr)
			p.ending = endTerminate
			p.mayClose = true
			return p
		case 22, 23:
			// A whole extended-protocol cycle.
			name := in.pick(fuzzNames)
			text := fuzzText(in)
			fr = encode(&pgproto3.Parse{Name: name, Query: text})
			fr = append(fr, encode(&pgproto3.Bind{PreparedStatement: name, Parameters: [][]byte{in.bytes(3)}})...)
			fr = append(fr, encode(&pgproto3.Describe{ObjectType: 'P'})...)
			fr = append(fr, encode(&pgproto3.Execute{})...)
			fr = append(fr, encode(&pgproto3.Sync{})...)
		default:
			// Bind and Execute of a named statement, then Sync.
			name := in.pick(fuzzNames)
			fr = encode(&pgproto3.Bind{PreparedStatement: name, Parameters: [][]byte{in.bytes(2), nil}})
			fr = append(fr, encode(&pgproto3.Execute{})...)
			fr = append(fr, encode(&pgproto3.Sync{})...)
		}
		total += len(fr)
		p.frames = append(p.frames, fr)
	}
	return p
}

// bigFrame is a Query, Parse, Bind, CopyData or Close whose whole message
// is a size around a buffer boundary, filled with a pattern.
func bigFrame(in *fuzzInput) []byte {
	c := in.byte()
	size := fuzzSizes[int(c>>3)%len(fuzzSizes)] + int(int8(in.byte()))%4
	seed := in.byte()
	body := size - 5
	switch c & 7 {
	case 0, 1:
		return encode(&pgproto3.Query{String: "SELECT " + string(fill(max(body-8, 0), seed))})
	case 2, 3:
		name := fuzzNames[int(seed)%len(fuzzNames)]
		return encode(&pgproto3.Parse{Name: name, Query: "SELECT " + string(fill(max(body-len(name)-4-7, 0), seed))})
	case 4:
		return encode(&pgproto3.Bind{PreparedStatement: fuzzNames[int(seed)%len(fuzzNames)], Parameters: [][]byte{fill(max(body-16, 0), seed)}})
	case 5:
		return encode(&pgproto3.CopyData{Data: fill(body, seed)})
	case 6:
		return encode(&pgproto3.Close{ObjectType: 'P', Name: string(fill(max(body-3, 0), seed))})
	default:
		return encode(&pgproto3.Describe{ObjectType: 'S', Name: string(fill(max(body-3, 0), seed))})
	}
}

var validFrontend = map[byte]bool{'Q': true, 'F': true, 'X': true, 'B': true, 'C': true, 'D': true, 'E': true, 'H': true, 'P': true, 'S': true, 'd': true, 'c': true, 'f': true}

// splitFrames cuts a well-framed byte stream into messages.
func splitFrames(b []byte) (frames [][]byte, ok bool) {
	for len(b) > 0 {
		if len(b) < 5 {
			return frames, false
		}
		n := int(binary.BigEndian.Uint32(b[1:]))
		if n < 4 || 1+n > len(b) {
			return frames, false
		}
		frames = append(frames, b[:1+n])
		b = b[1+n:]
	}
	return frames, true
}

const fuzzMarker = "SELECT 'pgturnstile fuzz session end'"

// ack is the acknowledgement a frontend message asks for, or 0.
func ack(typ byte) byte {
	switch typ {
	case 'P':
		return '1'
	case 'B':
		return '2'
	case 'C':
		return '3'
	case 'S', 'Q', 'F':
		return 'Z'
	}
	return 0
}

// session is one client connection of FuzzSession.
type session struct {
	h    *sessionHarness
	plan *sessionPlan
	conn *net.TCPConn
	br   *backendReader
	key  []byte

	got       []byte // types received after login
	lastError string
	readErr   error
	marker    bool // the marker's row and ReadyForQuery arrived
	markerTx  byte
}

// run plays one input: a session, then the checks after it. An input that
// takes over 4 s (a drain's timeout, most likely) is logged.
func (h *sessionHarness) run(t *testing.T, data []byte) {
	start := time.Now()
	defer func() {
		if d := time.Since(start); d > 4*time.Second {
			t.Logf("SLOW input (%v): %q", d, data)
		}
		if t.Failed() {
			// What failed may have left goroutines, clients or servers
			// behind: the next input gets a fresh Service and fake.
			h.restart(t)
		}
	}()
	plan := decodePlan(data)
	h.history = append(h.history, data)
	if len(h.history) > 8 {
		h.history = h.history[1:]
	}
	h.fake.take() // what earlier inputs left in flight is checked loosely

	c, err := net.Dial("tcp", h.tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{h: h, plan: plan, conn: c.(*net.TCPConn), br: newBackendReader(c)}
	defer c.Close()
	s.conn.SetDeadline(time.Now().Add(3 * time.Second))
	loggedIn := s.login(t)
	if loggedIn {
		s.relay(t)
	}
	c.Close()
	h.afterClose(t)
	h.checkFake(t)
}

// login sends the startup packet and reads up to ReadyForQuery.
func (s *session) login(t *testing.T) bool {
	if _, err := s.conn.Write(startupPacket(s.plan.minor, s.plan.params)); err != nil {
		t.Fatalf("startup: %v", err)
	}
	for {
		typ, body, err := s.br.next()
		if err != nil {
			if isBadFrame(err) {
				t.Fatalf("login: %v", err)
			}
			if s.plan.validLogin {
				t.Fatalf("login of %v ended without ReadyForQuery: %v", s.plan.params, err)
			}
			return false
		}
		switch typ {
		case 'E':
			if s.plan.validLogin {
				t.Fatalf("login of %v refused: %q\nlog:\n%s", s.plan.params, body, s.h.tp.log.tail())
			}
			return false
		case 'K':
			s.key = append([]byte{}, body...)
		case 'Z':
			if !s.plan.validLogin {
				t.Fatalf("login of %v should have been refused", s.plan.params)
			}
			return true
		}
	}
}

func isBadFrame(err error) bool {
	return err != nil && strings.Contains(err.Error(), errBadFrame.Error())
}

// relay writes the session's messages while a reader collects the
// replies, then checks invariants 2, 4, 5 and 6.
func (s *session) relay(t *testing.T) {
	plan := s.plan
	if plan.parkFirst {
		time.Sleep(150 * time.Millisecond)
	}
	var stream []byte
	for _, fr := range plan.frames {
		stream = append(stream, fr...)
	}
	frames, wellFramed := splitFrames(stream)
	tail := plan.ending == endTail && wellFramed
	if tail {
		stream = append(stream, encode(&pgproto3.CopyDone{})...)
		stream = append(stream, encode(&pgproto3.Sync{})...)
		stream = append(stream, encode(&pgproto3.Query{String: "ROLLBACK"})...)
		stream = append(stream, encode(&pgproto3.Query{String: fuzzMarker})...)
		frames, _ = splitFrames(stream)
	}
	var wantAcks []byte
	mayClose := plan.mayClose
	copying := false // after a COPY FROM STDIN, before its CopyDone or CopyFail
	for _, fr := range frames {
		typ, body := fr[0], fr[5:]
		switch {
		case typ == 'Q' && bytes.Contains(bytes.ToLower(body), []byte("from stdin")):
			copying = true
		case copying && (typ == 'c' || typ == 'f'):
			copying = false
		case copying && !strings.ContainsRune("dSH", rune(typ)):
			// The pooler refuses any other message in COPY IN (Postgres
			// would consume it as the error ending the COPY).
			mayClose = true
		}
		s.h.sent.add(typ, body)
		if a := ack(typ); a != 0 {
			wantAcks = append(wantAcks, a)
		}
		switch {
		case !validFrontend[typ], typ == 'X',
			bytes.Contains(body, []byte("fail_fatal")),
			len(body) > fakeSmallMessageLimit && !strings.ContainsRune("QFBPd", rune(typ)):
			mayClose = true
		}
	}
	if plan.ending == endMidMessage {
		stream = append(stream, rawFrame('Q', fill(100, 1))[:60]...)
	}

	done := make(chan struct{})
	go s.readReplies(done)
	werr := s.write(stream)
	if werr != nil && !isClosed(werr) {
		t.Fatalf("write: %v", werr)
	}
	if !tail {
		// Nothing more is owed: hang up our side and read what is left.
		s.conn.CloseWrite()
	}
	s.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	<-done

	if isBadFrame(s.readErr) {
		t.Fatalf("the client received %v\nafter %q", s.readErr, s.got)
	}
	if tail && !s.marker {
		switch {
		case isClosed(s.readErr) && mayClose:
		case isClosed(s.readErr):
			t.Fatalf("the pooler closed the connection (%v) though nothing the client sent calls for it; last error %s; received %q\nlog:\n%s",
				s.readErr, s.lastError, s.got, s.h.tp.log.tail())
		case werr != nil && isClosed(werr) && mayClose:
		default:
			t.Fatalf("no answer to the final Sync and Query within 2 s (%v, write: %v); received %q; last error %s\nlog:\n%s\npooler goroutines:\n%s\nthe server got:\n%s",
				s.readErr, werr, s.got, s.lastError, s.h.tp.log.tail(),
				strings.Join(poolerGoroutines(func(string) bool { return true }), "\n\n"), s.h.fake.dump())
		}
	}
	var acks []byte
	for _, typ := range s.got {
		if typ == '1' || typ == '2' || typ == '3' || typ == 'Z' {
			acks = append(acks, typ)
		}
	}
	if !isSubsequence(acks, wantAcks) {
		t.Fatalf("acknowledgements received %q are not a subsequence of those asked for %q (all received: %q)", acks, wantAcks, s.got)
	}
	if s.marker && s.markerTx == 'I' && plan.db != "fz_sess" {
		deadline := time.Now().Add(time.Second)
		for {
			c := s.h.tp.clientByKey(s.key)
			if c == nil || !c.linkedForTest() {
				break
			}
			if time.Now().After(deadline) {
				c.mu.Lock()
				ls := c.link.ls
				c.mu.Unlock()
				t.Fatalf("the client still holds its server 1 s after ReadyForQuery 'I' with nothing outstanding (link state %+v)", ls)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// write sends the stream as the plan's write mode says: at once, one
// write per message, or each message in two writes.
func (s *session) write(stream []byte) error {
	if s.plan.writeMode == 0 {
		_, err := s.conn.Write(stream)
		return err
	}
	frames, _ := splitFrames(stream)
	n := 0
	for _, fr := range frames {
		n += len(fr)
		if s.plan.writeMode == 2 && len(fr) > s.plan.split {
			if _, err := s.conn.Write(fr[:s.plan.split]); err != nil {
				return err
			}
			fr = fr[s.plan.split:]
		}
		if _, err := s.conn.Write(fr); err != nil {
			return err
		}
	}
	if n < len(stream) {
		_, err := s.conn.Write(stream[n:])
		return err
	}
	return nil
}

// readReplies reads until the marker's ReadyForQuery, an error, or a bad
// frame.
func (s *session) readReplies(done chan struct{}) {
	defer close(done)
	markerRow := false
	for {
		typ, body, err := s.br.next()
		if err != nil {
			s.readErr = err
			return
		}
		s.got = append(s.got, typ)
		switch typ {
		case 'E':
			s.lastError = fmt.Sprintf("%q", body)
		case 'D':
			var row pgproto3.DataRow
			if row.Decode(body) == nil && len(row.Values) == 2 && string(row.Values[0]) == fakeDigest([]byte(fuzzMarker)) {
				markerRow = true
			}
		case 'Z':
			if markerRow {
				s.marker = true
				s.markerTx = body[0]
				return
			}
		}
	}
}

func isSubsequence(sub, of []byte) bool {
	i := 0
	for _, c := range sub {
		for i < len(of) && of[i] != c {
			i++
		}
		if i == len(of) {
			return false
		}
		i++
	}
	return true
}

var (
	serveFrames = regexp.MustCompile(`^\(\*client\)\.(serve|serveLoggedIn|loop|resume|login)\(`)
	serveStack  = regexp.MustCompile(`(?m)^github\.com/pgturnstile/pgturnstile/pooler\.\(\*client\)\.(serve|serveLoggedIn|loop|resume|login)\(`)
)

// clientExitLimit bounds how long the pooler may keep serving a client
// after it hung up (invariant 7).
const clientExitLimit = 3 * time.Second

// afterClose checks invariants 1 and 7 once the client has hung up.
func (h *sessionHarness) afterClose(t *testing.T) {
	start := time.Now()
	deadline := start.Add(clientExitLimit)
	var stacks []string
	for {
		counted := h.tp.svc.clientCount.Load()
		if counted == 0 || time.Now().After(deadline) {
			stacks = poolerGoroutines(func(fn string) bool {
				return serveFrames.MatchString(fn) || strings.HasPrefix(fn, "(*client).pump")
			})
			var serving []string
			for _, g := range stacks {
				if serveStack.MatchString(g) {
					serving = append(serving, g)
				}
			}
			if counted == 0 && len(serving) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v after the client closed, the pooler still counts %d clients and runs:\n%s\nlog:\n%s",
					clientExitLimit, counted, strings.Join(serving, "\n\n"), h.tp.log.tail())
			}
		}
		time.Sleep(time.Millisecond)
	}
	now := time.Now()
	seen := map[int]bool{}
	for _, g := range stacks {
		id := goroutineID(g)
		seen[id] = true
		first, ok := h.pumps[id]
		if !ok {
			h.pumps[id] = now
			continue
		}
		if now.Sub(first) > drainTimeout+2*time.Second {
			t.Fatalf("a pump goroutine has run for %v:\n%s", now.Sub(first), g)
		}
	}
	for id := range h.pumps {
		if !seen[id] {
			delete(h.pumps, id)
		}
	}
	if p := h.tp.log.takePanics(); len(p) > 0 {
		t.Fatalf("the pooler logged:\n%s", strings.Join(p, "\n"))
	}
}

var (
	pgtsName   = regexp.MustCompile(`^PGTS_[0-9]+$`)
	poolerSets = regexp.MustCompile(`^(SET (?:"(?:[^"]|"")*"|[A-Za-z0-9_.]+) = '(?:[^']|'')*';)+\x00$`)
	// poolerQueries are the pooler's own queries: the drain's ROLLBACK,
	// server_reset_query, and what replaces a client's DEALLOCATE of a
	// mapped name (the stand-in, or the DEALLOCATE of the scratch name).
	poolerQueries = map[string]bool{
		"ROLLBACK\x00": true, "DISCARD ALL\x00": true, "DO $$BEGIN END$$\x00": true, "DEALLOCATE " + noopStmt + "\x00": true,
	}
)

// checkFake checks invariant 8 on what the fake received during this input.
func (h *sessionHarness) checkFake(t *testing.T) {
	now := time.Now()
	noopParse := string(appendParse(nil, noopStmt, "", nil)[5:])
	msgs := h.fake.take()
	defer func() {
		if t.Failed() {
			var sb strings.Builder
			for _, m := range msgs {
				fmt.Fprintf(&sb, "  conn %d %q %s\n", m.conn, m.typ, quoteShort(m.body))
			}
			t.Logf("the server got, during this input:\n%s\nlog:\n%s", sb.String(), h.tp.log.tail())
			for i, d := range h.history {
				t.Logf("input -%d: %q", len(h.history)-1-i, d)
			}
		}
	}()
	for _, m := range msgs {
		body := string(m.body)
		switch m.typ {
		case 'Q':
			switch {
			case h.sent.has(now, sentQuery, m.body):
			case poolerQueries[body], poolerSets.MatchString(body):
			default:
				t.Fatalf("the server got a Query the client never sent: %s", quoteShort(m.body))
			}
		case 'P':
			if h.sent.has(now, sentParse, m.body) || body == noopParse {
				continue
			}
			name, q, types, ok := parseParse(m.body)
			key := sentKey(sentStmt, q, types)
			if !ok || !pgtsName.MatchString(name) || !h.sent.has(now, sentStmt, q, types) {
				t.Fatalf("the server got a Parse the client never sent: %s", quoteShort(m.body))
			}
			if old, ok := h.pgts[name]; ok && old != key {
				t.Fatalf("server statement %s was prepared with another text before: now %s", name, quoteShort(m.body))
			}
			h.pgts[name] = key
		case 'B':
			if h.sent.has(now, sentBindRaw, m.body) {
				continue
			}
			portal, rest, ok1 := fakeCut(m.body)
			stmt, params, ok2 := fakeCut(rest)
			if !ok1 || !ok2 || !pgtsName.Match(stmt) || !h.sent.has(now, sentBind, portal, params) {
				t.Fatalf("the server got a Bind the client never sent: %s", quoteShort(m.body))
			}
		case 'E':
			if !h.sent.has(now, sentExecute, m.body) {
				t.Fatalf("the server got an Execute the client never sent: %s", quoteShort(m.body))
			}
		case 'D', 'C':
			if h.sent.has(now, sentObject, m.body) {
				continue
			}
			if len(body) >= 2 && body[0] == 'S' {
				name := strings.TrimSuffix(body[1:], "\x00")
				if name == noopStmt || pgtsName.MatchString(name) {
					continue
				}
			}
			t.Fatalf("the server got a %q the client never sent: %s", m.typ, quoteShort(m.body))
		}
	}
}

// quoteShort quotes b, eliding the middle of long ones.
func quoteShort(b []byte) string {
	if len(b) <= 200 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q … %q (%d bytes)", b[:100], b[len(b)-60:], len(b))
}

// Seed builders: each writes the input bytes decodePlan reads for one
// operation. Names and texts are indexes into fuzzNames, fuzzPortals and
// fuzzQueries, or literal text (sText).

func seedOf(db, user, mode byte, ops ...[]byte) []byte {
	return bytes.Join(append([][]byte{{db, user, mode}}, ops...), nil)
}

func sQ(i int) []byte { return []byte{byte(2 * i)} } // fuzzQueries[i]
func sText(t string) []byte {
	return append([]byte{byte(2*len(t) + 1)}, t...) // "SELECT " + t
}
func sdQuery(text []byte) []byte { return append([]byte{0}, text...) }
func sdParse(name int, text []byte, oids ...byte) []byte {
	b := append([]byte{2, byte(len(oids))}, oids...)
	return append(append(b, byte(name)), text...)
}
func sdBind(portal, name int, params ...[]byte) []byte {
	b := []byte{4, byte(len(params))}
	for _, p := range params {
		b = append(append(b, byte(len(p))), p...)
	}
	return append(b, byte(portal), byte(name))
}
func sdDescribeS(name int) []byte   { return []byte{6, byte(name)} }
func sdDescribeP(portal int) []byte { return []byte{7, byte(portal)} }
func sdExecute(portal int) []byte   { return []byte{8, byte(portal), 0} }
func sdCloseS(name int) []byte      { return []byte{9, byte(2 * name)} }
func sdCloseP(portal int) []byte    { return []byte{9, byte(2*portal + 1)} }
func sdSync() []byte                { return []byte{10} }
func sdFlush() []byte               { return []byte{12} }

// sdBig: kind 0 Query, 2 Parse, 4 Bind, 5 CopyData, 6 Close, 7 Describe;
// the message is fuzzSizes[size]+delta bytes long.
func sdBig(kind, size int, delta int8, seed byte) []byte {
	return []byte{13, byte(size<<3 | kind), byte(delta), seed}
}
func sdRaw(typ byte, body ...byte) []byte {
	return append([]byte{15, typ, byte(len(body))}, body...)
}
func sdFunctionCall() []byte        { return []byte{17, 1, 2, 3, 4} }
func sdCopyData(data string) []byte { return append([]byte{18, byte(len(data))}, data...) }
func sdCopyDone() []byte            { return []byte{19} }
func sdCopyFail() []byte            { return []byte{20} }
func sdTerminate() []byte           { return []byte{21, 1} }
func sdCloseMidMessage() []byte     { return []byte{21, 0} }
func sdCycle(name int, text []byte) []byte {
	return append(append([]byte{22, byte(name)}, text...), 'a', 'b', 'c')
}
func sdBindExecute(name int) []byte { return []byte{24, byte(name), 'x', 'y'} }

const (
	seedTx   = 0
	seedSess = 1
	seedStmt = 3
)

// fuzzSessionSeeds are hand-made inputs for the paths worth starting from.
func fuzzSessionSeeds() [][]byte {
	const (
		s1, s2, s3, bigS1 = 1, 2, 3, 4
		noopName, pgts1   = 6, 7
		p1                = 1
	)
	cycles := func(names ...int) [][]byte {
		var ops [][]byte
		for i, n := range names {
			ops = append(ops, sdCycle(n, sText(fmt.Sprintf("%d", i))))
		}
		return ops
	}
	return [][]byte{
		seedOf(seedTx, 0, 0, sdQuery(sQ(0))),
		seedOf(seedSess, 0, 0, sdQuery(sQ(0)), sdQuery(sQ(10)), sdQuery(sQ(15))),
		seedOf(seedStmt, 0, 0, sdQuery(sQ(0)), sdQuery(sQ(1)), sdQuery(sQ(0))),
		seedOf(seedStmt, 0, 0, sdCycle(s1, sQ(0)), sdBindExecute(s1)),
		// Prepared statements mapped: the second cycle finds s1 prepared.
		seedOf(seedTx, 0, 0, sdCycle(s1, sQ(0)), sdBindExecute(s1), sdBindExecute(s1), sdCloseS(s1), sdSync()),
		// More statements than max_prepared_statements: the LRU evicts.
		seedOf(seedTx, 0, 1, append(cycles(s1, s2, s3, bigS1, pgts1), sdBindExecute(s1), sdBindExecute(s2))...),
		// A Parse under 4 KiB, then Parses over 4 KiB and 16 KiB.
		seedOf(seedTx, 0, 0, sdParse(s1, sQ(0)), sdSync(), sdBig(2, 0, 1, 2), sdSync(), sdBig(2, 1, 1, 3), sdBindExecute(s2), sdBindExecute(s3)),
		seedOf(seedTx, 0, 2|3<<2, sdParse(0, sText("x")), sdBig(2, 0, 0, 0), sdBig(2, 0, -1, 0), sdBig(2, 1, 1, 0), sdSync()),
		// Query, Bind and Close bodies around the buffer sizes.
		seedOf(seedTx, 0, 0, sdBig(0, 0, -1, 1), sdBig(0, 0, 0, 2), sdBig(0, 0, 1, 3), sdBig(0, 1, -1, 4), sdBig(0, 1, 1, 5), sdBig(0, 7, 0, 6)),
		seedOf(seedTx, 0, 0, sdParse(s1, sQ(0), 23), sdSync(), sdBig(4, 1, 0, 1), sdExecute(0), sdSync(), sdBig(6, 0, 1, 0), sdSync()),
		seedOf(seedSess, 0, 0, sdParse(s1, sQ(0)), sdBig(2, 0, 1, 2), sdBig(0, 3, 0, 1), sdSync()),
		// A Parse of a name the client holds (42P05 from the pooler).
		seedOf(seedTx, 0, 0, sdCycle(s1, sQ(0)), sdParse(s1, sQ(0)), sdBind(0, s1), sdSync(), sdBindExecute(s1)),
		// A transaction block with an error inside.
		seedOf(seedTx, 0, 0, sdQuery(sQ(1)), sdCycle(s1, sQ(0)), sdQuery(sQ(4)), sdQuery(sQ(0)), sdQuery(sQ(3)), sdBindExecute(s1)),
		seedOf(seedSess, 0, 0, sdQuery(sQ(1)), sdQuery(sQ(0))),
		// COPY FROM STDIN, ended by CopyDone and by CopyFail.
		seedOf(seedSess, 0, 0, sdQuery(sQ(11)), sdCopyData("1\n2\n"), sdBig(5, 1, 0, 1), sdCopyDone(), sdQuery(sQ(0))),
		seedOf(seedTx, 0, 0, sdQuery(sQ(11)), sdCopyData("1\n"), sdCopyFail(), sdQuery(sQ(0))),
		seedOf(seedTx, 0, 0, sdQuery(sQ(11)), sdCopyData("1\n")),
		// DEALLOCATE and DISCARD ALL of mapped statements.
		seedOf(seedTx, 0, 0, sdCycle(s1, sQ(0)), sdQuery(sQ(8)), sdBindExecute(s1), sdCycle(bigS1, sQ(15)), sdQuery(sQ(9)), sdQuery(sQ(6)), sdQuery(sQ(7)), sdBindExecute(bigS1)),
		// The unnamed statement prepared in one Sync cycle, used in the next.
		seedOf(seedTx, 0, 0, sdParse(0, sQ(0)), sdDescribeS(0), sdSync(), sdBind(0, 0, []byte("v")), sdDescribeP(0), sdExecute(0), sdSync()),
		seedOf(seedTx, 0, 0, sdCloseS(s1), sdCloseP(p1), sdSync(), sdParse(s1, sQ(0)), sdSync(), sdParse(s1, sQ(0)), sdSync()),
		// Client names that look like the pooler's own.
		seedOf(seedTx, 0, 0, sdCycle(noopName, sQ(0)), sdCycle(pgts1, sQ(15)), sdBindExecute(noopName), sdBindExecute(pgts1)),
		seedOf(seedSess, 0, 0, sdCycle(noopName, sQ(0)), sdCycle(pgts1, sQ(15))),
		// A batch ended by Flush, answered before its Sync.
		seedOf(seedTx, 0, 0, sdParse(s1, sQ(0)), sdBind(p1, s1), sdExecute(p1), sdFlush(), sdSync()),
		// Startup variants: application_name, options, protocol 3.2 and
		// _pq_ options, a refused option, no such database, no user.
		seedOf(seedTx|0x08|0x10, 0, 0, sdQuery(sQ(0))),
		seedOf(seedSess|0x10, 2<<2, 0, sdQuery(sQ(0))),
		seedOf(seedTx|0x60, 0, 0, sdQuery(sQ(0))),
		seedOf(seedTx|0x10, 3<<2, 0, sdQuery(sQ(0))),
		seedOf(6, 0, 0, sdQuery(sQ(0))),
		seedOf(seedTx, 3, 0, sdQuery(sQ(0))),
		// Silent after login: the client parks, then wakes.
		seedOf(seedTx|0x80, 0x80, 0, sdCycle(s1, sQ(0))),
		// Garbage: an unknown type, a refused length, Terminate, a client
		// gone in the middle of a message, a FunctionCall, a FATAL.
		seedOf(seedTx, 0, 0, sdQuery(sQ(0)), sdRaw('Z', 1, 2)),
		seedOf(seedTx, 0, 0, sdQuery(sQ(0)), sdRaw('P', 's', 0, 0), sdRaw('B', 0, 0, 0, 9), sdSync()),
		seedOf(seedTx, 0, 0, sdQuery(sQ(0)), []byte{16, 1}),
		seedOf(seedTx, 0, 0, sdCycle(s1, sQ(0)), sdTerminate()),
		seedOf(seedSess, 0, 0, sdQuery(sQ(1)), sdCloseMidMessage()),
		seedOf(seedTx, 0, 0, sdFunctionCall(), sdQuery(sQ(0))),
		seedOf(seedTx, 0, 0, sdCycle(s1, sQ(16)), sdQuery(sQ(0))),
		seedOf(seedTx, 0, 0xc0, sdCycle(s1, sQ(0)), sdParse(s2, sQ(0))),
		// Postgres skips a Query or FunctionCall after an error until
		// Sync (ignore_till_sync), ignores Sync during COPY FROM STDIN and
		// consumes any other message then as the error that ends the COPY
		// (linkState): each of these once left the link waiting for a
		// ReadyForQuery that never came, or matched replies to the wrong
		// ops.
		seedOf(seedTx, 0, 0, sdParse(1, sQ(5)), sdQuery(sQ(0)), sdSync()),
		seedOf(seedTx, 0, 0, sdParse(1, sQ(5)), sdFunctionCall(), sdSync()),
		seedOf(seedTx, 0, 0, sdQuery(sQ(11)), sdSync()),
		seedOf(seedTx, 0, 0, sdQuery(sQ(11)), sdQuery(sQ(0))),
		seedOf(seedTx, 0, 0, sdCycle(1, sQ(0)), sdQuery(sQ(11)), sdParse(2, sQ(0)), sdSync()),
	}
}
