package shard

import "slices"

// The FROM of a SELECT: its tables, and the joins that put them on one
// shard (a join of one colocation on its key).

// reservedWords are the words that end a table reference where an alias
// could stand, and that the scanner's clauses start with.
var reservedWords = kwMask(kwOn, kwAs, kwSet, kwFor, kwJoin, kwLeft, kwFull, kwFrom, kwWhere, kwInner, kwRight, kwCross,
	kwGroup, kwOrder, kwLimit, kwUsing, kwUnion, kwFetch, kwOuter, kwHaving, kwWindow, kwOffset,
	kwExcept, kwValues, kwNatural, kwLateral, kwReturning, kwIntersect, kwTablesample, kwOverriding)

func (s *Scanner) reserved(t token) bool { return reservedWords.has(t.kw) }

// tableRef reads a table reference at i: [ONLY] [schema.]name [*]
// [[AS] alias]. It returns the index after it, or -1 when what stands
// there is not a plain table (a subquery, a function, a column list on
// the alias…). A table that is not sharded gets colo -1. For INSERT's
// target (insert), a '(' after the name opens the column list and an
// alias needs AS.
func (s *Scanner) tableRef(i, b int, insert bool) (next int, ref tableRef) {
	if i < b && s.toks[i].kw == kwOnly {
		i++
	}
	if i >= b || s.toks[i].kind != tokIdent && s.toks[i].kind != tokQIdent || s.reserved(s.toks[i]) {
		return -1, ref
	}
	var schema []byte
	name := s.name(s.toks[i])
	nameAt := i
	i++
	if i+1 < b && s.toks[i].ch == '.' {
		if s.toks[i+1].kind != tokIdent && s.toks[i+1].kind != tokQIdent {
			return -1, ref
		}
		schema, name = name, s.name(s.toks[i+1])
		nameAt = i + 1
		i += 2
	}
	if !insert && i < b && s.toks[i].ch == '(' {
		return -1, ref // a function in FROM
	}
	if i < b && s.toks[i].ch == '*' {
		i++
	}
	ref.name, ref.colo = name, -1
	if f := &s.first; f.tok == nameAt {
		// The same token, so the same schema and name: mentions's lookup.
		ref.colo, ref.key, ref.typ = f.colo, f.key, f.typ
	} else if colo, key, typ, ok := s.lookup(schema, name); ok {
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
		if !insert && i < b && s.toks[i].ch == '(' {
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
// words in stop at depth 0, or b. Those words are few in a statement, and
// tokenize lists them (s.clauses), so it reads the list rather than the
// clause: a SELECT's list of columns is often most of its tokens.
func (s *Scanner) clauseEnd(i, b int, stop keywords) int {
	if stop&^clauseWords != 0 {
		// Words tokenize does not list (no caller asks for them).
		for ; i < b; i++ {
			if t := &s.toks[i]; t.depth == 0 && stop.has(t.kw) {
				return i
			}
		}
		return b
	}
	c, _ := slices.BinarySearch(s.clauses, int32(i))
	for ; c < len(s.clauses) && int(s.clauses[c]) < b; c++ {
		if j := int(s.clauses[c]); stop.has(s.toks[j].kw) {
			return j
		}
	}
	return b
}

// The words that end the clauses of a SELECT.
var (
	selectListEnd = kwMask(kwFrom, kwInto)
	fromEnds      = kwMask(kwWhere, kwGroup, kwHaving, kwWindow, kwOrder, kwLimit, kwOffset, kwFetch, kwFor)
	whereEnds     = kwMask(kwGroup, kwHaving, kwWindow, kwOrder, kwLimit, kwOffset, kwFetch, kwFor)
)

// clauseWords are all the words clauseEnd is asked for.
var clauseWords = selectListEnd | fromEnds | whereEnds | setEnds | upToReturning | upToWhere

// selectStmt: SELECT … FROM refs [WHERE …] [GROUP BY …] ….
func (s *Scanner) selectStmt(a, b int, table []byte, key string) {
	from := s.clauseEnd(a+1, b, selectListEnd)
	if from == b || s.toks[from].kw == kwInto {
		s.refuse(ReasonShape, table, key)
		return
	}
	fromEnd := s.clauseEnd(from+1, b, fromEnds)
	if !s.fromList(from+1, fromEnd, table, key) {
		return
	}
	whereEnd := fromEnd
	where := -1
	if fromEnd < b && s.toks[fromEnd].kw == kwWhere {
		where = fromEnd + 1
		whereEnd = s.clauseEnd(where, b, whereEnds)
	}
	s.decide(where, whereEnd, table, key)
}

// fromList reads refs joined by ',' or JOIN … ON … / USING (…) into
// s.refs, linking the tables a join condition equates on their keys.
func (s *Scanner) fromList(i, b int, table []byte, key string) bool {
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
		case t.ch == ',':
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

// joinWords start the next table of a FROM after a join condition.
var joinWords = kwMask(kwJoin, kwInner, kwLeft, kwRight, kwFull, kwCross, kwNatural)

// joinOn reads ON cond up to the next join word at depth 0; each conjunct
// colref = colref on two tables' keys links them. An OR at the top level
// makes the condition tell nothing. It returns the index after the
// condition, or -1.
func (s *Scanner) joinOn(i, b int) int {
	end := i
	for end < b {
		if t := &s.toks[end]; t.depth == 0 && (t.ch == ',' || joinWords.has(t.kw)) {
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
	if i >= b || s.toks[i].ch != '(' {
		return -1
	}
	right := s.nrefs - 1
	for i++; i < b; i++ {
		t := s.toks[i]
		if t.ch == ')' {
			return i + 1
		}
		if t.ch == ',' {
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
