package shard

// The lexer: Postgres's tokens (src/backend/parser/scan.l) as byte ranges
// of the statement, without allocation. It knows exactly as much as the
// scanner needs to never mistake text inside a string, a quoted
// identifier, a comment or a dollar quote for SQL: what it cannot place
// it marks as a bad token, and the scanner refuses rather than guesses.

// tokKind is the kind of one token.
type tokKind uint8

const (
	tokEOF     tokKind = iota
	tokIdent           // unquoted identifier or keyword (compare folded)
	tokQIdent          // "quoted identifier" (exact; "" inside)
	tokString          // a string constant: '…', E'…', N'…', $tag$…$tag$
	tokBits            // B'…' or X'…': never a key
	tokNumber          // an integer (digits only)
	tokDecimal         // a number with a point or an exponent
	tokParam           // $n
	tokOp              // an operator run (=, <>, ||, …) or '::'
	tokPunct           // one of , ( ) [ ] ; : .
	tokBad             // what the lexer cannot place (an unclosed quote or comment)
)

// strForm says how a tokString's text is written, which decides how it
// decodes.
type strForm uint8

const (
	strPlain   strForm = iota // '…' with '' (standard_conforming_strings on)
	strEscape                 // E'…', or '…' with the setting off: backslashes
	strDollar                 // $tag$…$tag$: verbatim
	strUnicode                // U&'…': escapes the scanner does not decode
)

// token is one token: its kind and where it lies in the statement.
// For a string, [start,end) covers the whole literal with its quotes; body
// is where its text starts and ends inside.
type token struct {
	kind       tokKind
	form       strForm
	start, end int
	bodyStart  int
	bodyEnd    int
	// kw is the keyword an unquoted identifier is, if any.
	kw keyword
	// joined: the string is followed by another one after a newline,
	// which Postgres concatenates ('a'\n'b' is 'ab').
	joined bool
}

// lexer walks a statement one token at a time.
type lexer struct {
	src []byte
	pos int
	// escapeStrings: standard_conforming_strings is off, so '…' takes
	// backslash escapes as E'…' does.
	escapeStrings bool
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdentCont(c byte) bool {
	return isIdentStart(c) || c >= '0' && c <= '9' || c == '$'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isOpChar is Postgres's op_chars.
func isOpChar(c byte) bool {
	switch c {
	case '~', '!', '@', '#', '^', '&', '|', '`', '?', '+', '-', '*', '/', '%', '<', '>', '=':
		return true
	}
	return false
}

// skipSpace skips whitespace and comments. It reports false for a comment
// that does not end (the statement is then not understood), and whether a
// newline was among what it skipped.
func (l *lexer) skipSpace() (ok, newline bool) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case isSpace(c):
			if c == '\n' || c == '\r' {
				newline = true
			}
			l.pos++
		case c == '-' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '-':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' && l.src[l.pos] != '\r' {
				l.pos++
			}
		case c == '/' && l.pos+1 < len(l.src) && l.src[l.pos+1] == '*':
			// Comments nest in Postgres.
			depth := 0
			for {
				if l.pos+1 >= len(l.src) {
					l.pos = len(l.src)
					return false, newline
				}
				if l.src[l.pos] == '/' && l.src[l.pos+1] == '*' {
					depth++
					l.pos += 2
					continue
				}
				if l.src[l.pos] == '*' && l.src[l.pos+1] == '/' {
					depth--
					l.pos += 2
					if depth == 0 {
						break
					}
					continue
				}
				if l.src[l.pos] == '\n' || l.src[l.pos] == '\r' {
					newline = true
				}
				l.pos++
			}
		default:
			return true, newline
		}
	}
	return true, newline
}

// next returns the next token.
func (l *lexer) next() token {
	if ok, _ := l.skipSpace(); !ok {
		return token{kind: tokBad, start: l.pos, end: l.pos}
	}
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, start: l.pos, end: l.pos}
	}
	start := l.pos
	c := l.src[start]
	switch {
	case (c == 'E' || c == 'e') && l.peekIs(1, '\''):
		l.pos++
		return l.str(start, strEscape)
	case (c == 'N' || c == 'n') && l.peekIs(1, '\''):
		l.pos++
		return l.str(start, l.plainForm())
	case (c == 'B' || c == 'b' || c == 'X' || c == 'x') && l.peekIs(1, '\''):
		l.pos++
		t := l.str(start, strPlain)
		if t.kind == tokString {
			t.kind = tokBits
		}
		return t
	case (c == 'U' || c == 'u') && l.peekIs(1, '&') && l.peekIs(2, '\''):
		l.pos += 2
		return l.str(start, strUnicode)
	case (c == 'U' || c == 'u') && l.peekIs(1, '&') && l.peekIs(2, '"'):
		l.pos += 2
		t := l.quotedIdent(start)
		if t.kind == tokQIdent {
			// Its escapes are not decoded: it names nothing the scanner
			// can match, so it is a token of its own kind of unknown.
			t.kind = tokBad
		}
		return t
	case isIdentStart(c):
		for l.pos < len(l.src) && isIdentCont(l.src[l.pos]) {
			l.pos++
		}
		return token{kind: tokIdent, start: start, end: l.pos, kw: keywordOf(l.src[start:l.pos])}
	case c == '"':
		return l.quotedIdent(start)
	case c == '\'':
		return l.str(start, l.plainForm())
	case c == '$':
		if l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]) {
			l.pos++
			for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
				l.pos++
			}
			return token{kind: tokParam, start: start, end: l.pos}
		}
		return l.dollar(start)
	case isDigit(c) || c == '.' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]):
		return l.number(start)
	case c == ':' && l.peekIs(1, ':'):
		l.pos += 2
		return token{kind: tokOp, start: start, end: l.pos}
	case c == ',' || c == '(' || c == ')' || c == '[' || c == ']' || c == ';' || c == ':' || c == '.':
		l.pos++
		return token{kind: tokPunct, start: start, end: l.pos}
	case isOpChar(c):
		return l.operator(start)
	}
	l.pos++
	return token{kind: tokBad, start: start, end: l.pos}
}

func (l *lexer) peekIs(off int, c byte) bool {
	return l.pos+off < len(l.src) && l.src[l.pos+off] == c
}

func (l *lexer) plainForm() strForm {
	if l.escapeStrings {
		return strEscape
	}
	return strPlain
}

// str reads a quoted string whose opening quote is at l.pos.
func (l *lexer) str(start int, form strForm) token {
	l.pos++ // the quote
	body := l.pos
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c == '\\' && form == strEscape {
			l.pos += 2
			continue
		}
		if c == '\'' {
			if l.peekIs(1, '\'') {
				l.pos += 2
				continue
			}
			t := token{kind: tokString, form: form, start: start, bodyStart: body, bodyEnd: l.pos}
			l.pos++
			t.end = l.pos
			// A string continued after a newline: 'a'\n'b'.
			save := l.pos
			if ok, nl := l.skipSpace(); ok && nl && l.pos < len(l.src) && l.src[l.pos] == '\'' {
				t.joined = true
			}
			l.pos = save
			return t
		}
		l.pos++
	}
	l.pos = len(l.src)
	return token{kind: tokBad, start: start, end: l.pos}
}

func (l *lexer) quotedIdent(start int) token {
	l.pos++
	body := l.pos
	for l.pos < len(l.src) {
		if l.src[l.pos] == '"' {
			if l.peekIs(1, '"') {
				l.pos += 2
				continue
			}
			t := token{kind: tokQIdent, start: start, bodyStart: body, bodyEnd: l.pos}
			l.pos++
			t.end = l.pos
			if t.bodyEnd == t.bodyStart {
				t.kind = tokBad // "" is a zero-length identifier: an error in Postgres
			}
			return t
		}
		l.pos++
	}
	l.pos = len(l.src)
	return token{kind: tokBad, start: start, end: l.pos}
}

// dollar reads a dollar-quoted string, or a lone '$' (bad).
func (l *lexer) dollar(start int) token {
	i := l.pos + 1
	if i < len(l.src) && isIdentStart(l.src[i]) {
		for i < len(l.src) && (isIdentStart(l.src[i]) || isDigit(l.src[i])) {
			i++
		}
	}
	if i >= len(l.src) || l.src[i] != '$' {
		l.pos++
		return token{kind: tokBad, start: start, end: l.pos}
	}
	tag := l.src[l.pos : i+1] // $tag$
	body := i + 1
	for j := body; j+len(tag) <= len(l.src); j++ {
		if l.src[j] == '$' && string(l.src[j:j+len(tag)]) == string(tag) {
			l.pos = j + len(tag)
			return token{kind: tokString, form: strDollar, start: start, end: l.pos, bodyStart: body, bodyEnd: j}
		}
	}
	l.pos = len(l.src)
	return token{kind: tokBad, start: start, end: l.pos}
}

func (l *lexer) number(start int) token {
	kind := tokNumber
	for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
		l.pos++
	}
	// "1..2" is 1 followed by "..": only a point followed by what is not
	// a second point makes a decimal.
	if l.pos < len(l.src) && l.src[l.pos] == '.' && !l.peekIs(1, '.') {
		kind = tokDecimal
		l.pos++
		for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
			l.pos++
		}
	}
	if l.pos < len(l.src) && (l.src[l.pos] == 'e' || l.src[l.pos] == 'E') {
		j := l.pos + 1
		if j < len(l.src) && (l.src[j] == '+' || l.src[j] == '-') {
			j++
		}
		if j < len(l.src) && isDigit(l.src[j]) {
			kind = tokDecimal
			for j < len(l.src) && isDigit(l.src[j]) {
				j++
			}
			l.pos = j
		}
	}
	if l.pos < len(l.src) && isIdentCont(l.src[l.pos]) {
		// 123abc, 0x1F: Postgres 15 reads a number then a word, later
		// versions an error or another base. Neither is a key.
		kind = tokDecimal
	}
	return token{kind: kind, start: start, end: l.pos}
}

// operator reads an operator run as scan.l does: a run stops before a
// comment start, and a multi-character run ending in + or - drops them
// unless it holds one of ~ ! @ # % ^ & | ` ?.
func (l *lexer) operator(start int) token {
	i := l.pos
	for i < len(l.src) && isOpChar(l.src[i]) {
		if i+1 < len(l.src) && (l.src[i] == '-' && l.src[i+1] == '-' || l.src[i] == '/' && l.src[i+1] == '*') && i > start {
			break
		}
		i++
	}
	if i-start > 1 {
		special := false
		for _, c := range l.src[start:i] {
			switch c {
			case '~', '!', '@', '#', '%', '^', '&', '|', '`', '?':
				special = true
			}
		}
		if !special {
			for i-start > 1 && (l.src[i-1] == '+' || l.src[i-1] == '-') {
				i--
			}
		}
	}
	l.pos = i
	return token{kind: tokOp, start: start, end: i}
}

// punct reports a punctuation or operator token equal to s.
func (l *lexer) punct(t token, s string) bool {
	return (t.kind == tokPunct || t.kind == tokOp) && string(l.src[t.start:t.end]) == s
}
