package shard

import "errors"

// Hints: what an application or an operator says about where a statement
// runs, in a comment Postgres ignores or in a SET the pooler answers
// itself. A hint is read before the scanner looks at the statement; it
// never reaches Postgres as a setting.
//
//	/* pgturnstile: shard_key=42, colo=org */ SELECT …     (leading)
//	SELECT … /*shard_key='42',colo='org'*/                  (trailing, sqlcommenter)
//	/* pgturnstile: shard=app_s1 */ …  or  shard=all       (targets: admin and target_users)
//	SET [SESSION | LOCAL] pgturnstile.shard_key = '42'      (and pgturnstile.shard, pgturnstile.colo)

// hintWindow bounds what is read for a comment at each end of a
// statement, as the admission tags' window does.
const hintWindow = 512

// Hint is what a statement's comment says. Its slices lie in the
// statement (or in the Scanner's memory for a decoded value).
type Hint struct {
	// Key is the shard key's text form, hashed with the colocation's
	// key type; Colo names the colocation (empty: the cluster's only
	// one, or the one of the statement's tables).
	Key  []byte
	Colo []byte
	// Shard names a [databases] entry, or is "all" for a broadcast.
	Shard []byte
}

// Empty reports a hint that says nothing.
func (h Hint) Empty() bool { return h.Key == nil && h.Shard == nil && h.Colo == nil }

// ErrHint is a pgturnstile comment that cannot be read: the client hears
// it rather than have its statement routed by a guess.
var ErrHint = errors.New("malformed pgturnstile hint")

// hintMarker opens a leading hint.
const hintMarker = "pgturnstile:"

// ReadHint finds a statement's hint: a leading comment that starts with
// "pgturnstile:", else a trailing sqlcommenter comment carrying shard_key,
// shard or colo. Pairs are key=value or key='value', separated by commas
// or spaces; in quotes ” is a quote. A leading pgturnstile comment that
// does not parse, or that names a key it does not know, is ErrHint; a
// trailing comment that does not parse is no hint (it may be another
// tool's).
func ReadHint(sql []byte) (Hint, error) {
	if h, found, err := leadingHint(sql); found {
		return h, err
	}
	body, ok := trailingCommentBody(sql)
	if !ok {
		return Hint{}, nil
	}
	return trailingHint(body), nil
}

// leadingHint reads a leading pgturnstile comment; found is false when
// the statement does not open with one.
func leadingHint(sql []byte) (h Hint, found bool, err error) {
	i := 0
	for i < len(sql) && isSpace(sql[i]) {
		i++
	}
	if i+1 >= len(sql) || sql[i] != '/' || sql[i+1] != '*' {
		return Hint{}, false, nil
	}
	body, ok := commentBody(sql[i:min(len(sql), i+hintWindow)])
	if !ok {
		return Hint{}, false, nil
	}
	b := trimSpace(body)
	if len(b) < len(hintMarker) || string(b[:len(hintMarker)]) != hintMarker {
		return Hint{}, false, nil
	}
	h, ok = parsePairs(b[len(hintMarker):], true)
	if !ok || h.Empty() {
		return Hint{}, true, ErrHint
	}
	return h, true, nil
}

// trailingHint reads a trailing comment's body: no hint when it does not
// parse (it may be another tool's).
func trailingHint(body []byte) Hint {
	h, ok := parsePairs(body, false)
	if !ok {
		return Hint{}
	}
	return h
}

// commentBody returns the body of the comment that opens s, when it ends
// within s and holds no nested comment.
func commentBody(s []byte) ([]byte, bool) {
	for j := 2; j+1 < len(s); j++ {
		if s[j] == '/' && s[j+1] == '*' {
			return nil, false
		}
		if s[j] == '*' && s[j+1] == '/' {
			return s[2:j], true
		}
	}
	return nil, false
}

// trailingCommentBody returns the body of the comment that ends the
// statement (whitespace and one ';' after it aside), when it starts within
// the last hintWindow bytes. The lexer confirms that it is a comment and
// not the inside of a string.
func trailingCommentBody(sql []byte) ([]byte, bool) {
	e := len(sql)
	for e > 0 && isSpace(sql[e-1]) {
		e--
	}
	if e > 0 && sql[e-1] == ';' {
		e--
		for e > 0 && isSpace(sql[e-1]) {
			e--
		}
	}
	if e < 4 || sql[e-1] != '/' || sql[e-2] != '*' {
		return nil, false
	}
	lo := max(0, e-hintWindow)
	for j := e - 4; j >= lo; j-- {
		if sql[j] == '/' && sql[j+1] == '*' {
			body := sql[j+2 : e-2]
			for k := 0; k+1 < len(body); k++ {
				if body[k] == '/' && body[k+1] == '*' || body[k] == '*' && body[k+1] == '/' {
					return nil, false
				}
			}
			// It must be where the lexer sees a comment: the tokens end
			// before it.
			lx := lexer{src: sql[:j]}
			for {
				t := lx.next()
				if t.kind == tokEOF {
					break
				}
				if t.kind == tokBad {
					return nil, false
				}
			}
			return body, true
		}
	}
	return nil, false
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// parsePairs reads key=value pairs. strict: every key must be one of the
// hint's (a leading pgturnstile comment); otherwise unknown keys are
// passed over (a sqlcommenter comment carries others: route, framework…).
// Values are taken as written (inside quotes, ” is not undone: a value
// with a quote in it is refused instead, so that no slice needs copying).
func parsePairs(b []byte, strict bool) (Hint, bool) {
	var h Hint
	i := 0
	for {
		for i < len(b) && (isSpace(b[i]) || b[i] == ',') {
			i++
		}
		if i >= len(b) {
			return h, true
		}
		k := i
		for i < len(b) && (b[i] >= 'a' && b[i] <= 'z' || b[i] == '_') {
			i++
		}
		key := b[k:i]
		if len(key) == 0 || i >= len(b) || b[i] != '=' {
			return Hint{}, false
		}
		i++
		var val []byte
		if i < len(b) && b[i] == '\'' {
			i++
			v := i
			for i < len(b) && b[i] != '\'' {
				i++
			}
			if i >= len(b) || i+1 < len(b) && b[i+1] == '\'' {
				return Hint{}, false
			}
			val = b[v:i]
			i++
		} else {
			v := i
			for i < len(b) && !isSpace(b[i]) && b[i] != ',' {
				if b[i] == '\'' {
					return Hint{}, false
				}
				i++
			}
			val = b[v:i]
		}
		switch string(key) {
		case "shard_key":
			h.Key = val
		case "colo":
			h.Colo = val
		case "shard":
			if len(val) == 0 {
				return Hint{}, false
			}
			h.Shard = val
		default:
			if strict {
				return Hint{}, false
			}
		}
	}
}

// SetHint is a SET of one of the router's settings, which the pooler
// answers itself.
type SetHint struct {
	// Name is shard_key, shard or colo; Local: SET LOCAL (for the
	// transaction), else for the session. Reset: RESET or SET … TO DEFAULT.
	Name  string
	Local bool
	Reset bool
	// Value is the value's text (a string's body or a word or number).
	Value []byte
}

// ReadSet recognises SET [SESSION|LOCAL] pgturnstile.NAME {=|TO} value
// and RESET pgturnstile.NAME, alone in the text (one ';' allowed). found
// is false for anything else, including other settings: those go to
// Postgres. A statement that sets a pgturnstile.* name in a form it does
// not read is found with ErrHint: it must not reach Postgres, which would
// take it as a placeholder setting and route nothing by it.
func ReadSet(sql []byte) (sh SetHint, found bool, err error) {
	if len(sql) > maxLexLen {
		return SetHint{}, false, nil // no SET is; Postgres takes no such message
	}
	lx := lexer{src: sql}
	var toks [10]token
	n, bad := 0, false
	for n < len(toks) {
		t := lx.next()
		if t.kind == tokEOF || t.kind == tokBad {
			bad = t.kind == tokBad
			break
		}
		toks[n] = t
		n++
	}
	word := func(j int, w string) bool {
		return j < n && toks[j].kind == tokIdent && equalFold(sql[toks[j].start:toks[j].end], w)
	}
	i := 0
	switch {
	case word(0, "reset"):
		sh.Reset = true
		i = 1
	case word(0, "set"):
		i = 1
		if word(1, "local") {
			sh.Local = true
			i = 2
		} else if word(1, "session") {
			i = 2
		}
	default:
		return SetHint{}, false, nil
	}
	if !word(i, "pgturnstile") || i+1 >= n || toks[i+1].kind != tokPunct || sql[toks[i+1].start] != '.' {
		return SetHint{}, false, nil
	}
	// From here the statement is ours, read whole or refused.
	if t := lx.next(); bad || t.kind != tokEOF && !(t.kind == tokPunct && sql[t.start] == ';' && lx.next().kind == tokEOF) {
		return SetHint{}, true, ErrHint
	}
	if n > 0 && toks[n-1].kind == tokPunct && sql[toks[n-1].start] == ';' {
		n--
	}
	switch {
	case word(i+2, "shard_key"):
		sh.Name = "shard_key"
	case word(i+2, "shard"):
		sh.Name = "shard"
	case word(i+2, "colo"):
		sh.Name = "colo"
	default:
		return SetHint{}, true, ErrHint
	}
	i += 3
	if sh.Reset {
		if i != n {
			return SetHint{}, true, ErrHint
		}
		return sh, true, nil
	}
	if i >= n || !(toks[i].kind == tokOp && string(sql[toks[i].start:toks[i].end]) == "=" || word(i, "to")) {
		return SetHint{}, true, ErrHint
	}
	i++
	t := toks[min(i, len(toks)-1)]
	switch {
	case i+1 == n && t.kind == tokString && (t.strForm() == strPlain || t.strForm() == strDollar) && !t.joined() &&
		!(t.strForm() == strPlain && containsByte(t.body(sql), '\'')):
		sh.Value = t.body(sql)
	case i+1 == n && t.kind == tokIdent && equalFold(sql[t.start:t.end], "default"):
		sh.Reset = true
	case i+1 == n && (t.kind == tokIdent || t.kind == tokNumber):
		sh.Value = sql[t.start:t.end]
	case i+2 == n && t.kind == tokOp && string(sql[t.start:t.end]) == "-" && toks[i+1].kind == tokNumber:
		sh.Value = sql[t.start:toks[i+1].end]
	default:
		return SetHint{}, true, ErrHint
	}
	return sh, true, nil
}

func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
