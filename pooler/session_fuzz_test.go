package pooler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/wire"
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
//     queries (SET name='value'; ..., ROLLBACK, DISCARD ALL, the
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
	h.tp.svc.Shutdown(context.Background(), admin.ShutdownImmediate)
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
		if _, q, types, ok := wire.DecodeParse(body); ok {
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

// fuzzClient is one client connection of FuzzSession.
type fuzzClient struct {
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
	s := &fuzzClient{h: h, plan: plan, conn: c.(*net.TCPConn), br: newBackendReader(c)}
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
func (s *fuzzClient) login(t *testing.T) bool {
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
func (s *fuzzClient) relay(t *testing.T) {
	plan := s.plan
	if plan.parkFirst {
		time.Sleep(150 * time.Millisecond)
	}
	stream, frames, tail := plan.stream()
	wantAcks, mayClose := s.expect(frames)
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
		s.checkNoMarker(t, mayClose, werr)
	}
	s.checkAcks(t, wantAcks)
	if s.marker && s.markerTx == 'I' && plan.db != "fz_sess" {
		s.checkReleased(t)
	}
}

// expect records the frames about to be sent (for checkFake) and returns
// the acknowledgements they ask for, in order, and whether one of them
// lets the pooler close the connection.
func (s *fuzzClient) expect(frames [][]byte) (wantAcks []byte, mayClose bool) {
	mayClose = s.plan.mayClose
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
		if closes(typ, body) {
			mayClose = true
		}
	}
	return wantAcks, mayClose
}

// closes reports a message after which the pooler may close the
// connection: one no frontend sends, Terminate, a query the fake answers
// with FATAL, or a large message of a type the pooler does not stream.
func closes(typ byte, body []byte) bool {
	return !validFrontend[typ] || typ == 'X' ||
		bytes.Contains(body, []byte("fail_fatal")) ||
		len(body) > fakeSmallMessageLimit && !strings.ContainsRune("QFBPd", rune(typ))
}

// checkNoMarker fails the input when the marker's answer did not arrive
// and nothing the client sent excuses it: the connection was closed, or
// the final Sync and Query went unanswered.
func (s *fuzzClient) checkNoMarker(t *testing.T, mayClose bool, werr error) {
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

// checkAcks: the acknowledgements received (ParseComplete, BindComplete,
// CloseComplete, ReadyForQuery) are a subsequence of those asked for.
func (s *fuzzClient) checkAcks(t *testing.T, wantAcks []byte) {
	var acks []byte
	for _, typ := range s.got {
		if typ == '1' || typ == '2' || typ == '3' || typ == 'Z' {
			acks = append(acks, typ)
		}
	}
	if !isSubsequence(acks, wantAcks) {
		t.Fatalf("acknowledgements received %q are not a subsequence of those asked for %q (all received: %q)", acks, wantAcks, s.got)
	}
}

// checkReleased: after ReadyForQuery 'I' with nothing outstanding, the
// client gives its server back within a second (outside session mode).
func (s *fuzzClient) checkReleased(t *testing.T) {
	deadline := time.Now().Add(time.Second)
	for {
		c := s.h.tp.clientByKey(s.key)
		if c == nil || !c.linkedForTest() {
			break
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			ls := c.mu.link.mu.ls
			c.mu.Unlock()
			t.Fatalf("the client still holds its server 1 s after ReadyForQuery 'I' with nothing outstanding (link state %+v)", ls)
		}
		time.Sleep(time.Millisecond)
	}
}

// write sends the stream as the plan's write mode says: at once, one
// write per message, or each message in two writes.
func (s *fuzzClient) write(stream []byte) error {
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
func (s *fuzzClient) readReplies(done chan struct{}) {
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
				return serveFrames.MatchString(fn) || strings.HasPrefix(fn, "(*link).pump")
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
	poolerSets = regexp.MustCompile(`^(SET (?:"(?:[^"]|"")*"|[A-Za-z0-9_.]+)='(?:[^']|'')*';)+\x00$`)
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
	noopParse := string(wire.AppendParse(nil, noopStmt, "", nil)[5:])
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
		h.checkReceived(t, now, noopParse, m)
	}
}

// checkReceived fails the input when the fake received a message that
// neither the client sent (within sentWindow) nor the pooler sends itself.
func (h *sessionHarness) checkReceived(t *testing.T, now time.Time, noopParse string, m fakeMsg) {
	t.Helper()
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
			return
		}
		h.checkServerParse(t, now, m.body)
	case 'B':
		if h.sent.has(now, sentBindRaw, m.body) {
			return
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
		if h.sent.has(now, sentObject, m.body) || isPoolerStatementObject(body) {
			return
		}
		t.Fatalf("the server got a %q the client never sent: %s", m.typ, quoteShort(m.body))
	}
}

// checkServerParse: a Parse the client did not send as is must be one of
// the client's statements under a server name (PGTS_n), and a server name
// keeps its text for the fake's whole life.
func (h *sessionHarness) checkServerParse(t *testing.T, now time.Time, body []byte) {
	t.Helper()
	nameBytes, q, types, ok := wire.DecodeParse(body)
	name := string(nameBytes)
	key := sentKey(sentStmt, q, types)
	if !ok || !pgtsName.MatchString(name) || !h.sent.has(now, sentStmt, q, types) {
		t.Fatalf("the server got a Parse the client never sent: %s", quoteShort(body))
	}
	if old, ok := h.pgts[name]; ok && old != key {
		t.Fatalf("server statement %s was prepared with another text before: now %s", name, quoteShort(body))
	}
	h.pgts[name] = key
}

// isPoolerStatementObject reports a Describe or Close body of a statement
// the pooler names itself: the stand-in or a server name (PGTS_n).
func isPoolerStatementObject(body string) bool {
	if len(body) < 2 || body[0] != 'S' {
		return false
	}
	name := strings.TrimSuffix(body[1:], "\x00")
	return name == noopStmt || pgtsName.MatchString(name)
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
