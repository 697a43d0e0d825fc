package shard

// INSERT, UPDATE and DELETE: the table they write, the key they must
// not assign, and where the key of each row comes from.

// The words that end the clauses of the writes.
var (
	setEnds       = kwMask(kwFrom, kwWhere, kwReturning)
	upToReturning = kwMask(kwReturning)
	upToWhere     = kwMask(kwWhere)
)

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
	setEnd := s.clauseEnd(i+1, b, setEnds)
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
		s.decide(i+1, s.clauseEnd(i+1, b, upToReturning), r.name, r.key)
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
		for end < e && !(s.toks[end].depth == 0 && s.toks[end].ch == ',') {
			end++
		}
		multi := s.toks[i].ch == '('
		for j := i; j < end; j++ {
			t := s.toks[j]
			if s.toks[j].depth == 0 && t.ch == '=' {
				break
			}
			if (t.kind == tokIdent || t.kind == tokQIdent) && (j == i || multi && s.toks[j].depth == 1) && s.nameIs(&s.toks[j], key) {
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
	if a+1 >= b || s.toks[a+1].kw != kwInto {
		s.refuse(ReasonShape, table, key)
		return
	}
	i := s.target(a+2, b, table, key, true)
	if i < 0 {
		return
	}
	r := s.refs[0]
	if i >= b || s.toks[i].ch != '(' {
		s.refuse(ReasonNoColumnList, r.name, r.key) // or DEFAULT VALUES
		return
	}
	pos, col := -1, 0
	for i++; i < b && s.toks[i].ch != ')'; i++ {
		t := s.toks[i]
		switch {
		case t.ch == ',':
			col++
		case t.kind == tokIdent || t.kind == tokQIdent:
			if s.nameIs(&s.toks[i], r.key) && (i+1 >= b || s.toks[i+1].ch != '.' && s.toks[i+1].ch != '[') {
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
		if i >= b || s.toks[i].ch != '(' {
			s.refuse(ReasonShape, r.name, r.key)
			return
		}
		// The row's values at depth 1; the key's is the pos-th.
		col, start := 0, i+1
		j := i + 1
		found := false
		for ; j < b && !(s.toks[j].depth == 0 && s.toks[j].ch == ')'); j++ {
			if s.toks[j].depth == 1 && s.toks[j].ch == ',' {
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
		if i < b && s.toks[i].ch == ',' {
			i++
			continue
		}
		break
	}
	if i < b && s.toks[i].kw == kwOn {
		end := s.clauseEnd(i, b, upToReturning)
		for j := i; j < end; j++ {
			if s.toks[j].depth == 0 && s.toks[j].kw == kwSet {
				if s.assigns(j+1, s.clauseEnd(j+1, end, upToWhere), r.key) {
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
