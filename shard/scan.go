package shard

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
	// trailing is the body of the comment that ends the text (a ';'
	// after it aside), where a sqlcommenter hint lives; nil when none.
	trailing []byte
	toks     []token
	depth    []int32
	scratch  []byte
	keys     []Key
	refs     [maxRefs]tableRef
	nrefs    int
	res      Result
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
	if len(sql) > limit {
		s.res.Outcome, s.res.Reason = Refused, ReasonTooLong
		return s.res
	}
	s.lx = lexer{src: sql, escapeStrings: s.EscapeStrings}
	s.toks = s.toks[:0]
	s.depth = s.depth[:0]
	d := int32(0)
	for {
		t := s.lx.next()
		if t.kind == tokEOF {
			break
		}
		if t.kind == tokBad {
			if t.end-t.start > 2 && (sql[t.start] == 'U' || sql[t.start] == 'u') && sql[t.start+1] == '&' && sql[t.start+2] == '"' {
				s.res.Outcome, s.res.Reason = Refused, ReasonUnicodeIdent
				return s.res
			}
			// Postgres rejects the text itself (an unclosed quote or
			// comment, a stray character): its error is the answer.
			s.res.Outcome = Unsharded
			return s.res
		}
		if t.kind == tokPunct && (sql[t.start] == ')' || sql[t.start] == ']') {
			d--
		}
		s.toks = append(s.toks, t)
		s.depth = append(s.depth, d)
		if t.kind == tokPunct && (sql[t.start] == '(' || sql[t.start] == '[') {
			d++
		}
	}
	s.findTrailing()
	start := 0
	for i := 0; i <= len(s.toks); i++ {
		if i < len(s.toks) && !(s.depth[i] == 0 && s.lx.punct(s.toks[i], ";")) {
			continue
		}
		if i > start {
			s.statement(start, i)
			if s.res.Outcome == Refused {
				return s.res
			}
		}
		start = i + 1
	}
	s.res.Keys = s.keys
	return s.res
}

// findTrailing notes the comment that ends the text: the last one the
// lexer skipped, when no token but one ';' comes after it.
func (s *Scanner) findTrailing() {
	lb := s.lx.lastBlock
	if lb[1] == 0 || s.lx.lastNested {
		return
	}
	k := len(s.toks) - 1
	if k >= 0 && s.lx.punct(s.toks[k], ";") {
		k--
	}
	if k >= 0 && s.toks[k].end > lb[0] {
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

// statement scans the tokens [a, b) of one statement.
func (s *Scanner) statement(a, b int) {
	first, table, key := s.mentions(a, b)
	if first < 0 {
		return // names no sharded table
	}
	for i := a; i < b; i++ {
		t := s.toks[i]
		if s.depth[i] == 0 && (t.kw == kwUnion || t.kw == kwIntersect || t.kw == kwExcept) ||
			s.depth[i] > 0 && (t.kw == kwSelect || t.kw == kwWith || t.kw == kwValues) {
			s.refuse(ReasonSubquery, table, key)
			return
		}
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
// name counts too; that errs on the side of refusing.
func (s *Scanner) mentions(a, b int) (first int, table []byte, key string) {
	for i := a; i < b; i++ {
		t := s.toks[i]
		if t.kind != tokIdent && t.kind != tokQIdent {
			continue
		}
		var schema []byte
		if i-2 >= a && s.lx.punct(s.toks[i-1], ".") && (s.toks[i-2].kind == tokIdent || s.toks[i-2].kind == tokQIdent) {
			schema = s.name(s.toks[i-2])
		}
		name := s.name(t)
		if _, k, _, ok := s.Tables.Lookup(schema, name); ok {
			return i, name, k
		}
	}
	return -1, nil, ""
}

// name is an identifier as Postgres names it: ASCII letters folded to
// lower case unless quoted, "" undone inside quotes. It lies in scratch
// when it had to change, in the statement otherwise.
func (s *Scanner) name(t token) []byte {
	src := s.lx.src
	if t.kind == tokQIdent {
		body := src[t.bodyStart:t.bodyEnd]
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

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}
