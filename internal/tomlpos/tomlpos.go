// Package tomlpos finds the line on which each key and array element of a
// TOML document is defined, so that strict loaders can say "file:line"
// about a value BurntSushi/toml has already decoded: that library records
// key positions but does not export them.
//
// Scan re-reads a document the decoder has accepted. It follows table
// headers (counting the elements of arrays of tables), dotted keys, and
// values far enough to index what they contain: the elements of arrays
// and the keys of inline tables, on whichever line each starts. Strings
// (all four kinds) and comments are skipped, so brackets inside them do
// not count. The input is trusted to be valid TOML; on anything else the
// scan stops early and lookups fall back to what it found.
//
// (config's admission file has an older, line-based scanner that does not
// look inside inline tables; it could move to this one.)
package tomlpos

import (
	"strconv"
	"strings"
)

// Path names a value: table keys and, for arrays, element indexes.
type Path []Elem

// Elem is one step of a Path: a key, or an array index when Key is "".
type Elem struct {
	Key   string
	Index int
}

// Key returns p extended by a key; p itself is not changed.
func (p Path) Key(k string) Path { return append(p[:len(p):len(p)], Elem{Key: k}) }

// Index returns p extended by an array index; p itself is not changed.
func (p Path) Index(i int) Path { return append(p[:len(p):len(p)], Elem{Index: i}) }

// Keys makes a path of keys.
func Keys(k ...string) Path {
	var p Path
	for _, s := range k {
		p = p.Key(s)
	}
	return p
}

// Name is the dotted TOML name of p without its indexes ("cluster.colo").
func (p Path) Name() string {
	var b strings.Builder
	for _, e := range p {
		if e.Key == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		if bare(e.Key) {
			b.WriteString(e.Key)
		} else {
			b.WriteString(strconv.Quote(e.Key))
		}
	}
	return b.String()
}

func bare(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (p Path) encode() string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 {
			b.WriteByte(0)
		}
		if e.Key == "" {
			b.WriteByte(1)
			b.WriteString(strconv.Itoa(e.Index))
		} else {
			b.WriteString(e.Key)
		}
	}
	return b.String()
}

// Lines knows the line of every key and array element Scan indexed.
type Lines struct {
	exact map[string]int // Path.encode() → line of its first definition
	free  map[string]int // the path's keys only → first line
}

// Line returns the line on which p, or else its longest indexed prefix,
// is defined; 0 when none is.
func (l *Lines) Line(p Path) int {
	for n := len(p); n > 0; n-- {
		if line, ok := l.exact[p[:n].encode()]; ok {
			return line
		}
	}
	return 0
}

// FirstLine returns the first line on which a key path without indexes
// (as BurntSushi/toml's MetaData.Keys gives it) is defined, or that of its
// longest defined prefix; 0 when none is.
func (l *Lines) FirstLine(key []string) int {
	for n := len(key); n > 0; n-- {
		if line, ok := l.free[strings.Join(key[:n], "\x00")]; ok {
			return line
		}
	}
	return 0
}

// Scan indexes a valid TOML document.
func Scan(data []byte) *Lines {
	s := &scanner{
		src:    string(data),
		line:   1,
		lines:  &Lines{exact: map[string]int{}, free: map[string]int{}},
		counts: map[string]int{},
	}
	s.document()
	return s.lines
}

type scanner struct {
	src    string
	pos    int
	line   int
	lines  *Lines
	counts map[string]int // array of tables (encoded path) → elements so far
}

func (s *scanner) record(p Path) {
	if k := p.encode(); s.lines.exact[k] == 0 {
		s.lines.exact[k] = s.line
	}
	var keys []string
	for _, e := range p {
		if e.Key != "" {
			keys = append(keys, e.Key)
		}
	}
	if k := strings.Join(keys, "\x00"); s.lines.free[k] == 0 {
		s.lines.free[k] = s.line
	}
}

func (s *scanner) peek() byte {
	if s.pos < len(s.src) {
		return s.src[s.pos]
	}
	return 0
}

func (s *scanner) eof() bool { return s.pos >= len(s.src) }

// blanks skips spaces and tabs.
func (s *scanner) blanks() {
	for !s.eof() && (s.src[s.pos] == ' ' || s.src[s.pos] == '\t') {
		s.pos++
	}
}

// toEOL skips the rest of the line (a comment, or what is left after a
// value) and the newline.
func (s *scanner) toEOL() {
	for !s.eof() && s.src[s.pos] != '\n' {
		s.pos++
	}
	if !s.eof() {
		s.pos++
		s.line++
	}
}

// space skips blanks, comments and newlines: the space inside arrays and
// (since TOML 1.1) inline tables.
func (s *scanner) space() {
	for !s.eof() {
		switch s.src[s.pos] {
		case ' ', '\t', '\r':
			s.pos++
		case '\n':
			s.pos++
			s.line++
		case '#':
			s.toEOL()
		default:
			return
		}
	}
}

func (s *scanner) document() {
	var table Path // the current table, with indexes
	for !s.eof() {
		s.blanks()
		switch c := s.peek(); {
		case c == '\n' || c == '\r' || c == '#':
			s.toEOL()
		case c == '[':
			array := strings.HasPrefix(s.src[s.pos:], "[[")
			if array {
				s.pos += 2
			} else {
				s.pos++
			}
			keys := s.key()
			if len(keys) == 0 {
				return
			}
			if array {
				arr := s.resolve(keys[:len(keys)-1]).Key(keys[len(keys)-1])
				k := arr.encode()
				table = arr.Index(s.counts[k])
				s.counts[k]++
				s.record(arr)
			} else {
				table = s.resolve(keys)
			}
			s.record(table)
			s.toEOL()
		default:
			keys := s.key()
			s.blanks()
			if len(keys) == 0 || s.peek() != '=' {
				return
			}
			s.pos++
			p := table
			for _, k := range keys {
				p = p.Key(k)
				s.record(p)
			}
			if !s.value(p) {
				return
			}
			s.toEOL()
		}
	}
}

// resolve turns a header's keys into a path: a name that is an array of
// tables stands for its last element, as in TOML.
func (s *scanner) resolve(keys []string) Path {
	var p Path
	for _, k := range keys {
		p = p.Key(k)
		if n := s.counts[p.encode()]; n > 0 {
			p = p.Index(n - 1)
		}
	}
	return p
}

// key reads a dotted key (bare, "basic" or 'literal' parts).
func (s *scanner) key() []string {
	var keys []string
	for {
		s.blanks()
		if s.eof() {
			return keys
		}
		var part string
		switch s.src[s.pos] {
		case '"':
			start := s.pos
			s.pos++
			for !s.eof() && s.src[s.pos] != '"' {
				if s.src[s.pos] == '\\' {
					s.pos++
				}
				s.pos++
			}
			s.pos++
			if s.pos > len(s.src) {
				return nil
			}
			part = s.src[start:s.pos]
			if u, err := strconv.Unquote(part); err == nil {
				part = u
			} else {
				part = part[1 : len(part)-1]
			}
		case '\'':
			end := strings.IndexByte(s.src[s.pos+1:], '\'')
			if end < 0 {
				return nil
			}
			part = s.src[s.pos+1 : s.pos+1+end]
			s.pos += end + 2
		default:
			start := s.pos
			for !s.eof() && bareByte(s.src[s.pos]) {
				s.pos++
			}
			if s.pos == start {
				return keys
			}
			part = s.src[start:s.pos]
		}
		keys = append(keys, part)
		s.blanks()
		if s.peek() != '.' {
			return keys
		}
		s.pos++
	}
}

func bareByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value skips the value at p, indexing array elements and inline-table
// keys below it; false means the document ended where it should not.
func (s *scanner) value(p Path) bool {
	s.blanks()
	if s.eof() {
		return false
	}
	switch c := s.src[s.pos]; c {
	case '"', '\'':
		return s.str(c)
	case '[':
		s.pos++
		for i := 0; ; i++ {
			s.space()
			if s.eof() {
				return false
			}
			if s.src[s.pos] == ']' {
				s.pos++
				return true
			}
			e := p.Index(i)
			s.record(e)
			if !s.value(e) {
				return false
			}
			s.space()
			if s.peek() == ',' {
				s.pos++
			}
		}
	case '{':
		s.pos++
		for {
			s.space()
			if s.eof() {
				return false
			}
			if s.src[s.pos] == '}' {
				s.pos++
				return true
			}
			keys := s.key()
			s.blanks()
			if len(keys) == 0 || s.peek() != '=' {
				return false
			}
			s.pos++
			k := p
			for _, part := range keys {
				k = k.Key(part)
				s.record(k)
			}
			if !s.value(k) {
				return false
			}
			s.space()
			if s.peek() == ',' {
				s.pos++
			}
		}
	default:
		// A number, boolean or date-time (which may hold a space): up to
		// what ends a value.
		for !s.eof() && !strings.ContainsRune(",]}#\r\n", rune(s.src[s.pos])) {
			s.pos++
		}
		return true
	}
}

// str skips a string of either kind, single- or multi-line.
func (s *scanner) str(q byte) bool {
	triple := strings.Repeat(string(q), 3)
	if strings.HasPrefix(s.src[s.pos:], triple) {
		s.pos += 3
		for !s.eof() {
			switch {
			case q == '"' && s.src[s.pos] == '\\':
				if s.pos+1 < len(s.src) && s.src[s.pos+1] == '\n' {
					s.line++
				}
				s.pos += 2
			case strings.HasPrefix(s.src[s.pos:], triple):
				s.pos += 3
				// Up to two more quotes may close the string's content.
				for i := 0; i < 2 && s.peek() == q; i++ {
					s.pos++
				}
				return true
			default:
				if s.src[s.pos] == '\n' {
					s.line++
				}
				s.pos++
			}
		}
		return false
	}
	s.pos++
	for !s.eof() && s.src[s.pos] != q {
		if q == '"' && s.src[s.pos] == '\\' {
			s.pos++
		}
		s.pos++
	}
	s.pos++
	return s.pos <= len(s.src)
}
