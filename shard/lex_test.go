package shard

import (
	"bytes"
	"strings"
	"testing"
)

// refKeyword is what keywordAt must say: the identifier folded as
// Postgres folds it (ASCII letters only), looked up by name.
func refKeyword(w []byte) keyword {
	folded := bytes.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, w)
	for k := kwNone + 1; k < kwCount; k++ {
		if kwNames[k] == string(folded) {
			return k
		}
	}
	return kwNone
}

// TestKeywordAt: the perfect hash names every keyword in any case, at
// any place in the text (the end included, where fewer than 16 bytes can
// be loaded), and nothing else: words one byte off, longer or shorter,
// with '_', '$', digits or bytes ≥ 0x80 where a keyword has letters.
func TestKeywordAt(t *testing.T) {
	var words []string
	for k := kwNone + 1; k < kwCount; k++ {
		name := kwNames[k]
		words = append(words, name, strings.ToUpper(name), strings.ToUpper(name[:1])+name[1:],
			name+"s", name[:len(name)-1], name+"_", "_"+name, name+"$", name+"1")
		for i := range name {
			for _, c := range []byte{'_', '$', '0', 'x', 0xc1, 0xe1, name[i] ^ 0x20, name[i] + 1} {
				w := []byte(name)
				w[i] = c
				words = append(words, string(w))
			}
		}
	}
	words = append(words, "a", "x", "pg_catalogue", "tablesamples", "Int8", "INT2", "int16")
	var idents []string
	for _, w := range words {
		if !isIdent(w) {
			continue // keywordAt is only asked about identifiers
		}
		idents = append(idents, w)
		for _, pad := range []string{"", " ", strings.Repeat(" ", 20)} {
			src := []byte("(" + w + pad)
			if got, want := keywordAt(src, 1, 1+len(w)), refKeyword([]byte(w)); got != want {
				t.Errorf("%q (pad %d): %v, want %v", w, len(pad), got, want)
			}
		}
	}
	// tokenize names the short ones itself: the same words in a text.
	s := &Scanner{Tables: tables}
	for _, sep := range []string{" ", ",", "\n\t"} {
		checkTokens(t, s, []byte(strings.Join(idents, sep)))
	}
}

func isIdent(w string) bool {
	if w == "" || !isIdentStart(w[0]) {
		return false
	}
	for i := 1; i < len(w); i++ {
		if !isIdentCont(w[i]) {
			return false
		}
	}
	return true
}

// TestTokenizeMatchesLex: the scanner's loop, which reads the common
// tokens itself, makes the tokens lexer.lex makes.
func TestTokenizeMatchesLex(t *testing.T) {
	stmts := append([]string{}, scanSeeds...)
	for _, sh := range routeShapes {
		stmts = append(stmts, sh.sql)
	}
	stmts = append(stmts, "a.b.1.5e3 1..2 x::int $1 $a$ $ $a$ u&'x' U&\"y\" e'\\'' n'x' b'1' X'f' ;;",
		"SELECT 1+-2, a<>b, c*-d, e--x\n, f/*y*/g, h::text[], i[1:2] , 0x1F, 123abc, .5, 5., 1e, 1e+",
		"SELECT a<=b, a>=b, a!=b, a||b, a<>-1, a<=-b, a||/*c*/b, a|| --c\nb, a<>'x', a=<b, a>=", "a<>", "a||", "a<=",
		// Qualified names, whose parts are no keywords, beside what is not one.
		"SELECT t.from, s.t.order, a.b.c.d, t .select, t. where, t.e'x', t.E'y', t.u&'z', t.U&\"w\", t.n'v', t.nb, t.u&x, t.b'1'",
		"SELECT 1.from, $1.select, 'a'.where, \"q\".from, t.\"where\", t.*, t.1, t.$1, t., .t, t..from, t.1e5, x.$a$b$a$.c, end.",
		"SELECT pg_catalog.int8, PG_CATALOG.BIGINT, t.x$, t$.x, _.a, \x80.b, a.\x80")
	s := &Scanner{Tables: tables}
	for _, sql := range stmts {
		checkTokens(t, s, []byte(sql))
	}
}

// checkTokens holds the tokens tokenize makes of src to lexer.next's, but
// for their depth, which lexer.next does not count. Where tokenize stops
// at a bad token, the lexer must meet the same one there.
func checkTokens(t *testing.T, s *Scanner, src []byte) {
	t.Helper()
	_, ok := s.tokenize(src)
	lx := lexer{src: src, escapeStrings: s.EscapeStrings}
	for i := 0; ; i++ {
		want := lx.next()
		if want.kind == tokEOF {
			if !ok || i != len(s.toks) {
				t.Fatalf("%q: tokenize made %d tokens (ok %v), the lexer %d", src, len(s.toks), ok, i)
			}
			return
		}
		if i >= len(s.toks) {
			t.Fatalf("%q: tokenize made %d tokens (ok %v), the lexer more", src, len(s.toks), ok)
		}
		got := s.toks[i]
		got.depth = 0
		if got != want {
			t.Fatalf("%q: token %d %+v, the lexer's %+v", src, i, got, want)
		}
		if want.kind == tokBad {
			if ok || i != len(s.toks)-1 {
				t.Fatalf("%q: the lexer's token %d is bad, tokenize went on (ok %v, %d tokens)", src, i, ok, len(s.toks))
			}
			return
		}
	}
}

// TestTokenizePlainStrings: the strings tokenize's loop reads itself
// (plain '…' with nothing after it that could continue it) and the ones
// it leaves to the lexer (a doubled quote, a string continued after a
// newline, a comment after its blanks, an unclosed one, backslash
// escapes) come out as lexer.lex makes them, in
// either setting of standard_conforming_strings, and a ';' or a key inside
// one is text.
func TestTokenizePlainStrings(t *testing.T) {
	stmts := []string{
		`SELECT 'a', 'b' ,'c'`, `SELECT 'it''s'`, `SELECT ''''`, `SELECT ''`, `SELECT 'a' 'b'`,
		"SELECT 'a'\n'b'", "SELECT 'a' \t\n 'b'", "SELECT 'a'\r'b'", "SELECT 'a'\f'b'",
		"SELECT 'a' -- c\n'b'", "SELECT 'a'/* c\n*/'b'", "SELECT 'a' --", "SELECT 'a'/",
		"SELECT 'a'-1", "SELECT 'a'", "SELECT 'a' ", "SELECT 'a", "SELECT '", `SELECT 'a\'`, `SELECT 'a\'' x'`,
		"SELECT 'x;y' ; SELECT 'org_id = 1'", `SELECT 'a''b' FROM files WHERE org_id = '7'`,
		"SELECT 'a'\n  AND x", "SELECT 'a'\r\n\tFROM t", "SELECT 'a'\n\n'b'", "SELECT 'a'\n -- c\n'b'", "SELECT 'a'\n/**/'b'", "SELECT 'a'\n",
	}
	for _, esc := range []bool{false, true} {
		s := &Scanner{Tables: tables, EscapeStrings: esc}
		for _, sql := range stmts {
			checkTokens(t, s, []byte(sql))
		}
	}
	s := &Scanner{Tables: tables}
	for sql, want := range map[string]Outcome{
		`SELECT * FROM files WHERE name = 'x; org_id = 1'`:                         Refused,
		`SELECT * FROM files WHERE org_id = 'a;b'`:                                 Keyed,
		"SELECT * FROM files WHERE org_id = 'a'\n'b'":                              Refused, // joined: no key the scanner takes
		`SELECT 'a'; SELECT * FROM files WHERE name = 'x'`:                         Refused,
		`SELECT * FROM files WHERE org_id = 1 AND name = 'x'; SELECT * FROM files`: Refused,
	} {
		if r := s.Scan([]byte(sql)); r.Outcome != want {
			t.Errorf("%s: %v, want %v", sql, r.Outcome, want)
		}
	}
}
