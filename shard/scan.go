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

// KeyType is how a colocation's key is written and hashed.
type KeyType uint8

const (
	KeyBigint KeyType = iota // bigint, int, smallint: they hash alike
	KeyText                  // text, varchar
	KeyUUID
)

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
)

var reasonText = [...]string{
	ReasonNone:          "",
	ReasonNoKey:         "no condition on the key at the top level of WHERE",
	ReasonOr:            "OR at the top level of WHERE",
	ReasonSubquery:      "a subquery, WITH or a set operation",
	ReasonJoin:          "a join not on the key, or with a table of another colocation or an unsharded one",
	ReasonShape:         "a statement the router does not route by its text",
	ReasonKeyAssigned:   "the statement assigns the key",
	ReasonKeyExpression: "the key is not a constant or parameter in every row",
	ReasonTooLong:       "the statement is longer than the router reads",
	ReasonUnicodeIdent:  "a U&\"…\" identifier",
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

	lx      lexer
	toks    []token
	depth   []int32
	scratch []byte
	keys    []Key
	refs    [maxRefs]tableRef
	nrefs   int
	res     Result
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

// reserved are the words that end a table reference where an alias could
// stand, and that the scanner's clauses start with.
func (s *Scanner) reserved(t token) bool {
	switch t.kw {
	case kwOn, kwAs, kwSet, kwFor, kwJoin, kwLeft, kwFull, kwFrom, kwWhere, kwInner, kwRight, kwCross,
		kwGroup, kwOrder, kwLimit, kwUsing, kwUnion, kwFetch, kwOuter, kwHaving, kwWindow, kwOffset,
		kwExcept, kwValues, kwNatural, kwLateral, kwReturning, kwIntersect, kwTablesample, kwOverriding:
		return true
	}
	return false
}

// tableRef reads a table reference at i: [ONLY] [schema.]name [*]
// [[AS] alias]. It returns the index after it, or -1 when what stands
// there is not a plain table (a subquery, a function, a column list on
// the alias…). A table that is not sharded gets colo -1. For INSERT's
// target (insert), a '(' after the name opens the column list and an
// alias needs AS.
func (s *Scanner) tableRef(i, b int, insert bool) (next int, ref tableRef) {
	lx := &s.lx
	if i < b && s.toks[i].kw == kwOnly {
		i++
	}
	if i >= b || s.toks[i].kind != tokIdent && s.toks[i].kind != tokQIdent || s.reserved(s.toks[i]) {
		return -1, ref
	}
	var schema []byte
	name := s.name(s.toks[i])
	i++
	if i+1 < b && lx.punct(s.toks[i], ".") {
		if s.toks[i+1].kind != tokIdent && s.toks[i+1].kind != tokQIdent {
			return -1, ref
		}
		schema, name = name, s.name(s.toks[i+1])
		i += 2
	}
	if !insert && i < b && lx.punct(s.toks[i], "(") {
		return -1, ref // a function in FROM
	}
	if i < b && lx.punct(s.toks[i], "*") {
		i++
	}
	ref.name, ref.colo = name, -1
	if colo, key, typ, ok := s.Tables.Lookup(schema, name); ok {
		ref.colo, ref.key, ref.typ = colo, key, typ
	}
	as := i < b && s.toks[i].kw == kwAs
	if as {
		i++
		if i >= b || s.toks[i].kind != tokIdent && s.toks[i].kind != tokQIdent {
			return -1, ref
		}
	}
	if (as || !insert) && i < b && (s.toks[i].kind == tokIdent || s.toks[i].kind == tokQIdent) && !s.reserved(s.toks[i]) {
		ref.alias = s.name(s.toks[i])
		i++
		if !insert && i < b && lx.punct(s.toks[i], "(") {
			return -1, ref // renamed columns: the key may go by another name
		}
	}
	return i, ref
}

// addRef adds a table to the statement's FROM; false when there are too many.
func (s *Scanner) addRef(r tableRef) bool {
	if s.nrefs == maxRefs {
		return false
	}
	r.parent = s.nrefs
	s.refs[s.nrefs] = r
	s.nrefs++
	return true
}

func (s *Scanner) find(i int) int {
	for s.refs[i].parent != i {
		i = s.refs[i].parent
	}
	return i
}

func (s *Scanner) union(i, j int) { s.refs[s.find(i)].parent = s.find(j) }

// clauseEnd finds where a clause that starts at i ends: the first of the
// words in stop at depth 0, or b.
func (s *Scanner) clauseEnd(i, b int, stop ...keyword) int {
	for ; i < b; i++ {
		if s.depth[i] != 0 || s.toks[i].kw == kwNone {
			continue
		}
		for _, w := range stop {
			if s.toks[i].kw == w {
				return i
			}
		}
	}
	return b
}

// selectStmt: SELECT … FROM refs [WHERE …] [GROUP BY …] ….
func (s *Scanner) selectStmt(a, b int, table []byte, key string) {
	from := s.clauseEnd(a+1, b, kwFrom, kwInto)
	if from == b || s.toks[from].kw == kwInto {
		s.refuse(ReasonShape, table, key)
		return
	}
	fromEnd := s.clauseEnd(from+1, b, kwWhere, kwGroup, kwHaving, kwWindow, kwOrder, kwLimit, kwOffset, kwFetch, kwFor)
	if !s.fromList(from+1, fromEnd, table, key) {
		return
	}
	whereEnd := fromEnd
	where := -1
	if fromEnd < b && s.toks[fromEnd].kw == kwWhere {
		where = fromEnd + 1
		whereEnd = s.clauseEnd(where, b, kwGroup, kwHaving, kwWindow, kwOrder, kwLimit, kwOffset, kwFetch, kwFor)
	}
	s.decide(where, whereEnd, table, key)
}

// fromList reads refs joined by ',' or JOIN … ON … / USING (…) into
// s.refs, linking the tables a join condition equates on their keys.
func (s *Scanner) fromList(i, b int, table []byte, key string) bool {
	lx := &s.lx
	for {
		next, ref := s.tableRef(i, b, false)
		if next < 0 {
			s.refuse(ReasonJoin, table, key)
			return false
		}
		if ref.colo < 0 {
			s.refuse(ReasonJoin, ref.name, "")
			return false
		}
		if s.nrefs > 0 && ref.colo != s.refs[0].colo {
			s.refuse(ReasonJoin, ref.name, ref.key)
			return false
		}
		if !s.addRef(ref) {
			s.refuse(ReasonJoin, table, key)
			return false
		}
		i = next
		if i < b && s.toks[i].kind == tokIdent && (s.toks[i].kw == kwOn || s.toks[i].kw == kwUsing) {
			if s.nrefs < 2 {
				s.refuse(ReasonJoin, table, key)
				return false
			}
			if s.toks[i].kw == kwUsing {
				i = s.joinUsing(i+1, b)
			} else {
				i = s.joinOn(i+1, b)
			}
			if i < 0 {
				s.refuse(ReasonJoin, table, key)
				return false
			}
		}
		if i >= b {
			return true
		}
		t := s.toks[i]
		switch {
		case lx.punct(t, ","):
			i++
		case t.kw == kwJoin:
			i++
		case t.kw == kwInner || t.kw == kwCross:
			if i+1 >= b || s.toks[i+1].kw != kwJoin {
				s.refuse(ReasonJoin, table, key)
				return false
			}
			i += 2
		case t.kw == kwLeft || t.kw == kwRight || t.kw == kwFull:
			i++
			if i < b && s.toks[i].kw == kwOuter {
				i++
			}
			if i >= b || s.toks[i].kw != kwJoin {
				s.refuse(ReasonJoin, table, key)
				return false
			}
			i++
		default:
			// NATURAL, LATERAL, TABLESAMPLE, a parenthesised join…
			s.refuse(ReasonJoin, table, key)
			return false
		}
	}
}

// joinOn reads ON cond up to the next join word at depth 0; each conjunct
// colref = colref on two tables' keys links them. An OR at the top level
// makes the condition tell nothing. It returns the index after the
// condition, or -1.
func (s *Scanner) joinOn(i, b int) int {
	end := i
	for end < b {
		t := s.toks[end]
		if s.depth[end] == 0 && (s.lx.punct(t, ",") || t.kind == tokIdent && (t.kw == kwJoin || t.kw == kwInner ||
			t.kw == kwLeft || t.kw == kwRight || t.kw == kwFull || t.kw == kwCross || t.kw == kwNatural)) {
			break
		}
		end++
	}
	if !s.conjuncts(i, end, false) {
		return -1
	}
	return end
}

// joinUsing reads USING (c, …): a column that is the key of the new
// table and of tables before it links them.
func (s *Scanner) joinUsing(i, b int) int {
	if i >= b || !s.lx.punct(s.toks[i], "(") {
		return -1
	}
	right := s.nrefs - 1
	for i++; i < b; i++ {
		t := s.toks[i]
		if s.lx.punct(t, ")") {
			return i + 1
		}
		if s.lx.punct(t, ",") {
			continue
		}
		if t.kind != tokIdent && t.kind != tokQIdent {
			return -1
		}
		col := s.name(t)
		if string(col) != s.refs[right].key {
			continue
		}
		for j := 0; j < right; j++ {
			if s.refs[j].key == string(col) {
				s.union(j, right)
			}
		}
	}
	return -1
}

// decide finishes a statement whose tables are in s.refs: the key
// conjuncts of WHERE [w, e) (w < 0: no WHERE) bind them; every table must
// be bound or joined on the key to a bound one.
func (s *Scanner) decide(w, e int, table []byte, key string) {
	if w >= 0 {
		for i := w; i < e; i++ {
			if s.depth[i] == 0 && s.toks[i].kw == kwOr {
				s.refuse(ReasonOr, table, key)
				return
			}
		}
		if !s.conjuncts(w, e, true) {
			s.refuse(ReasonOr, table, key)
			return
		}
	}
	root := -1
	for i := 0; i < s.nrefs; i++ {
		if s.refs[i].bound {
			root = s.find(i)
		}
	}
	for i := 0; i < s.nrefs; i++ {
		if root < 0 || s.find(i) != root {
			reason := ReasonNoKey
			if root >= 0 {
				reason = ReasonJoin
			}
			s.refuse(reason, s.refs[i].name, s.refs[i].key)
			return
		}
	}
	if s.res.Outcome != Refused {
		s.res.Outcome = Keyed
	}
}

// conjuncts reads the AND-separated conditions of [i, e). With bind, a
// key = value (or key IN (…)) conjunct binds its table and adds its
// values, the first such conjunct only (another one can only narrow the
// rows further); colref = colref on two keys links the tables either way.
// It reports false for an OR at the top level.
func (s *Scanner) conjuncts(i, e int, bind bool) bool {
	bound := false
	for i < e {
		end := i
		between := false
		for end < e {
			t := s.toks[end]
			if s.depth[end] == 0 && t.kind == tokIdent {
				if t.kw == kwOr {
					return false
				}
				if t.kw == kwBetween {
					between = true
				} else if t.kw == kwAnd {
					if !between {
						break
					}
					between = false
				}
			}
			end++
		}
		if s.keyConjunct(i, end, bind && !bound) {
			bound = bound || bind
		}
		i = end + 1
	}
	return true
}

// colRef reads a column reference at i: c, t.c or s.t.c, and returns the
// index after it and the set of tables whose key it is (bits of s.refs).
func (s *Scanner) colRef(i, e int) (next int, set uint32) {
	var parts [3][]byte
	n := 0
	for i < e && n < 3 {
		t := s.toks[i]
		if t.kind != tokIdent && t.kind != tokQIdent {
			return -1, 0
		}
		parts[n] = s.name(t)
		n++
		i++
		if i < e && s.lx.punct(s.toks[i], ".") {
			i++
			continue
		}
		break
	}
	if n == 0 {
		return -1, 0
	}
	col := string(parts[n-1])
	for j := 0; j < s.nrefs; j++ {
		r := &s.refs[j]
		if r.key != col {
			continue
		}
		switch n {
		case 1:
			set |= 1 << j
		case 2:
			q := parts[0]
			if r.alias != nil && string(q) == string(r.alias) || r.alias == nil && string(q) == string(r.name) {
				set |= 1 << j
			}
		case 3:
			if r.alias == nil && string(parts[1]) == string(r.name) {
				set |= 1 << j
			}
		}
	}
	return i, set
}

// keyConjunct looks at one conjunct [i, e): exactly colref = colref (a
// join on the key), colref = value, value = colref, or colref IN (value,
// …). Anything else tells nothing and is passed over.
func (s *Scanner) keyConjunct(i, e int, bind bool) bool {
	lx := &s.lx
	if next, set := s.colRef(i, e); next > 0 && set != 0 && next < e {
		if lx.punct(s.toks[next], "=") {
			if n2, set2 := s.colRef(next+1, e); n2 == e && set2 != 0 {
				s.link(set | set2)
				return false
			}
			if bind && s.valueAt(next+1, e, set, true) {
				s.bind(set)
				return true
			}
			return false
		}
		if bind && s.toks[next].kw == kwIn && next+1 < e && lx.punct(s.toks[next+1], "(") && lx.punct(s.toks[e-1], ")") {
			mark := len(s.keys)
			j := next + 2
			for j < e-1 {
				k := j
				for k < e-1 && !(s.depth[k] == 1 && lx.punct(s.toks[k], ",")) {
					k++
				}
				if !s.valueAt(j, k, set, true) {
					s.keys = s.keys[:mark]
					return false
				}
				j = k + 1
			}
			if len(s.keys) == mark {
				return false
			}
			s.bind(set)
			return true
		}
		return false
	}
	if !bind {
		return false
	}
	// value = colref
	for j := i; j < e; j++ {
		if s.depth[j] == 0 && lx.punct(s.toks[j], "=") {
			if n2, set := s.colRef(j+1, e); n2 == e && set != 0 && s.valueAt(i, j, set, true) {
				s.bind(set)
				return true
			}
			return false
		}
	}
	return false
}

// link joins the tables of set: a condition equates their keys.
func (s *Scanner) link(set uint32) {
	first := -1
	for j := 0; j < s.nrefs; j++ {
		if set&(1<<j) == 0 {
			continue
		}
		if first < 0 {
			first = j
		} else {
			s.union(j, first)
		}
	}
}

func (s *Scanner) bind(set uint32) {
	for j := 0; j < s.nrefs; j++ {
		if set&(1<<j) != 0 {
			s.refs[j].bound = true
		}
	}
	s.link(set)
}

// valueAt reads exactly one value in [i, e): [+|-]integer, a string, $n
// or NULL, with an optional cast to the key's type, and (with add) adds
// it as a key of the first table in set.
func (s *Scanner) valueAt(i, e int, set uint32, add bool) bool {
	if i >= e {
		return false
	}
	var r *tableRef
	for j := 0; j < s.nrefs; j++ {
		if set&(1<<j) != 0 {
			r = &s.refs[j]
			break
		}
	}
	if r == nil {
		return false
	}
	k := Key{Colo: r.colo, Type: r.typ}
	lx := &s.lx
	t := s.toks[i]
	neg := false
	if (lx.punct(t, "-") || lx.punct(t, "+")) && i+1 < e && s.toks[i+1].kind == tokNumber {
		neg = lx.punct(t, "-")
		i++
		t = s.toks[i]
	}
	switch t.kind {
	case tokNumber:
		k.Number = true
		at := len(s.scratch)
		if neg {
			s.scratch = append(s.scratch, '-')
		}
		s.scratch = append(s.scratch, lx.src[t.start:t.end]...)
		k.Value = s.scratch[at:]
	case tokString:
		if t.joined || t.form == strUnicode {
			return false
		}
		v, ok := s.decodeString(t)
		if !ok {
			return false
		}
		k.Value = v
	case tokParam:
		n := 0
		for _, c := range lx.src[t.start+1 : t.end] {
			n = n*10 + int(c-'0')
			if n > 1<<16 {
				return false
			}
		}
		if n == 0 {
			return false
		}
		k.Param = n
	case tokIdent:
		if t.kw != kwNull {
			return false
		}
		k.Null = true
	default:
		return false
	}
	i++
	if i < e {
		// ::type, of the key's own type only: another type compares
		// otherwise (5 = 5.0 as numeric) and its rows could lie elsewhere.
		if !lx.punct(s.toks[i], "::") || !s.castOK(i+1, e, r.typ) {
			return false
		}
	}
	if add {
		s.keys = append(s.keys, k)
	}
	return true
}

// castOK reports that [i, e) is exactly a type name of the key's family.
func (s *Scanner) castOK(i, e int, typ KeyType) bool {
	lx := &s.lx
	if i >= e {
		return false
	}
	// pg_catalog.int8
	if i+2 < e && s.toks[i].kw == kwPgCatalog && lx.punct(s.toks[i+1], ".") {
		i += 2
	}
	t := s.toks[i]
	switch typ {
	case KeyBigint:
		return i+1 == e && (t.kw == kwBigint || t.kw == kwInt8 || t.kw == kwInt || t.kw == kwInteger ||
			t.kw == kwInt4 || t.kw == kwSmallint || t.kw == kwInt2)
	case KeyText:
		if i+1 == e && (t.kw == kwText || t.kw == kwVarchar) {
			return true
		}
		// varchar(n), character varying [(n)]
		if t.kw == kwCharacter && i+1 < e && s.toks[i+1].kw == kwVarying {
			i++
		} else if t.kw != kwVarchar {
			return false
		}
		i++
		if i == e {
			return true
		}
		return i+3 == e && lx.punct(s.toks[i], "(") && s.toks[i+1].kind == tokNumber && lx.punct(s.toks[i+2], ")")
	case KeyUUID:
		return i+1 == e && t.kw == kwUuid
	}
	return false
}

// decodeString returns a string literal's value: the body itself when it
// needs no decoding, else a decoded copy in scratch. Escapes the scanner
// does not decode (\u, \U) make it no value.
func (s *Scanner) decodeString(t token) ([]byte, bool) {
	body := s.lx.src[t.bodyStart:t.bodyEnd]
	switch t.form {
	case strDollar:
		return body, true
	case strPlain:
		if !containsByte(body, '\'') {
			return body, true
		}
		at := len(s.scratch)
		for i := 0; i < len(body); i++ {
			s.scratch = append(s.scratch, body[i])
			if body[i] == '\'' {
				i++
			}
		}
		return s.scratch[at:], true
	case strEscape:
		at := len(s.scratch)
		for i := 0; i < len(body); i++ {
			c := body[i]
			if c == '\'' {
				s.scratch = append(s.scratch, '\'')
				i++
				continue
			}
			if c != '\\' {
				s.scratch = append(s.scratch, c)
				continue
			}
			i++
			if i >= len(body) {
				return nil, false
			}
			c = body[i]
			switch c {
			case 'b':
				s.scratch = append(s.scratch, '\b')
			case 'f':
				s.scratch = append(s.scratch, '\f')
			case 'n':
				s.scratch = append(s.scratch, '\n')
			case 'r':
				s.scratch = append(s.scratch, '\r')
			case 't':
				s.scratch = append(s.scratch, '\t')
			case 'u', 'U':
				return nil, false
			case 'x':
				v, n := 0, 0
				for n < 2 && i+1 < len(body) && hexVal(body[i+1]) >= 0 {
					v = v*16 + hexVal(body[i+1])
					i++
					n++
				}
				if n == 0 {
					s.scratch = append(s.scratch, 'x')
				} else {
					s.scratch = append(s.scratch, byte(v))
				}
			default:
				if c >= '0' && c <= '7' {
					v, n := int(c-'0'), 1
					for n < 3 && i+1 < len(body) && body[i+1] >= '0' && body[i+1] <= '7' {
						v = v*8 + int(body[i+1]-'0')
						i++
						n++
					}
					s.scratch = append(s.scratch, byte(v))
				} else {
					s.scratch = append(s.scratch, c)
				}
			}
		}
		v := s.scratch[at:]
		if containsByte(v, 0) {
			return nil, false // Postgres refuses a zero byte in text
		}
		return v, true
	}
	return nil, false
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// target reads the table an INSERT, UPDATE or DELETE writes: it must be
// sharded (the statement names one somewhere).
func (s *Scanner) target(i, b int, table []byte, key string, insert bool) (next int) {
	next, ref := s.tableRef(i, b, insert)
	if next < 0 || ref.colo < 0 {
		s.refuse(ReasonShape, table, key)
		return -1
	}
	s.addRef(ref)
	return next
}

// updateStmt: UPDATE t [alias] SET … [WHERE …] [RETURNING …].
func (s *Scanner) updateStmt(a, b int, table []byte, key string) {
	i := s.target(a+1, b, table, key, false)
	if i < 0 {
		return
	}
	if i >= b || s.toks[i].kw != kwSet {
		s.refuse(ReasonShape, table, key)
		return
	}
	setEnd := s.clauseEnd(i+1, b, kwFrom, kwWhere, kwReturning)
	if s.assigns(i+1, setEnd, s.refs[0].key) {
		s.refuse(ReasonKeyAssigned, s.refs[0].name, s.refs[0].key)
		return
	}
	if setEnd < b && s.toks[setEnd].kw == kwFrom {
		s.refuse(ReasonJoin, s.refs[0].name, s.refs[0].key)
		return
	}
	s.whereOf(setEnd, b)
}

// whereOf decides on the WHERE that starts at i (or its absence).
func (s *Scanner) whereOf(i, b int) {
	r := s.refs[0]
	if i < b && s.toks[i].kw == kwWhere {
		if i+1 < b && s.toks[i+1].kw == kwCurrent {
			s.refuse(ReasonNoKey, r.name, r.key)
			return
		}
		s.decide(i+1, s.clauseEnd(i+1, b, kwReturning), r.name, r.key)
		return
	}
	if i < b && s.toks[i].kw != kwReturning {
		s.refuse(ReasonShape, r.name, r.key)
		return
	}
	s.decide(-1, -1, r.name, r.key)
}

// assigns reports a SET list [i, e) that assigns column key: c = …,
// c[…] = …, c.f = … or (…, c, …) = ….
func (s *Scanner) assigns(i, e int, key string) bool {
	for i < e {
		end := i
		for end < e && !(s.depth[end] == 0 && s.lx.punct(s.toks[end], ",")) {
			end++
		}
		multi := s.lx.punct(s.toks[i], "(")
		for j := i; j < end; j++ {
			t := s.toks[j]
			if s.depth[j] == 0 && s.lx.punct(t, "=") {
				break
			}
			if (t.kind == tokIdent || t.kind == tokQIdent) && (j == i || multi && s.depth[j] == 1) && string(s.name(t)) == key {
				return true
			}
		}
		i = end + 1
	}
	return false
}

// deleteStmt: DELETE FROM t [alias] [WHERE …] [RETURNING …].
func (s *Scanner) deleteStmt(a, b int, table []byte, key string) {
	if a+1 >= b || s.toks[a+1].kw != kwFrom {
		s.refuse(ReasonShape, table, key)
		return
	}
	i := s.target(a+2, b, table, key, false)
	if i < 0 {
		return
	}
	if i < b && s.toks[i].kw == kwUsing {
		s.refuse(ReasonJoin, s.refs[0].name, s.refs[0].key)
		return
	}
	s.whereOf(i, b)
}

// insertStmt: INSERT INTO t [AS alias] (cols) VALUES (…)[, (…)]
// [ON CONFLICT … [DO UPDATE SET …]] [RETURNING …].
func (s *Scanner) insertStmt(a, b int, table []byte, key string) {
	lx := &s.lx
	if a+1 >= b || s.toks[a+1].kw != kwInto {
		s.refuse(ReasonShape, table, key)
		return
	}
	i := s.target(a+2, b, table, key, true)
	if i < 0 {
		return
	}
	r := s.refs[0]
	if i >= b || !lx.punct(s.toks[i], "(") {
		s.refuse(ReasonKeyExpression, r.name, r.key) // no column list, or DEFAULT VALUES
		return
	}
	pos, col := -1, 0
	for i++; i < b && !lx.punct(s.toks[i], ")"); i++ {
		t := s.toks[i]
		switch {
		case lx.punct(t, ","):
			col++
		case t.kind == tokIdent || t.kind == tokQIdent:
			if string(s.name(t)) == r.key && (i+1 >= b || !lx.punct(s.toks[i+1], ".") && !lx.punct(s.toks[i+1], "[")) {
				pos = col
			}
		default:
			s.refuse(ReasonShape, r.name, r.key)
			return
		}
	}
	i++
	if pos < 0 {
		s.refuse(ReasonKeyExpression, r.name, r.key)
		return
	}
	if i < b && s.toks[i].kw == kwOverriding {
		i += 3
	}
	if i >= b || s.toks[i].kw != kwValues {
		s.refuse(ReasonShape, r.name, r.key) // INSERT … SELECT
		return
	}
	i++
	set := uint32(1)
	for {
		if i >= b || !lx.punct(s.toks[i], "(") {
			s.refuse(ReasonShape, r.name, r.key)
			return
		}
		// The row's values at depth 1; the key's is the pos-th.
		col, start := 0, i+1
		j := i + 1
		found := false
		for ; j < b && !(s.depth[j] == 0 && lx.punct(s.toks[j], ")")); j++ {
			if s.depth[j] == 1 && lx.punct(s.toks[j], ",") {
				if col == pos {
					if !s.valueAt(start, j, set, true) {
						s.refuse(ReasonKeyExpression, r.name, r.key)
						return
					}
					found = true
				}
				col++
				start = j + 1
			}
		}
		if j >= b {
			s.refuse(ReasonShape, r.name, r.key)
			return
		}
		if col == pos {
			if !s.valueAt(start, j, set, true) {
				s.refuse(ReasonKeyExpression, r.name, r.key)
				return
			}
			found = true
		}
		if !found {
			s.refuse(ReasonKeyExpression, r.name, r.key)
			return
		}
		i = j + 1
		if i < b && lx.punct(s.toks[i], ",") {
			i++
			continue
		}
		break
	}
	if i < b && s.toks[i].kw == kwOn {
		end := s.clauseEnd(i, b, kwReturning)
		for j := i; j < end; j++ {
			if s.depth[j] == 0 && s.toks[j].kw == kwSet {
				if s.assigns(j+1, s.clauseEnd(j+1, end, kwWhere), r.key) {
					s.refuse(ReasonKeyAssigned, r.name, r.key)
					return
				}
				break
			}
		}
		i = end
	}
	if i < b && s.toks[i].kw != kwReturning {
		s.refuse(ReasonShape, r.name, r.key)
		return
	}
	s.refs[0].bound = true
	if s.res.Outcome != Refused {
		s.res.Outcome = Keyed
	}
}
