package pooler

// FuzzSession's inputs: how fuzz bytes decode into a session plan (login,
// then frames: valid messages, oversized and refused ones, COPY, an end),
// and the seed builders (sd…) that write plans by hand.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

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

// decodePlan turns a fuzz input into a session: three bytes choose the
// login and how the session is written and ended, the rest are frames,
// until the input runs out or a frame ends the session.
func decodePlan(data []byte) *sessionPlan {
	in := &fuzzInput{b: data}
	p := &sessionPlan{}
	p.decodeLogin(in)
	total := 0
	for len(in.b) > 0 && len(p.frames) < 300 && total < 2<<20 {
		fr, last := p.decodeFrame(in)
		if last {
			if fr != nil {
				p.frames = append(p.frames, fr)
			}
			return p
		}
		total += len(fr)
		p.frames = append(p.frames, fr)
	}
	return p
}

// decodeLogin reads the input's first three bytes: the database, user and
// startup parameters (b0, b1), then the write mode, split and ending (b2).
func (p *sessionPlan) decodeLogin(in *fuzzInput) {
	b0, b1, b2 := in.byte(), in.byte(), in.byte()
	p.db = fuzzDBs[b0&7]
	p.user = fuzzUsers[b1&3]
	p.minor = 0
	if b0&0x20 != 0 {
		p.minor = 2
	}
	p.parkFirst = b0&0x80 != 0 && b1&0x80 != 0
	validOpts := p.decodeParams(b0, b1)
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
}

// decodeParams builds the startup parameters from the login bytes and
// says whether its options are ones the pooler accepts.
func (p *sessionPlan) decodeParams(b0, b1 byte) (validOpts bool) {
	p.params = [][2]string{{"user", p.user}}
	if p.db != "" {
		p.params = append(p.params, [2]string{"database", p.db})
	}
	validOpts = true
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
	return validOpts
}

// decodeFrame reads one frame (or, for a few ops, a run of messages sent
// as one). last reports a frame that ends the session: a refused length or
// a Terminate, which set p.ending; fr is then nil when the session ends
// mid-message with nothing more to add.
func (p *sessionPlan) decodeFrame(in *fuzzInput) (fr []byte, last bool) {
	op := in.byte()
	switch op % 26 {
	case 0, 1:
		return encode(&pgproto3.Query{String: fuzzText(in)}), false
	case 2, 3:
		return fuzzParse(in), false
	case 4, 5:
		return fuzzBind(in), false
	case 6:
		return encode(&pgproto3.Describe{ObjectType: 'S', Name: in.pick(fuzzNames)}), false
	case 7:
		return encode(&pgproto3.Describe{ObjectType: 'P', Name: in.pick(fuzzPortals)}), false
	case 8:
		return encode(&pgproto3.Execute{Portal: in.pick(fuzzPortals), MaxRows: uint32(in.byte() % 2)}), false
	case 9:
		return fuzzClose(in), false
	case 10, 11:
		return encode(&pgproto3.Sync{}), false
	case 12:
		return encode(&pgproto3.Flush{}), false
	case 13, 14:
		return bigFrame(in), false
	case 15:
		// A frame of any type with a consistent length.
		typ := in.byte()
		return rawFrame(typ, in.bytes(int(in.byte()))), false
	case 16:
		return p.refusedFrame(in), true
	case 17:
		return encode(&pgproto3.FunctionCall{Function: 1, Arguments: [][]byte{in.bytes(4)}}), false
	case 18:
		return encode(&pgproto3.CopyData{Data: in.bytes(int(in.byte()))}), false
	case 19:
		return encode(&pgproto3.CopyDone{}), false
	case 20:
		return encode(&pgproto3.CopyFail{Message: "fuzz"}), false
	case 21:
		return p.terminateFrame(in), true
	case 22, 23:
		return fuzzCycle(in), false
	default:
		return fuzzNamedExecute(in), false
	}
}

// fuzzParse is a Parse with up to two parameter types.
func fuzzParse(in *fuzzInput) []byte {
	n := int(in.byte() % 3)
	oids := make([]uint32, n)
	for i := range oids {
		oids[i] = uint32(in.byte())
	}
	return encode(&pgproto3.Parse{Name: in.pick(fuzzNames), Query: fuzzText(in), ParameterOIDs: oids})
}

// fuzzBind is a Bind with up to three parameters, some NULL, in text or
// (all) binary format.
func fuzzBind(in *fuzzInput) []byte {
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
	return encode(&pgproto3.Bind{DestinationPortal: in.pick(fuzzPortals), PreparedStatement: in.pick(fuzzNames),
		ParameterFormatCodes: formats, Parameters: params})
}

// fuzzClose closes a statement or a portal.
func fuzzClose(in *fuzzInput) []byte {
	c := in.byte()
	if c&1 == 0 {
		return encode(&pgproto3.Close{ObjectType: 'S', Name: fuzzNames[int(c>>1)%len(fuzzNames)]})
	}
	return encode(&pgproto3.Close{ObjectType: 'P', Name: fuzzPortals[int(c>>1)%len(fuzzPortals)]})
}

// refusedFrame is a Query with a length the pooler refuses: below 4, or
// over max_packet_size. The session ends with it.
func (p *sessionPlan) refusedFrame(in *fuzzInput) []byte {
	var fr []byte
	if in.byte()&1 == 0 {
		fr = []byte{'Q', 0, 0, 0, 3}
	} else {
		fr = []byte{'Q', 0x7f, 0xff, 0xff, 0xff}
	}
	p.ending = endRefused
	p.mayClose = true
	return fr
}

// terminateFrame ends the session: mostly with a Terminate, sometimes by
// closing in the middle of a Query (nil: relay adds the partial Query).
func (p *sessionPlan) terminateFrame(in *fuzzInput) []byte {
	if in.byte()&3 == 0 {
		p.ending = endMidMessage
		return nil
	}
	p.ending = endTerminate
	p.mayClose = true
	return encode(&pgproto3.Terminate{})
}

// fuzzCycle is a whole extended-protocol cycle: Parse, Bind, Describe,
// Execute, Sync.
func fuzzCycle(in *fuzzInput) []byte {
	name := in.pick(fuzzNames)
	text := fuzzText(in)
	fr := encode(&pgproto3.Parse{Name: name, Query: text})
	fr = append(fr, encode(&pgproto3.Bind{PreparedStatement: name, Parameters: [][]byte{in.bytes(3)}})...)
	fr = append(fr, encode(&pgproto3.Describe{ObjectType: 'P'})...)
	fr = append(fr, encode(&pgproto3.Execute{})...)
	return append(fr, encode(&pgproto3.Sync{})...)
}

// fuzzNamedExecute is Bind and Execute of a named statement, then Sync.
func fuzzNamedExecute(in *fuzzInput) []byte {
	name := in.pick(fuzzNames)
	fr := encode(&pgproto3.Bind{PreparedStatement: name, Parameters: [][]byte{in.bytes(2), nil}})
	fr = append(fr, encode(&pgproto3.Execute{})...)
	return append(fr, encode(&pgproto3.Sync{})...)
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

// stream is what the session writes: the plan's frames and, when the plan
// ends with the tail (and its frames are well framed), CopyDone, Sync,
// ROLLBACK and the marker query. frames are its messages; tail says
// whether the tail was added.
func (plan *sessionPlan) stream() (stream []byte, frames [][]byte, tail bool) {
	for _, fr := range plan.frames {
		stream = append(stream, fr...)
	}
	frames, wellFramed := splitFrames(stream)
	tail = plan.ending == endTail && wellFramed
	if tail {
		stream = append(stream, encode(&pgproto3.CopyDone{})...)
		stream = append(stream, encode(&pgproto3.Sync{})...)
		stream = append(stream, encode(&pgproto3.Query{String: "ROLLBACK"})...)
		stream = append(stream, encode(&pgproto3.Query{String: fuzzMarker})...)
		frames, _ = splitFrames(stream)
	}
	return stream, frames, tail
}

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

func sdDescribeS(name int) []byte { return []byte{6, byte(name)} }

func sdDescribeP(portal int) []byte { return []byte{7, byte(portal)} }

func sdExecute(portal int) []byte { return []byte{8, byte(portal), 0} }

func sdCloseS(name int) []byte { return []byte{9, byte(2 * name)} }

func sdCloseP(portal int) []byte { return []byte{9, byte(2*portal + 1)} }

func sdSync() []byte { return []byte{10} }

func sdFlush() []byte { return []byte{12} }

// sdBig: kind 0 Query, 2 Parse, 4 Bind, 5 CopyData, 6 Close, 7 Describe;
// the message is fuzzSizes[size]+delta bytes long.
func sdBig(kind, size int, delta int8, seed byte) []byte {
	return []byte{13, byte(size<<3 | kind), byte(delta), seed}
}

func sdRaw(typ byte, body ...byte) []byte {
	return append([]byte{15, typ, byte(len(body))}, body...)
}

func sdFunctionCall() []byte { return []byte{17, 1, 2, 3, 4} }

func sdCopyData(data string) []byte { return append([]byte{18, byte(len(data))}, data...) }

func sdCopyDone() []byte { return []byte{19} }

func sdCopyFail() []byte { return []byte{20} }

func sdTerminate() []byte { return []byte{21, 1} }

func sdCloseMidMessage() []byte { return []byte{21, 0} }

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
// It is long because it is a list, one seed a line, each with the comment
// that says which path it starts; cutting it would only scatter them.
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
		// A Parse of a name the client holds (an error from the pooler).
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
		// (linkstate.State): each of these once left the link waiting for a
		// ReadyForQuery that never came, or matched replies to the wrong
		// ops.
		seedOf(seedTx, 0, 0, sdParse(1, sQ(5)), sdQuery(sQ(0)), sdSync()),
		seedOf(seedTx, 0, 0, sdParse(1, sQ(5)), sdFunctionCall(), sdSync()),
		seedOf(seedTx, 0, 0, sdQuery(sQ(11)), sdSync()),
		seedOf(seedTx, 0, 0, sdQuery(sQ(11)), sdQuery(sQ(0))),
		seedOf(seedTx, 0, 0, sdCycle(1, sQ(0)), sdQuery(sQ(11)), sdParse(2, sQ(0)), sdSync()),
	}
}
