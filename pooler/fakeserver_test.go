package pooler

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// fakePostgres is an in-process stand-in for a PostgreSQL server, for tests
// that drive whole sessions through a Service (FuzzSession,
// TestRelayProperty). It speaks enough of protocol 3.0 for the pooler:
//
//   - login: SSLRequest and GSSENCRequest are answered 'N'; a
//     StartupMessage gets AuthenticationOk, ParameterStatus for the usual
//     reported parameters, BackendKeyData and ReadyForQuery 'I'; a
//     CancelRequest is recorded and its connection closed.
//   - the simple protocol: each Query runs as one statement (several
//     SETs separated by ';', as the pooler's own parameter sync sends, run
//     one by one) and ends with ReadyForQuery; COPY ... FROM STDIN takes
//     CopyData until CopyDone or CopyFail, ignores Sync and Flush meanwhile
//     and ends with an error at any other message, which it consumes.
//   - the extended protocol with named and unnamed statements and portals:
//     Parse, Bind, Describe, Execute, Close, Flush, Sync, with Postgres's
//     errors for what a real server refuses (a name already prepared, a
//     statement or portal that does not exist, a malformed body) and its
//     skipping of everything up to the next Sync after an error — a Query
//     or FunctionCall included, as postgres.c does.
//   - transaction status 'I', 'T', 'E' from BEGIN, COMMIT, ROLLBACK and
//     errors; portals end with the transaction (the implicit one at Sync).
//   - a message type Postgres does not know gets FATAL and the connection
//     closes; an oversized message closes it too.
//
// Errors and notices are flushed at once, as elog.c does; other replies
// at ReadyForQuery, Flush, or when 8 KiB are pending.
//
// Statements are told apart by their text only: blank is an empty query;
// BEGIN/START, COMMIT/END, ROLLBACK/ABORT, DISCARD ALL, DEALLOCATE, SET,
// DO (nothing) and COPY FROM STDIN do what they do in Postgres; a text
// containing "fail_parse" fails at Parse (and as a simple query),
// "fail_exec" at
// Execute, "fail_fatal" ends the connection with FATAL, "notice" sends a
// NoticeResponse first; anything else returns one row. The row's two text
// columns echo what the server received: the statement's text and the
// Bind's parameter section, each as "<byte count>:<sha256 prefix>"
// (fakeDigest), so a client can check that its own bytes arrived.
//
// Every message received after login is recorded with its connection
// (take returns and clears the record), so a test can compare what the
// client sent with what reached "Postgres".
type fakePostgres struct {
	ln net.Listener

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	msgs    []fakeMsg
	cancels int
	// problems are protocol violations the fake saw from its peer (the
	// pooler): unknown message types, bad lengths, malformed bodies. A
	// test that sends only valid messages asserts there are none.
	problems []string
	// errors counts ErrorResponses the fake sent.
	errors int
	nextID int
	closed bool
	// standby, when set ("on" or "off"), is reported as in_hot_standby
	// and default_transaction_read_only, as PostgreSQL 14+ does: at
	// login, and to open connections at their next ReadyForQuery
	// (setStandby, hosts_test.go).
	standby string
	// startups are the startup parameters of every login, in order.
	startups []map[string]string
	// migrations counts migrate calls: a statement whose text has
	// "select_star", prepared before the last one, fails its Bind and
	// Describe as Postgres's does after ALTER TABLE … ADD COLUMN.
	migrations int

	wg sync.WaitGroup
}

// fakeMsg is one message a fake server connection received.
type fakeMsg struct {
	conn int
	typ  byte
	body []byte
}

// startFakePostgres listens on 127.0.0.1:0 and serves until Close.
func startFakePostgres(tb testing.TB) *fakePostgres {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &fakePostgres{ln: ln, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f
}

func (f *fakePostgres) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *fakePostgres) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			c.Close()
			return
		}
		f.nextID++
		id := f.nextID
		f.conns[c] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go func() {
			defer f.wg.Done()
			fc := &fakeConn{f: f, id: id, c: c, tx: 'I', stmts: map[string]*fakeStmt{}, portals: map[string]*fakePortal{}}
			fc.serve()
			c.Close()
			f.mu.Lock()
			delete(f.conns, c)
			f.mu.Unlock()
		}()
	}
}

// Close stops the listener, closes every connection and waits for their
// goroutines.
func (f *fakePostgres) Close() {
	f.mu.Lock()
	f.closed = true
	f.ln.Close()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// take returns the messages recorded since the last take and forgets them.
func (f *fakePostgres) take() []fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.msgs
	f.msgs = nil
	return m
}

// dump lists the messages recorded since the last take.
func (f *fakePostgres) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sb strings.Builder
	for _, m := range f.msgs {
		fmt.Fprintf(&sb, "  conn %d %q %d bytes %q\n", m.conn, m.typ, len(m.body), m.body[:min(len(m.body), 60)])
	}
	return sb.String()
}

// takeProblems returns the protocol violations seen since the last call,
// and the ErrorResponses sent.
func (f *fakePostgres) takeProblems() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, n := f.problems, f.errors
	f.problems, f.errors = nil, 0
	return p, n
}

func (f *fakePostgres) record(conn int, typ byte, body []byte) {
	f.mu.Lock()
	f.msgs = append(f.msgs, fakeMsg{conn: conn, typ: typ, body: body})
	f.mu.Unlock()
}

func (f *fakePostgres) problem(conn int, format string, args ...any) {
	f.mu.Lock()
	f.problems = append(f.problems, fmt.Sprintf("server conn %d: ", conn)+fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// fakeDigest is how the fake echoes bytes it received: their count and a
// prefix of their SHA-256.
func fakeDigest(b []byte) string {
	h := sha256.Sum256(b)
	return strconv.Itoa(len(b)) + ":" + hex.EncodeToString(h[:6])
}

// Postgres's limits on message length (postgres.c, PQ_*_MESSAGE_LIMIT),
// the large one lowered to what a test may hold in memory.
const (
	fakeSmallMessageLimit = 10000
	fakeLargeMessageLimit = 64 << 20
)

type fakeStmt struct {
	query []byte
	types []uint32
	epoch int // fakePostgres.migrations when it was prepared
}

// migrate changes the result of every select_star statement prepared so
// far (see fakePostgres.migrations).
func (f *fakePostgres) migrate() {
	f.mu.Lock()
	f.migrations++
	f.mu.Unlock()
}

// stalePlan fails a Bind or Describe of st, as Postgres's
// RevalidateCachedQuery does, when a migration changed its result.
func (fc *fakeConn) stalePlan(st *fakeStmt) bool {
	fc.f.mu.Lock()
	stale := bytes.Contains(st.query, []byte("select_star")) && st.epoch != fc.f.migrations
	fc.f.mu.Unlock()
	if stale {
		fc.fail(true, "0A000", "cached plan must not change result type")
	}
	return stale
}

type fakePortal struct {
	stmt   *fakeStmt
	params []byte // the Bind's parameter section, as received
}

// fakeConn is one server connection of the fake.
type fakeConn struct {
	f   *fakePostgres
	id  int
	c   net.Conn
	out []byte // replies not written yet

	tx             byte // 'I', 'T' or 'E'
	ignoreTillSync bool
	copyIn         bool
	copyBytes      int
	stmts          map[string]*fakeStmt // "" is the unnamed statement
	portals        map[string]*fakePortal
	dead           bool   // FATAL sent: close after flushing
	standby        string // the role this connection last reported
}

func (fc *fakeConn) serve() {
	if !fc.login() {
		return
	}
	var hdr [5]byte
	for !fc.dead {
		if _, err := io.ReadFull(fc.c, hdr[:]); err != nil {
			return
		}
		typ := hdr[0]
		n := int(binary.BigEndian.Uint32(hdr[1:]))
		large := false
		switch typ {
		case 'Q', 'F', 'B', 'P', 'd':
			large = true
		case 'X', 'C', 'D', 'E', 'H', 'S', 'c', 'f':
		default:
			fc.f.problem(fc.id, "invalid frontend message type %d", typ)
			fc.fatal("08P01", fmt.Sprintf("invalid frontend message type %d", typ))
			fc.flush()
			return
		}
		limit := fakeSmallMessageLimit
		if large {
			limit = fakeLargeMessageLimit
		}
		if n < 4 || n-4 > limit {
			// Postgres logs "invalid message length" and hangs up.
			fc.f.problem(fc.id, "invalid message length %d for type %q", n, typ)
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(fc.c, body); err != nil {
			return
		}
		fc.f.record(fc.id, typ, body)
		if typ == 'X' {
			return
		}
		if fc.copyIn {
			fc.copyMessage(typ, body)
			continue
		}
		if typ == 'S' {
			fc.ignoreTillSync = false
		}
		if fc.ignoreTillSync {
			continue
		}
		fc.handle(typ, body)
		if len(fc.out) >= 8192 {
			fc.flush()
		}
	}
	fc.flush()
}

// login reads the startup packet (after any SSLRequest/GSSENCRequest) and
// sends the welcome. False ends the connection.
func (fc *fakeConn) login() bool {
	for {
		var lb [4]byte
		if _, err := io.ReadFull(fc.c, lb[:]); err != nil {
			return false
		}
		n := int(binary.BigEndian.Uint32(lb[:]))
		if n < 8 || n > fakeSmallMessageLimit {
			fc.f.problem(fc.id, "invalid startup packet length %d", n)
			return false
		}
		pkt := make([]byte, n-4)
		if _, err := io.ReadFull(fc.c, pkt); err != nil {
			return false
		}
		code := binary.BigEndian.Uint32(pkt)
		switch code {
		case 80877103, 80877104: // SSLRequest, GSSENCRequest
			if _, err := fc.c.Write([]byte{'N'}); err != nil {
				return false
			}
			continue
		case 80877102: // CancelRequest
			fc.f.mu.Lock()
			fc.f.cancels++
			fc.f.mu.Unlock()
			return false
		case 196608:
		default:
			fc.f.problem(fc.id, "unsupported protocol %d", code)
			fc.fatal("0A000", "unsupported frontend protocol")
			fc.flush()
			return false
		}
		params := map[string]string{}
		fields := bytes.Split(bytes.TrimRight(pkt[4:], "\x00"), []byte{0})
		for i := 0; i+1 < len(fields); i += 2 {
			params[string(fields[i])] = string(fields[i+1])
		}
		fc.f.mu.Lock()
		fc.f.startups = append(fc.f.startups, params)
		fc.f.mu.Unlock()
		if params["replication"] != "" && params["user"] == "norepl" {
			// Postgres 16's refusal of a walsender to a role without
			// REPLICATION.
			fc.fatal("42501", "permission denied to start WAL sender")
			fc.flush()
			return false
		}
		fc.send(&pgproto3.AuthenticationOk{})
		reported := []struct{ name, value string }{
			{"application_name", params["application_name"]},
			{"client_encoding", "UTF8"},
			{"DateStyle", "ISO, MDY"},
			{"integer_datetimes", "on"},
			{"IntervalStyle", "postgres"},
			{"is_superuser", "off"},
			{"server_encoding", "UTF8"},
			{"server_version", "16.4"},
			{"session_authorization", params["user"]},
			{"standard_conforming_strings", "on"},
			{"TimeZone", "UTC"},
		}
		for _, p := range reported {
			if v, ok := params[p.name]; ok && p.name != "session_authorization" {
				p.value = v
			}
			fc.send(&pgproto3.ParameterStatus{Name: p.name, Value: p.value})
		}
		fc.send(&pgproto3.BackendKeyData{ProcessID: uint32(fc.id), SecretKey: []byte{1, 2, 3, byte(fc.id)}})
		fc.reportStandby()
		fc.ready()
		return fc.flush()
	}
}

func (fc *fakeConn) send(m pgproto3.BackendMessage) {
	out, err := m.Encode(fc.out)
	if err != nil {
		panic(err)
	}
	fc.out = out
}

func (fc *fakeConn) flush() bool {
	if len(fc.out) == 0 {
		return true
	}
	_, err := fc.c.Write(fc.out)
	fc.out = fc.out[:0]
	return err == nil
}

func (fc *fakeConn) ready() {
	fc.reportStandby()
	fc.send(&pgproto3.ReadyForQuery{TxStatus: fc.tx})
	fc.flush()
}

// fail sends an ERROR as Postgres does: at once (errors and notices are
// flushed when raised), a transaction block becomes failed, and in the
// extended protocol everything up to Sync is skipped.
func (fc *fakeConn) fail(extended bool, code, msg string) {
	fc.f.mu.Lock()
	fc.f.errors++
	fc.f.mu.Unlock()
	fc.send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code, Message: msg})
	fc.flush() // as elog.c's send_message_to_frontend does
	if fc.tx == 'T' {
		fc.tx = 'E'
	}
	if extended {
		fc.ignoreTillSync = true
	}
}

func (fc *fakeConn) fatal(code, msg string) {
	fc.send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg})
	fc.dead = true
}

func (fc *fakeConn) malformed(extended bool, typ byte) {
	fc.f.problem(fc.id, "malformed %q message", typ)
	fc.fail(extended, "08P01", fmt.Sprintf("invalid message format (%q)", typ))
}

// handle processes one message outside COPY and outside a skip to Sync.
func (fc *fakeConn) handle(typ byte, body []byte) {
	switch typ {
	case 'Q':
		text, ok := fakeCString(body)
		if !ok {
			fc.malformed(false, typ)
			fc.ready()
			return
		}
		// A simple query replaces the unnamed statement and portal.
		delete(fc.stmts, "")
		delete(fc.portals, "")
		if fc.run(text, nil, true) {
			fc.ready()
		}
	case 'F':
		if fc.tx == 'E' {
			fc.fail(false, "25P02", "current transaction is aborted, commands ignored until end of transaction block")
		} else {
			fc.fail(false, "42883", "function does not exist")
		}
		fc.ready()
	case 'P':
		fc.parse(body)
	case 'B':
		fc.bind(body)
	case 'D':
		fc.describe(body)
	case 'E':
		portal, rest, ok := fakeCut(body)
		if !ok || len(rest) != 4 {
			fc.malformed(true, typ)
			return
		}
		p := fc.portals[string(portal)]
		if p == nil {
			fc.fail(true, "34000", fmt.Sprintf("portal %q does not exist", portal))
			return
		}
		fc.run(p.stmt.query, p.params, false)
	case 'C':
		if len(body) < 2 || (body[0] != 'S' && body[0] != 'P') {
			fc.malformed(true, typ)
			return
		}
		name, rest, ok := fakeCut(body[1:])
		if !ok || len(rest) != 0 {
			fc.malformed(true, typ)
			return
		}
		if body[0] == 'S' {
			delete(fc.stmts, string(name))
		} else {
			delete(fc.portals, string(name))
		}
		fc.send(&pgproto3.CloseComplete{})
	case 'H':
		if len(body) != 0 {
			fc.malformed(true, typ)
			return
		}
		fc.flush()
	case 'S':
		if len(body) != 0 {
			fc.malformed(false, typ)
		}
		if fc.tx == 'I' {
			// The implicit transaction ends: so do its portals.
			clear(fc.portals)
		}
		fc.ready()
	case 'd', 'c', 'f':
		// Outside COPY Postgres ignores these.
	}
}

func (fc *fakeConn) parse(body []byte) {
	name, rest, ok1 := fakeCut(body)
	query, rest, ok2 := fakeCut(rest)
	if !ok1 || !ok2 || len(rest) < 2 {
		fc.malformed(true, 'P')
		return
	}
	n := int(binary.BigEndian.Uint16(rest))
	if len(rest) != 2+4*n {
		fc.malformed(true, 'P')
		return
	}
	types := make([]uint32, n)
	for i := range types {
		types[i] = binary.BigEndian.Uint32(rest[2+4*i:])
	}
	kind := fakeKind(query)
	if fc.tx == 'E' && kind != "commit" && kind != "rollback" {
		fc.fail(true, "25P02", "current transaction is aborted, commands ignored until end of transaction block")
		return
	}
	if len(name) > 0 && fc.stmts[string(name)] != nil {
		fc.fail(true, "42P05", fmt.Sprintf("prepared statement %q already exists", name))
		return
	}
	if bytes.Contains(query, []byte("fail_parse")) {
		fc.fail(true, "42601", "syntax error at or near \"fail_parse\"")
		return
	}
	fc.f.mu.Lock()
	epoch := fc.f.migrations
	fc.f.mu.Unlock()
	fc.stmts[string(name)] = &fakeStmt{query: query, types: types, epoch: epoch}
	fc.send(&pgproto3.ParseComplete{})
}

func (fc *fakeConn) bind(body []byte) {
	portal, rest, ok1 := fakeCut(body)
	stmtName, params, ok2 := fakeCut(rest)
	if !ok1 || !ok2 || !fakeBindParamsValid(params) {
		fc.malformed(true, 'B')
		return
	}
	st := fc.stmts[string(stmtName)]
	if st == nil {
		if len(stmtName) == 0 {
			fc.fail(true, "26000", "unnamed prepared statement does not exist")
		} else {
			fc.fail(true, "26000", fmt.Sprintf("prepared statement %q does not exist", stmtName))
		}
		return
	}
	if kind := fakeKind(st.query); fc.tx == 'E' && kind != "commit" && kind != "rollback" {
		fc.fail(true, "25P02", "current transaction is aborted, commands ignored until end of transaction block")
		return
	}
	if fc.stalePlan(st) {
		return
	}
	if len(portal) > 0 && fc.portals[string(portal)] != nil {
		fc.fail(true, "42P03", fmt.Sprintf("portal %q already exists", portal))
		return
	}
	fc.portals[string(portal)] = &fakePortal{stmt: st, params: params}
	fc.send(&pgproto3.BindComplete{})
}

// fakeBindParamsValid checks the part of a Bind after the two names:
// formats, parameters, result formats, and nothing after them.
func fakeBindParamsValid(b []byte) bool {
	take16 := func() (int, bool) {
		if len(b) < 2 {
			return 0, false
		}
		v := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		return v, true
	}
	nf, ok := take16()
	if !ok || len(b) < 2*nf {
		return false
	}
	b = b[2*nf:]
	np, ok := take16()
	if !ok || (nf > 1 && nf != np) {
		return false
	}
	for range np {
		if len(b) < 4 {
			return false
		}
		l := int32(binary.BigEndian.Uint32(b))
		b = b[4:]
		if l < -1 || int(l) > len(b) {
			return false
		}
		if l > 0 {
			b = b[l:]
		}
	}
	nr, ok := take16()
	if !ok || len(b) != 2*nr {
		return false
	}
	return true
}

func (fc *fakeConn) describe(body []byte) {
	if len(body) < 2 || (body[0] != 'S' && body[0] != 'P') {
		fc.malformed(true, 'D')
		return
	}
	name, rest, ok := fakeCut(body[1:])
	if !ok || len(rest) != 0 {
		fc.malformed(true, 'D')
		return
	}
	var st *fakeStmt
	if body[0] == 'S' {
		st = fc.stmts[string(name)]
		if st == nil {
			fc.fail(true, "26000", fmt.Sprintf("prepared statement %q does not exist", name))
			return
		}
		if fc.stalePlan(st) {
			return
		}
	} else {
		p := fc.portals[string(name)]
		if p == nil {
			fc.fail(true, "34000", fmt.Sprintf("portal %q does not exist", name))
			return
		}
		st = p.stmt
	}
	rows := fakeKind(st.query) == "select"
	if fc.tx == 'E' && rows {
		fc.fail(true, "25P02", "current transaction is aborted, commands ignored until end of transaction block")
		return
	}
	if body[0] == 'S' {
		fc.send(&pgproto3.ParameterDescription{ParameterOIDs: st.types})
	}
	if rows {
		fc.send(fakeRowDescription)
	} else {
		fc.send(&pgproto3.NoData{})
	}
}

// fakeCut splits a NUL-terminated string off b.
func fakeCut(b []byte) (s, rest []byte, ok bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+1:], true
}

// fakeCString is a Query body's text: exactly one NUL, at the end.
func fakeCString(b []byte) ([]byte, bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 || i != len(b)-1 {
		return nil, false
	}
	return b[:i], true
}
