package shard

// WHERE: the conjuncts that bind a key to a value, and the values the
// scanner takes as keys (literals, $n, NULL, with a cast of the key's own
// type).

// decide finishes a statement whose tables are in s.refs: the key
// conjuncts of WHERE [w, e) (w < 0: no WHERE) bind them; every table must
// be bound or joined on the key to a bound one.
func (s *Scanner) decide(w, e int, table []byte, key string) {
	if w >= 0 {
		// An OR at the top level: conjuncts reports it, and what it bound
		// before it matters no more once the statement is refused.
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

// conjunctWords are the words conjuncts stops at.
var conjunctWords = kwMask(kwAnd, kwOr, kwBetween)

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
			// Most tokens are none of the three words: one mask test
			// passes them (kw is kwNone but for an unquoted identifier).
			t := &s.toks[end]
			if conjunctWords.has(t.kw) && t.depth == 0 {
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
	var parts [3]int32 // the tokens of c, t.c or s.t.c
	n := 0
	for i < e && n < 3 {
		if k := s.toks[i].kind; k != tokIdent && k != tokQIdent {
			return -1, 0
		}
		parts[n] = int32(i)
		n++
		i++
		if i < e && s.toks[i].ch == '.' {
			i++
			continue
		}
		break
	}
	if n == 0 {
		return -1, 0
	}
	// The column first: most are no table's key, and their qualifier
	// then needs no name.
	last := &s.toks[parts[n-1]]
	var qual *token // t of t.c, or of s.t.c
	if n > 1 {
		qual = &s.toks[parts[n-2]]
	}
	for j := 0; j < s.nrefs; j++ {
		r := &s.refs[j]
		// Most columns are told from the key by their length, without
		// nameIs's call.
		if last.kind == tokIdent && int(last.end-last.start) != len(r.key) || !s.nameIs(last, r.key) {
			continue
		}
		if n == 1 {
			set |= 1 << j
			continue
		}
		// The qualifier compared in place (nameEq), not named first: most
		// qualifiers are aliases of a letter or two.
		switch n {
		case 2:
			if r.alias != nil && nameEq(s, qual, r.alias) || r.alias == nil && nameEq(s, qual, r.name) {
				set |= 1 << j
			}
		case 3:
			if r.alias == nil && nameEq(s, qual, r.name) {
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
	if !bind {
		// Without bind only colref = colref tells anything (it links
		// tables): a conjunct whose leading column reference (read as
		// colRef reads it) is not followed by '=' is passed over before
		// colRef matches its names against every table's.
		j := i
		for n := 0; n < 3 && j < e && (s.toks[j].kind == tokIdent || s.toks[j].kind == tokQIdent); n++ {
			j++
			if j < e && s.toks[j].ch == '.' {
				j++
				continue
			}
			break
		}
		if j >= e || s.toks[j].ch != '=' {
			return false
		}
	}
	if next, set := s.colRef(i, e); next > 0 && set != 0 && next < e {
		if s.toks[next].ch == '=' {
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
		if bind && s.toks[next].kw == kwIn && next+1 < e && s.toks[next+1].ch == '(' && s.toks[e-1].ch == ')' {
			mark := len(s.keys)
			j := next + 2
			for j < e-1 {
				k := j
				for k < e-1 && !(s.toks[k].depth == 1 && s.toks[k].ch == ',') {
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
		if s.toks[j].depth == 0 && s.toks[j].ch == '=' {
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
// or NULL, with an optional cast to the key's type, alone or in one pair
// of parentheses (pgjdbc's preferQueryMode=simple writes a parameter as
// ('42'::int8)), and (with add) adds it as a key of the first table in
// set.
func (s *Scanner) valueAt(i, e int, set uint32, add bool) bool {
	if i >= e {
		return false
	}
	if s.toks[i].ch == '(' {
		var ok bool
		if i, e, ok = s.parenthesised(i, e); !ok {
			return false
		}
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
	t := s.toks[i]
	neg := false
	if (t.ch == '-' || t.ch == '+') && i+1 < e && s.toks[i+1].kind == tokNumber {
		neg = t.ch == '-'
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
		s.scratch = append(s.scratch, s.lx.src[t.start:t.end]...)
		k.Value = s.scratch[at:]
	case tokString:
		if t.joined() || t.strForm() == strUnicode {
			return false
		}
		v, ok := s.decodeString(t)
		if !ok {
			return false
		}
		k.Value = v
	case tokParam:
		n := 0
		for _, c := range s.lx.src[t.start+1 : t.end] {
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
		if s.toks[i].ch != chCast || !s.castOK(i+1, e, r.typ) {
			return false
		}
	}
	if add {
		s.keys = append(s.keys, k)
		s.lastKeyAt, s.lastKeyEnd = t.start, t.end
	}
	return true
}

// parenthesised returns the inside of [i, e) when it is one pair of
// parentheses around something that is not itself parenthesised: the
// shape of a literal pgjdbc inlines, ('42'::int8) or ('abc'), and nothing
// more general.
func (s *Scanner) parenthesised(i, e int) (int, int, bool) {
	if e-i < 3 || s.toks[e-1].ch != ')' || s.toks[i+1].ch == '(' {
		return 0, 0, false
	}
	d := s.toks[i].depth
	for j := i + 1; j < e-1; j++ {
		if s.toks[j].depth <= d {
			return 0, 0, false // (a) = (b): not one pair
		}
	}
	return i + 1, e - 1, true
}

// castOK reports that [i, e) is exactly a type name of the key's family.
func (s *Scanner) castOK(i, e int, typ KeyType) bool {
	if i >= e {
		return false
	}
	// pg_catalog.int8: the parts of a qualified name are not named as
	// keywords by the lexer (qualifies), so they are named here.
	if i+2 < e && s.toks[i+1].ch == '.' && s.toks[i].kind == tokIdent && s.nameIs(&s.toks[i], "pg_catalog") {
		i += 2
	}
	t := s.toks[i]
	if t.kind == tokIdent && t.kw == kwNone {
		t.kw = keywordAt(s.lx.src, int(t.start), int(t.end))
	}
	switch typ {
	case KeyBigint, KeyInt, KeySmallint:
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
		return i+3 == e && s.toks[i].ch == '(' && s.toks[i+1].kind == tokNumber && s.toks[i+2].ch == ')'
	case KeyUUID:
		return i+1 == e && t.kw == kwUuid
	}
	return false
}

// decodeString returns a string literal's value: the body itself when it
// needs no decoding, else a decoded copy in scratch. Escapes the scanner
// does not decode (\u, \U) make it no value.
func (s *Scanner) decodeString(t token) ([]byte, bool) {
	body := t.body(s.lx.src)
	switch t.strForm() {
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
