package shard

import (
	"bytes"
	"encoding/binary"
	"math"
)

// The lexer: Postgres's tokens (src/backend/parser/scan.l) as byte ranges
// of the statement, without allocation. It knows exactly as much as the
// scanner needs to never mistake text inside a string, a quoted
// identifier, a comment or a dollar quote for SQL: what it cannot place
// it marks as a bad token, and the scanner refuses rather than guesses.
//
// It is on the path of every routed statement (issue 34: ≤ 1 µs for 512
// bytes), so it dispatches on a table of byte classes, names keywords by
// a perfect hash, skips the bodies of strings with bytes.IndexByte, and
// makes tokens small (16 bytes) for the scanner's many passes over them.

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

// chCast is token.ch for '::', which has no one character of its own.
const chCast byte = 1

// maxLexLen is the longest text whose tokens the lexer can place: a
// token's positions are int32, which keeps a token at 16 bytes. Postgres
// takes no message of 1 GiB or more, so no statement comes near it.
const maxLexLen = math.MaxInt32

// token is one token: its kind and where it lies in the statement.
// For a string or a quoted identifier, [start,end) covers the whole
// literal with its quotes; body gives its text inside.
type token struct {
	start, end int32
	// depth is how many ( and [ enclose the token; a closing one is
	// outside its own pair. The scanner fills it in.
	depth int32
	kind  tokKind
	// kw is the keyword an unquoted identifier is, if any.
	kw keyword
	// ch is the character of a one-character tokPunct or tokOp (chCast
	// for '::'), 0 for any other token: the scanner tests punctuation by
	// one comparison instead of slicing the statement.
	ch byte
	// form (tokString): how the string is written; strJoined is set when
	// another string follows it after a newline, which Postgres
	// concatenates ('a'\n'b' is 'ab').
	form strForm
}

// strJoined is a bit of token.form; see there.
const strJoined strForm = 1 << 7

// strForm is a string token's form without the joined bit.
func (t token) strForm() strForm { return t.form &^ strJoined }

// joined reports a string that another one continues ('a'\n'b').
func (t token) joined() bool { return t.form&strJoined != 0 }

// body returns the text inside a string's or a quoted identifier's
// quotes. Its start is not kept in the token: it follows from how the
// token opens (a quote, a one or two-byte prefix, or a dollar tag).
func (t token) body(src []byte) []byte {
	s, e := int(t.start), int(t.end)
	switch {
	case src[s] == '\'' || src[s] == '"':
		return src[s+1 : e-1]
	case src[s] == '$':
		tag := bytes.IndexByte(src[s+1:e], '$') + 2 // $tag$
		return src[s+tag : e-tag]
	case src[s+1] == '&': // U&'…', U&"…"
		return src[s+3 : e-1]
	}
	return src[s+2 : e-1] // E'…', N'…', B'…', X'…'
}

// lexer walks a statement one token at a time.
type lexer struct {
	src []byte
	pos int
	// escapeStrings: standard_conforming_strings is off, so '…' takes
	// backslash escapes as E'…' does.
	escapeStrings bool
	// lastBlock is where the body of the last /* … */ comment skipped
	// lies (end 0: none), for the trailing hint; a comment with another
	// nested in it does not count.
	lastBlock  [2]int
	lastNested bool
	// partAt is where the name after a qualifier's '.' starts (0: no
	// qualifier just read), for ident: see qualifies.
	partAt int
}

// Character classes, one table lookup per byte on the lexer's hot path.
const (
	clSpace      = 1 << iota // [ \t\n\r\f\v]
	clIdentStart             // [A-Za-z_\x80-\xff]
	clDigit                  // [0-9]
	clDollar                 // $, which goes on an identifier
	clIdentCont  = clIdentStart | clDigit | clDollar
)

var charClass = func() (t [256]uint8) {
	for _, c := range []byte(" \t\n\r\f\v") {
		t[c] = clSpace
	}
	for c := 0; c < 256; c++ {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80 {
			t[c] = clIdentStart
		}
		if c >= '0' && c <= '9' {
			t[c] = clDigit
		}
	}
	t['$'] = clDollar
	return t
}()

func isIdentStart(c byte) bool { return charClass[c]&clIdentStart != 0 }

// isIdentCont: identifiers go on with letters, digits and '$'.
func isIdentCont(c byte) bool { return charClass[c]&clIdentCont != 0 }

func isDigit(c byte) bool { return charClass[c]&clDigit != 0 }

// Token starts: what a token's first byte may open, so that next
// dispatches with one table lookup and a jump table rather than a chain
// of comparisons.
const (
	startBad    = iota // a byte no token starts with
	startIdent         // a letter (not one below), '_' or a byte ≥ 0x80
	startPrefix        // E N B X U, either case: maybe a string's prefix
	startDigit
	startDot    // '.': punctuation, or a number's point
	startColon  // ':' or '::'
	startPunct  // , ( ) [ ] ;
	startOp     // an operator character
	startQuote  // '
	startDQuote // "
	startDollar // $
)

var startClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case isIdentStart(byte(c)):
			t[c] = startIdent
		case isDigit(byte(c)):
			t[c] = startDigit
		case isOpChar(byte(c)):
			t[c] = startOp
		}
	}
	for _, c := range []byte("EeNnBbXxUu") {
		t[c] = startPrefix
	}
	for _, c := range []byte(",()[];") {
		t[c] = startPunct
	}
	t['.'], t[':'], t['\''], t['"'], t['$'] = startDot, startColon, startQuote, startDQuote, startDollar
	return t
}()

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
	src := l.src
	for l.pos < len(src) {
		c := src[l.pos]
		switch {
		case charClass[c]&clSpace != 0:
			if c == '\n' || c == '\r' {
				newline = true
			}
			l.pos++
		case c == '-' && l.pos+1 < len(src) && src[l.pos+1] == '-':
			for l.pos < len(src) && src[l.pos] != '\n' && src[l.pos] != '\r' {
				l.pos++
			}
		case c == '/' && l.pos+1 < len(src) && src[l.pos+1] == '*':
			// Comments nest in Postgres.
			depth := 0
			open := l.pos
			nested := false
			for {
				if l.pos+1 >= len(src) {
					l.pos = len(src)
					return false, newline
				}
				if src[l.pos] == '/' && src[l.pos+1] == '*' {
					depth++
					nested = depth > 1
					l.pos += 2
					continue
				}
				if src[l.pos] == '*' && src[l.pos+1] == '/' {
					depth--
					l.pos += 2
					if depth == 0 {
						l.lastBlock = [2]int{open + 2, l.pos - 2}
						l.lastNested = nested
						break
					}
					continue
				}
				if src[l.pos] == '\n' || src[l.pos] == '\r' {
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
func (l *lexer) next() (t token) {
	l.lex(&t)
	return t
}

// set makes *t a token of [start, l.pos). The lexer fills a token in
// place, where the scanner keeps it: a token built in registers and
// copied whole is stored a byte at a time and read back 16 bytes at once,
// which the processor cannot forward, and that stall cost more than all
// the rest of lexing a token.
func (l *lexer) set(t *token, kind tokKind, start int) {
	t.kind, t.start, t.end = kind, int32(start), int32(l.pos)
}

// lex reads the next token into *t, which is zero.
func (l *lexer) lex(t *token) {
	// Plain blanks here, comments (rarer) in skipSpace.
	src, p := l.src, l.pos
	for p < len(src) && charClass[src[p]]&clSpace != 0 {
		p++
	}
	l.pos = p
	if p+1 < len(src) && (src[p] == '-' || src[p] == '/') {
		if ok, _ := l.skipSpace(); !ok {
			l.set(t, tokBad, l.pos)
			return
		}
	}
	if l.pos >= len(l.src) {
		l.set(t, tokEOF, l.pos)
		return
	}
	start := l.pos
	c := l.src[start]
	switch startClass[c] {
	case startPrefix:
		switch {
		case (c == 'E' || c == 'e') && l.peekIs(1, '\''):
			l.pos++
			l.str(t, start, strEscape)
			return
		case (c == 'N' || c == 'n') && l.peekIs(1, '\''):
			l.pos++
			l.str(t, start, l.plainForm())
			return
		case (c == 'B' || c == 'b' || c == 'X' || c == 'x') && l.peekIs(1, '\''):
			l.pos++
			l.str(t, start, strPlain)
			if t.kind == tokString {
				t.kind = tokBits
			}
			return
		case (c == 'U' || c == 'u') && l.peekIs(1, '&') && l.peekIs(2, '\''):
			l.pos += 2
			l.str(t, start, strUnicode)
			return
		case (c == 'U' || c == 'u') && l.peekIs(1, '&') && l.peekIs(2, '"'):
			l.pos += 2
			l.quotedIdent(t, start)
			if t.kind == tokQIdent {
				// Its escapes are not decoded: it names nothing the scanner
				// can match, so it is a token of its own kind of unknown.
				t.kind = tokBad
			}
			return
		}
		l.ident(t, start)
	case startIdent:
		l.ident(t, start)
	case startDQuote:
		l.quotedIdent(t, start)
	case startQuote:
		l.str(t, start, l.plainForm())
	case startDollar:
		if l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]) {
			l.pos++
			for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
				l.pos++
			}
			l.set(t, tokParam, start)
			return
		}
		l.dollar(t, start)
	case startDigit:
		l.number(t, start)
	case startDot:
		if l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]) {
			l.number(t, start)
			return
		}
		l.punct(t, start)
	case startColon:
		if l.peekIs(1, ':') {
			l.pos += 2
			l.set(t, tokOp, start)
			t.ch = chCast
			return
		}
		l.punct(t, start)
	case startPunct:
		l.punct(t, start)
	case startOp:
		l.operator(t, start)
	default:
		l.pos++
		l.set(t, tokBad, start)
	}
}

// punct reads one character of punctuation.
func (l *lexer) punct(t *token, start int) {
	l.pos++
	l.set(t, tokPunct, start)
	t.ch = l.src[start]
}

// ident reads an unquoted identifier and names the keyword it is.
func (l *lexer) ident(t *token, start int) {
	src := l.src
	p := start + 1
	for p < len(src) && charClass[src[p]]&clIdentCont != 0 {
		p++
	}
	l.pos = p
	l.set(t, tokIdent, start)
	qual := qualifies(src, p)
	if qual {
		l.partAt = p + 1
	}
	if qual || start == l.partAt && start > 0 {
		return // a part of a qualified name is no keyword
	}
	t.kw = keywordAt(src, start, p)
}

// qualifies reports that an unquoted identifier ending at end qualifies
// the name after it: a '.' follows at once, and then an unquoted
// identifier (not a string's prefix, E'…', nor U&). Neither that
// identifier nor the name after its '.' is looked up as a keyword: in
// t.c, s.t.c, t.order or from.x no part starts a clause, a join, a
// subquery or a condition (Postgres takes any word after the dot as a
// name, and a reserved word before it is a syntax error), and looking
// them up was a third of the keyword lookups of a statement with
// qualified columns. tokenize and lexer.ident apply the same rule.
func qualifies(src []byte, end int) bool {
	if end+1 >= len(src) || src[end] != '.' {
		return false
	}
	switch startClass[src[end+1]] {
	case startIdent:
		return true
	case startPrefix:
		return end+2 >= len(src) || src[end+2] != '\'' && src[end+2] != '&'
	}
	return false
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
func (l *lexer) str(t *token, start int, form strForm) {
	src := l.src
	l.pos++ // the quote
	for l.pos < len(src) {
		if form == strEscape {
			c := src[l.pos]
			if c == '\\' {
				l.pos += 2
				continue
			}
			if c != '\'' {
				l.pos++
				continue
			}
		} else {
			// Without backslashes only a quote matters: find it at
			// memchr's speed rather than a byte at a time.
			q := bytes.IndexByte(src[l.pos:], '\'')
			if q < 0 {
				break
			}
			l.pos += q
		}
		// A quote: doubled it is one quote of the text, else the end.
		if l.peekIs(1, '\'') {
			l.pos += 2
			continue
		}
		l.pos++
		l.set(t, tokString, start)
		t.form = form
		// A string continued after a newline: 'a'\n'b'.
		save := l.pos
		if ok, nl := l.skipSpace(); ok && nl && l.pos < len(src) && src[l.pos] == '\'' {
			t.form |= strJoined
		}
		l.pos = save
		return
	}
	l.pos = len(src)
	l.set(t, tokBad, start)
}

func (l *lexer) quotedIdent(t *token, start int) {
	src := l.src
	l.pos++
	body := l.pos
	for l.pos < len(src) {
		q := bytes.IndexByte(src[l.pos:], '"')
		if q < 0 {
			break
		}
		l.pos += q
		if l.peekIs(1, '"') {
			l.pos += 2
			continue
		}
		empty := l.pos == body
		l.pos++
		if empty {
			l.set(t, tokBad, start) // "" is a zero-length identifier: an error in Postgres
			return
		}
		l.set(t, tokQIdent, start)
		return
	}
	l.pos = len(src)
	l.set(t, tokBad, start)
}

// dollar reads a dollar-quoted string, or a lone '$' (bad).
func (l *lexer) dollar(t *token, start int) {
	src := l.src
	i := l.pos + 1
	if i < len(src) && isIdentStart(src[i]) {
		for i < len(src) && (isIdentStart(src[i]) || isDigit(src[i])) {
			i++
		}
	}
	if i >= len(src) || src[i] != '$' {
		l.pos++
		l.set(t, tokBad, start)
		return
	}
	tag := src[l.pos : i+1] // $tag$
	body := i + 1
	if j := bytes.Index(src[body:], tag); j >= 0 {
		l.pos = body + j + len(tag)
		l.set(t, tokString, start)
		t.form = strDollar
		return
	}
	l.pos = len(src)
	l.set(t, tokBad, start)
}

func (l *lexer) number(t *token, start int) {
	src := l.src
	kind := tokNumber
	for l.pos < len(src) && isDigit(src[l.pos]) {
		l.pos++
	}
	// "1..2" is 1 followed by "..": only a point followed by what is not
	// a second point makes a decimal.
	if l.pos < len(src) && src[l.pos] == '.' && !l.peekIs(1, '.') {
		kind = tokDecimal
		l.pos++
		for l.pos < len(src) && isDigit(src[l.pos]) {
			l.pos++
		}
	}
	if l.pos < len(src) && (src[l.pos] == 'e' || src[l.pos] == 'E') {
		j := l.pos + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			kind = tokDecimal
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			l.pos = j
		}
	}
	if l.pos < len(src) && isIdentCont(src[l.pos]) {
		// 123abc, 0x1F: Postgres 15 reads a number then a word, later
		// versions an error or another base. Neither is a key.
		kind = tokDecimal
	}
	l.set(t, kind, start)
}

// operator reads an operator run as scan.l does: a run stops before a
// comment start, and a multi-character run ending in + or - drops them
// unless it holds one of ~ ! @ # % ^ & | ` ?.
func (l *lexer) operator(t *token, start int) {
	src := l.src
	i := l.pos
	for i < len(src) && isOpChar(src[i]) {
		if i+1 < len(src) && (src[i] == '-' && src[i+1] == '-' || src[i] == '/' && src[i+1] == '*') && i > start {
			break
		}
		i++
	}
	if i-start > 1 {
		special := false
		for _, c := range src[start:i] {
			switch c {
			case '~', '!', '@', '#', '%', '^', '&', '|', '`', '?':
				special = true
			}
		}
		if !special {
			for i-start > 1 && (src[i-1] == '+' || src[i-1] == '-') {
				i--
			}
		}
	}
	l.pos = i
	l.set(t, tokOp, start)
	if i-start == 1 {
		t.ch = src[start]
	}
}

// keywordAt names the keyword src[start:end] (an identifier) is, if any.
// The identifier's first 16 bytes are loaded as two words and folded to
// lower case by setting bit 5 of every byte: over the bytes an
// identifier holds that maps A-Z to a-z and changes neither digits nor
// '$', while '_' becomes 0x7f and a byte ≥ 0x80 stays ≥ 0x80, neither of
// which is a letter's or a digit's, so two identifiers fold alike exactly
// when they are equal up to ASCII case (Postgres's folding). The first
// word's hash then names the one keyword it can be.
func keywordAt(src []byte, start, end int) keyword {
	n := end - start
	if n > kwMaxLen || kwInitials[n]&(1<<(src[start]&31)) == 0 {
		return kwNone // most identifiers: no keyword of that length starts so
	}
	w0, w1 := foldWords(src, start, n)
	e := &kwEntries[kwSlots[kwHash(w0)]]
	if e.w0 != w0 || int(e.n) != n || e.w1 != w1 {
		return kwNone
	}
	return e.kw
}

// byteMask[n] keeps the low n bytes of a word.
var byteMask = [9]uint64{0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff, 0xffffffffffffffff}

// foldWords loads n ≤ 16 bytes from src[start:] as two little-endian
// words (bytes past n zero) folded as keywordAt says.
func foldWords(src []byte, start, n int) (w0, w1 uint64) {
	const fold uint64 = 0x2020202020202020
	if start+16 <= len(src) {
		w0 = binary.LittleEndian.Uint64(src[start:])
		w1 = binary.LittleEndian.Uint64(src[start+8:])
	} else {
		var buf [16]byte
		copy(buf[:], src[start:])
		w0 = binary.LittleEndian.Uint64(buf[:])
		w1 = binary.LittleEndian.Uint64(buf[8:])
	}
	if n <= 8 {
		// A shift by 64 is 0 in Go: 8 bytes keep all of w0.
		return (w0 | fold) & (uint64(1)<<(8*n) - 1), 0
	}
	return w0 | fold, (w1 | fold) & (uint64(1)<<(8*(n-8)) - 1)
}
