package shard

import "encoding/binary"

// The scanner: which sharded tables a statement names and, for the shapes
// of the fast path, the values of their key. It never parses SQL: it
// recognises a few shapes exactly and calls everything else refused (when
// the statement names a sharded table) or unsharded (when it names none).
// A statement it routes is one whose every row read or written has the key
// it found, so the shard that owns the key holds all of them:
//
//   - SELECT … FROM t [alias] [JOIN u ON t.k = u.k …] WHERE … k = v [AND …]
//   - UPDATE t [alias] SET … WHERE … k = v [AND …]   (no FROM; k not set)
//   - DELETE FROM t [alias] WHERE … k = v [AND …]    (no USING)
//   - INSERT INTO t [AS alias] (…, k, …) VALUES (…, v, …)[, (…)]
//     [ON CONFLICT …] [RETURNING …]
//
// k = v is a conjunct at the top level of WHERE (no OR beside it), exactly
// a column reference, '=', and a value: an integer, a string, $n or NULL,
// with at most a cast to the key's own type; k IN (v, …) gives several
// values. Any other conjunct only narrows the rows further, so it is
// passed over. A subquery, a CTE, a set operation, a join with a table of
// another colocation or an unsharded one, or a join not on the key makes
// the statement refused: its rows could lie on other shards.

// Tables is what the scanner asks of the shard map.
type Tables interface {
	// Lookup reports the colocation of a table and its key column, as
	// Postgres names them (folded to lower case unless quoted). schema is
	// empty when the statement does not qualify the name.
	Lookup(schema, name []byte) (colo int, key string, typ KeyType, ok bool)
}

// Outcome is what the scanner found in a statement.
type Outcome uint8

const (
	// Unsharded: the text names no sharded table (or is not SQL Postgres
	// would take: Postgres's own error is the answer then).
	Unsharded Outcome = iota
	// Keyed: every statement naming a sharded table gave its key values.
	Keyed
	// Refused: a statement names a sharded table in a shape whose shard
	// the scanner cannot decide exactly.
	Refused
)

func (o Outcome) String() string {
	switch o {
	case Unsharded:
		return "unsharded"
	case Keyed:
		return "keyed"
	}
	return "refused"
}

// Reason says why a statement was refused; its text goes in the DETAIL.
type Reason uint8

const (
	ReasonNone          Reason = iota
	ReasonNoKey                // no key conjunct at the top level of WHERE
	ReasonOr                   // OR at the top level of WHERE
	ReasonSubquery             // a subquery, a CTE or a set operation
	ReasonJoin                 // a join not on the key, or with a table of another colocation
	ReasonShape                // a statement shape the scanner does not route (COPY, WITH, …)
	ReasonKeyAssigned          // UPDATE … SET k = …, ON CONFLICT … SET k
	ReasonKeyExpression        // INSERT with the key as an expression or DEFAULT, or left out
	ReasonTooLong              // longer than the scanner reads
	ReasonUnicodeIdent         // a U&"…" identifier the scanner does not decode
	ReasonNoColumnList         // INSERT without a column list (or DEFAULT VALUES)
)

var reasonText = [...]string{
	ReasonNone:          "",
	ReasonNoKey:         "no condition on the key at the top level of WHERE",
	ReasonOr:            "OR at the top level of WHERE",
	ReasonSubquery:      "a subquery, WITH or a set operation",
	ReasonJoin:          "a join not on the key, or with a table of another colocation or an unsharded one",
	ReasonShape:         "a statement the router does not route by its text",
	ReasonKeyAssigned:   "the statement assigns the key",
	ReasonKeyExpression: "the key is not a constant or parameter in every row, or is not among the columns",
	ReasonTooLong:       "the statement is longer than the router reads",
	ReasonUnicodeIdent:  "a U&\"…\" identifier",
	ReasonNoColumnList:  "an INSERT without a column list: the router does not know the table's column order (name the columns)",
}

func (r Reason) String() string { return reasonText[r] }

// Key is one key value found in a statement.
type Key struct {
	Colo int
	Type KeyType
	// Param is n of $n (a value the Bind gives); 0 for a literal.
	Param int
	// Null: the value is NULL, which Postgres places as hash 0.
	Null bool
	// Number: the literal was written as an integer, not a string.
	Number bool
	// Value is a literal's text, decoded (quotes and escapes undone). It
	// lies in the Scanner's memory: valid until its next Scan.
	Value []byte
}

// Result is what Scan found in one Query or Parse text.
type Result struct {
	Outcome Outcome
	Reason  Reason
	// Table is the sharded table a refusal is about, and KeyColumn its
	// key, for the DETAIL; valid until the next Scan.
	Table     []byte
	KeyColumn string
	// Keys: the key values, in order. All must land on one shard for the
	// text to run on one; for a Parse, the $n among them are decoded at
	// Bind. Valid until the next Scan.
	Keys []Key
}

// DefaultScanLimit is how much of a statement the scanner reads: the
// pooler's read buffer, beyond which a statement is routed by a hint.
const DefaultScanLimit = 16 << 10

// maxRefs bounds the tables of one FROM the scanner follows; a join of
// more is refused.
const maxRefs = 16

// Scanner scans statements. It is not safe for concurrent use; a link
// keeps one and reuses its memory, so a scan allocates nothing once warm.
type Scanner struct {
	Tables Tables
	// Limit is the longest text scanned; 0 means DefaultScanLimit.
	Limit int
	// EscapeStrings: the session's standard_conforming_strings is off,
	// so '…' takes backslash escapes.
	EscapeStrings bool

	lx lexer
	// cluster is Tables when it is a *Cluster (the router's case): its
	// name filter spares the lookup of most identifiers, and its Lookup
	// is called directly rather than through the interface.
	cluster *Cluster
	// identFilter is the cluster's name filter joined with the keywords'
	// lengths and initials (all ones without a cluster), for filterOf:
	// most identifiers are neither, and one bit test tells.
	identFilter nameFilter
	filterOf    *Cluster
	filterOK    bool
	// trailing is the body of the comment that ends the text (a ';'
	// after it aside), where a sqlcommenter hint lives; nil when none.
	trailing []byte
	toks     []token
	// cands are the tokens mentions looks at (in order): identifiers that
	// may name a table (the cluster's filter passes them) and the words
	// that make a subquery or set operation; candAt is the first not yet
	// passed. semis are the ';' between statements.
	cands  []int32
	candAt int
	semis  []int32
	// clauses are the tokens at depth 0 that may end a clause (FROM,
	// WHERE, RETURNING…: clauseWords), for clauseEnd.
	clauses []int32
	scratch []byte
	keys    []Key
	// lastKeyAt and lastKeyEnd: the token of the last literal added to
	// keys (a number's digits without its sign, a string with its
	// quotes), which Router's memo compares around (memo.go).
	lastKeyAt, lastKeyEnd int32
	refs                  [maxRefs]tableRef
	nrefs                 int
	// first is the lookup of the first sharded table mentions found,
	// which is most often the FROM's or the target's first table: tableRef
	// takes it rather than looking the name up again.
	first firstLookup
	res   Result
}

// firstLookup is a lookup kept by the index of the name's token (-1: none).
type firstLookup struct {
	tok  int
	colo int
	key  string
	typ  KeyType
}

// tableRef is one sharded table in a FROM (or the target of INSERT,
// UPDATE, DELETE), with the key values bound to it and the group of
// tables joined to it on the key (a union-find by index).
type tableRef struct {
	name, alias []byte
	colo        int
	key         string
	typ         KeyType
	parent      int
	bound       bool
}

// Scan reads a Query or Parse text: one statement or several.
func (s *Scanner) Scan(sql []byte) Result {
	s.res = Result{}
	s.trailing = nil
	s.keys = s.keys[:0]
	s.scratch = s.scratch[:0]
	limit := s.Limit
	if limit == 0 {
		limit = DefaultScanLimit
	}
	if len(sql) > min(limit, maxLexLen) {
		s.res.Outcome, s.res.Reason = Refused, ReasonTooLong
		return s.res
	}
	s.cluster, _ = s.Tables.(*Cluster)
	if bad, ok := s.tokenize(sql); !ok {
		if bad.end-bad.start > 2 && (sql[bad.start] == 'U' || sql[bad.start] == 'u') && sql[bad.start+1] == '&' && sql[bad.start+2] == '"' {
			s.res.Outcome, s.res.Reason = Refused, ReasonUnicodeIdent
			return s.res
		}
		// Postgres rejects the text itself (an unclosed quote or
		// comment, a stray character): its error is the answer.
		s.res.Outcome = Unsharded
		return s.res
	}
	s.findTrailing()
	semis := s.semis
	start := 0
	for k := 0; k <= len(semis); k++ {
		end := len(s.toks)
		if k < len(semis) {
			end = int(semis[k])
		}
		if end > start {
			s.statement(start, end)
			if s.res.Outcome == Refused {
				return s.res
			}
		}
		start = end + 1
	}
	s.res.Keys = s.keys
	return s.res
}

// tokenize lexes the whole text into s.toks, with each token's depth,
// and notes the candidates of mentions and the ';' between statements.
// It reports false, with the token, when the lexer meets one it cannot
// place.
//
// It is the scanner's innermost loop (issue 34: a 512-byte statement in
// 1 µs is about 120 tokens in 3,000 cycles, analysis included), so the
// common tokens (blanks, identifiers and punctuation) are read here,
// without a call, and every other token by lexer.lex.
func (s *Scanner) tokenize(sql []byte) (bad token, ok bool) {
	s.lx = lexer{src: sql, escapeStrings: s.EscapeStrings}
	var names *nameFilter
	if s.cluster != nil {
		names = &s.cluster.names
	}
	if !s.filterOK || s.filterOf != s.cluster {
		s.filterOf, s.filterOK = s.cluster, true
		for n := range s.identFilter {
			s.identFilter[n] = ^uint32(0)
			if names != nil {
				s.identFilter[n] = names[n]
				if n <= kwMaxLen {
					s.identFilter[n] |= kwInitials[n]
				}
			}
		}
	}
	filter := &s.identFilter
	// Only toks lives in registers: the lists below take a few tokens
	// each, and kept in locals too their nine words crowded the loop's
	// hot values out of the registers (measured: a quarter of the
	// loop's time went to spills and reloads).
	toks := s.toks[:0]
	s.cands, s.semis, s.clauses, s.candAt = s.cands[:0], s.semis[:0], s.clauses[:0], 0
	d := int32(0)
	p := 0
	for {
		for p < len(sql) && charClass[sql[p]]&clSpace != 0 {
			p++
		}
		if p >= len(sql) {
			s.toks = toks
			return token{}, true
		}
		// The token is made in place, in the slice, and field by field:
		// a token built elsewhere and copied whole is stored a byte at a
		// time and loaded 16 bytes at once, which the processor cannot
		// forward, and that stall cost more than lexing the token.
		if len(toks) == cap(toks) {
			toks = append(toks, token{})[:len(toks)]
		}
		n := len(toks)
		toks = toks[:n+1]
		t := &toks[n]
		c := sql[p]
		switch startClass[c] {
		case startPrefix:
			if p+1 < len(sql) && (sql[p+1] == '\'' || sql[p+1] == '&') {
				break // a string, U&"…", or an identifier: lexer.lex tells
			}
			fallthrough
		case startIdent:
			q := p + 1
			for q < len(sql) && charClass[sql[q]]&clIdentCont != 0 {
				q++
			}
			kw := kwNone
			if filter[min(q-p, 63)]&(1<<(c&31)) != 0 {
				// A keyword or a table, maybe; but no part of a
				// qualified name is a keyword (qualifies): neither
				// one a '.' and a name follow, nor the name after one.
				if qualifies(sql, q) || n >= 2 && sql[p-1] == '.' && s.afterQualifier(toks, n, p) {
					// kwNone
				} else if m := q - p; m <= 8 && p+8 <= len(sql) {
					// keywordAt's common case without the call, which
					// costs as much again: one word, folded, and its
					// slot's keyword compared whole.
					w := (binary.LittleEndian.Uint64(sql[p:]) | 0x2020202020202020) & byteMask[m]
					if e := &kwEntries[kwSlots[kwHash(w)]]; e.w0 == w && int(e.n) == m {
						kw = e.kw
					}
				} else {
					kw = keywordAt(sql, p, q)
				}
				if mentioned.has(kw) || names == nil || names[min(q-p, 63)]&(1<<(c&31)) != 0 { // mayHoldPart, without its slice
					s.cands = append(s.cands, int32(n))
				}
				if d == 0 && clauseWords.has(kw) {
					s.clauses = append(s.clauses, int32(n))
				}
			}
			t.start, t.end, t.depth = int32(p), int32(q), d
			t.kind, t.kw, t.ch, t.form = tokIdent, kw, 0, 0
			p = q
			continue
		case startPunct:
			t.start, t.end, t.depth = int32(p), int32(p+1), d
			t.kind, t.kw, t.ch, t.form = tokPunct, kwNone, c, 0
			switch c {
			case '(', '[':
				d++
			case ')', ']':
				d--
				t.depth = d
			case ';':
				if d == 0 {
					s.semis = append(s.semis, int32(n))
				}
			}
			p++
			continue
		case startDot, startColon:
			// '.' but not a number's point, ':' but not '::'.
			if p+1 < len(sql) && (c == '.' && isDigit(sql[p+1]) || c == ':' && sql[p+1] == ':') {
				break
			}
			t.start, t.end, t.depth = int32(p), int32(p+1), d
			t.kind, t.kw, t.ch, t.form = tokPunct, kwNone, c, 0
			p++
			continue
		case startDigit:
			// An integer: digits and then no '.', exponent or letter.
			q := p + 1
			for q < len(sql) && isDigit(sql[q]) {
				q++
			}
			if q < len(sql) && (sql[q] == '.' || isIdentCont(sql[q])) {
				break // lexer.number knows the rest
			}
			t.start, t.end, t.depth = int32(p), int32(q), d
			t.kind, t.kw, t.ch, t.form = tokNumber, kwNone, 0, 0
			p = q
			continue
		case startQuote:
			// A plain string ('…' with standard_conforming_strings on),
			// most strings, read here: lexer.lex is a call, and a call
			// from this loop spills every register it holds. One with a
			// doubled quote, or where a comment or another string may
			// follow the blanks after it (a string after a newline
			// continues it), goes to the lexer.
			if s.lx.escapeStrings {
				break
			}
			q := p + 1
			for q < len(sql) && sql[q] != '\'' {
				q++
			}
			if q >= len(sql) {
				break // unclosed: the lexer makes it bad
			}
			e := q + 1
			for e < len(sql) && charClass[sql[e]]&clSpace != 0 {
				e++
			}
			if e < len(sql) && (sql[e] == '\'' || sql[e] == '-' || sql[e] == '/') {
				break
			}
			t.start, t.end, t.depth = int32(p), int32(q+1), d
			t.kind, t.kw, t.ch, t.form = tokString, kwNone, 0, strPlain
			p = e
			continue
		case startOp:
			// An operator of one character (=, <, *, …): what follows is
			// no operator character, so no run, no comment (-- or /*).
			if p+1 >= len(sql) || !isOpChar(sql[p+1]) {
				t.start, t.end, t.depth = int32(p), int32(p+1), d
				t.kind, t.kw, t.ch, t.form = tokOp, kwNone, c, 0
				p++
				continue
			}
			// The comparisons of two (<>, <=, >=, !=) and ||, alone: no
			// comment starts in them and no + or - ends them, so the
			// run is the token, as operator reads it.
			c2 := sql[p+1]
			if (c2 == '=' && (c == '<' || c == '>' || c == '!') || c == '<' && c2 == '>' || c == '|' && c2 == '|') &&
				(p+2 >= len(sql) || !isOpChar(sql[p+2])) {
				t.start, t.end, t.depth = int32(p), int32(p+2), d
				t.kind, t.kw, t.ch, t.form = tokOp, kwNone, 0, 0
				p += 2
				continue
			}
		}
		// Any other token (a comment may come first).
		*t = token{}
		s.lx.pos = p
		s.lx.lex(t)
		p = s.lx.pos
		t.depth = d
		switch t.kind {
		case tokEOF:
			s.toks = toks[:n]
			return token{}, true
		case tokBad:
			s.toks = toks // its memory kept for the next scan
			return *t, false
		case tokIdent:
			if mentioned.has(t.kw) || names == nil || names.mayHoldPart(sql[t.start:t.end]) {
				s.cands = append(s.cands, int32(n))
			}
			if d == 0 && clauseWords.has(t.kw) {
				s.clauses = append(s.clauses, int32(n))
			}
		case tokQIdent:
			s.cands = append(s.cands, int32(n))
		case tokPunct:
			switch t.ch {
			case '(', '[':
				d++
			case ')', ']':
				d--
				t.depth = d
			case ';':
				if d == 0 {
					s.semis = append(s.semis, int32(n))
				}
			}
		}
	}
}

// afterQualifier reports that the identifier at p, token n, is the name
// after a qualifier's '.' (lexer.ident's partAt): the tokens before it
// are that '.' and an unquoted identifier, with nothing between.
func (s *Scanner) afterQualifier(toks []token, n, p int) bool { // n ≥ 2
	return toks[n-1].ch == '.' && toks[n-2].kind == tokIdent && int(toks[n-2].end) == p-1
}

// findTrailing notes the comment that ends the text: the last one the
// lexer skipped, when no token but one ';' comes after it.
func (s *Scanner) findTrailing() {
	lb := s.lx.lastBlock
	if lb[1] == 0 || s.lx.lastNested {
		return
	}
	k := len(s.toks) - 1
	if k >= 0 && s.toks[k].ch == ';' {
		k--
	}
	if k >= 0 && int(s.toks[k].end) > lb[0] {
		return
	}
	if len(s.lx.src)-(lb[0]-2) > hintWindow {
		return // starts before the window, as trailingCommentBody reads it
	}
	s.trailing = s.lx.src[lb[0]:lb[1]]
}

// refuse records a refusal about a table.
func (s *Scanner) refuse(r Reason, table []byte, key string) {
	s.res.Outcome, s.res.Reason = Refused, r
	s.res.Table, s.res.KeyColumn = table, key
	s.res.Keys = nil
}

// Words that make a statement's rows come from elsewhere: a set
// operation at the top level, a subquery, CTE or VALUES list inside
// parentheses.
var (
	setOps     = kwMask(kwUnion, kwIntersect, kwExcept)
	subqueries = kwMask(kwSelect, kwWith, kwValues)
	mentioned  = setOps | subqueries
)

// statement scans the tokens [a, b) of one statement.
func (s *Scanner) statement(a, b int) {
	first, table, key, sub := s.mentions(a, b)
	if first < 0 {
		return // names no sharded table
	}
	if sub {
		s.refuse(ReasonSubquery, table, key)
		return
	}
	s.nrefs = 0
	t := s.toks[a]
	switch {
	case t.kw == kwSelect:
		s.selectStmt(a, b, table, key)
	case t.kw == kwUpdate:
		s.updateStmt(a, b, table, key)
	case t.kw == kwDelete:
		s.deleteStmt(a, b, table, key)
	case t.kw == kwInsert:
		s.insertStmt(a, b, table, key)
	default:
		s.refuse(ReasonShape, table, key)
	}
}

// mentions finds the first sharded table a statement names anywhere: any
// identifier. A column, alias or function that shares a sharded table's
// name counts too; that errs on the side of refusing. In the same pass it
// reports (sub) whether the statement holds a set operation or a
// subquery, which refuses it when it names a sharded table. It looks at
// the candidates the lexing loop noted, not at every token.
func (s *Scanner) mentions(a, b int) (first int, table []byte, key string, sub bool) {
	first = -1
	s.first.tok = -1
	c := s.candAt
	for c < len(s.cands) && int(s.cands[c]) < a {
		c++
	}
	for ; c < len(s.cands) && int(s.cands[c]) < b; c++ {
		i := int(s.cands[c])
		t := &s.toks[i]
		if t.depth == 0 && setOps.has(t.kw) || t.depth > 0 && subqueries.has(t.kw) {
			sub = true
			if first >= 0 {
				break
			}
		}
		if first >= 0 {
			continue
		}
		if t.kind == tokIdent && s.cluster != nil && !s.cluster.names.mayHoldPart(s.lx.src[t.start:t.end]) {
			continue // no table has a name of its length and initial
		}
		var schema []byte
		if i-2 >= a && s.toks[i-1].ch == '.' && (s.toks[i-2].kind == tokIdent || s.toks[i-2].kind == tokQIdent) {
			schema = s.name(s.toks[i-2])
		}
		name := s.name(*t)
		if colo, k, typ, ok := s.lookup(schema, name); ok {
			first, table, key = i, name, k
			s.first = firstLookup{tok: i, colo: colo, key: k, typ: typ}
			if sub {
				break
			}
		}
	}
	s.candAt = c
	return first, table, key, sub
}

// lookup is Tables.Lookup, directly for a *Cluster.
func (s *Scanner) lookup(schema, name []byte) (colo int, key string, typ KeyType, ok bool) {
	if s.cluster != nil {
		return s.cluster.Lookup(schema, name)
	}
	return s.Tables.Lookup(schema, name)
}

// name is an identifier as Postgres names it: ASCII letters folded to
// lower case unless quoted, "" undone inside quotes. It lies in scratch
// when it had to change, in the statement otherwise.
func (s *Scanner) name(t token) []byte {
	src := s.lx.src
	if t.kind == tokQIdent {
		body := t.body(src)
		if !containsByte(body, '"') {
			return body
		}
		at := len(s.scratch)
		for i := 0; i < len(body); i++ {
			s.scratch = append(s.scratch, body[i])
			if body[i] == '"' {
				i++
			}
		}
		return s.scratch[at:]
	}
	w := src[t.start:t.end]
	upper := false
	for _, c := range w {
		if c >= 'A' && c <= 'Z' {
			upper = true
			break
		}
	}
	if !upper {
		return w
	}
	at := len(s.scratch)
	for _, c := range w {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		s.scratch = append(s.scratch, c)
	}
	return s.scratch[at:]
}

// nameIs reports that an identifier names name: string(s.name(t)) ==
// name, but for an unquoted one compared in place, folding as it goes,
// and most often told apart by its length alone.
func (s *Scanner) nameIs(t *token, name string) bool { return nameEq(s, t, name) }

// nameEq is nameIs for a name held as a string (a key column, a word) or
// as bytes (an alias or table name the scan took from the statement).
func nameEq[S string | []byte](s *Scanner, t *token, name S) bool {
	if t.kind == tokQIdent {
		return string(s.name(*t)) == string(name)
	}
	w := s.lx.src[t.start:t.end]
	if len(w) != len(name) {
		return false
	}
	for i, c := range w {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}
