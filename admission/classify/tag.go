package classify

import "bytes"

// window bounds what TagOf reads at each end of a statement: a leading tag
// must end within the first window bytes, a trailing one (with the
// whitespace and ';' after it) must lie within the last window bytes.
const window = 512

// maxValueBytes bounds one decoded value; no value inside a window can be
// longer.
const maxValueBytes = window

// marker opens a leading tag: "/* pgturnstile: key=value, ... */".
const marker = "pgturnstile:"

// Tag is what a statement's comment asks for, resolved against the Policy
// that parsed it: no strings, so the pooler can keep one per prepared
// statement for free.
type Tag struct {
	gen  uint32
	prio int8  // tier + 1; 0 when the tag names no tier
	set  uint8 // bit l: the tag gives level l a value
	vals [maxLevels]uint16
}

// TagOf finds the tag of a statement, without parsing SQL:
//
//   - leading: after optional whitespace, a comment that starts with
//     "pgturnstile:" and ends within the first 512 bytes,
//     /* pgturnstile: priority=low, category=web/search */ SELECT …
//   - trailing, sqlcommenter style: the comment that ends the statement
//     (whitespace and one ';' after it aside) and starts within its last
//     512 bytes, … /*category='web%2Fsearch',priority='low'*/
//
// Pairs are key=value or key='value', separated by commas or whitespace;
// values are URL-decoded, and in quotes a backslash escapes the next byte.
// A malformed comment (no '=', an unclosed quote, a bad %XX, a nested
// comment) is no tag. If the leading comment gives nothing this policy
// knows, the trailing one is tried. ok says whether the tag sets a tier or
// a category value.
func (p *Policy) TagOf(sql []byte) (t Tag, ok bool) {
	if body, found := leadingComment(sql); found {
		if t, ok = p.parseTag(body); ok {
			return t, true
		}
	}
	if body, found := trailingComment(sql); found {
		return p.parseTag(body)
	}
	return Tag{}, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// leadingComment returns the body of a leading pgturnstile comment after
// its marker.
func leadingComment(sql []byte) ([]byte, bool) {
	w := sql[:min(len(sql), window)]
	i := 0
	for i < len(w) && isSpace(w[i]) {
		i++
	}
	if !bytes.HasPrefix(w[i:], []byte("/*")) {
		return nil, false
	}
	rest := w[i+2:]
	end := bytes.Index(rest, []byte("*/"))
	if end < 0 {
		return nil, false // longer than the window, or not closed
	}
	body := rest[:end]
	if bytes.Contains(body, []byte("/*")) {
		// Postgres nests comments: this one does not end where we think.
		return nil, false
	}
	body = bytes.TrimLeft(body, " \t\n\r\f\v")
	if !bytes.HasPrefix(body, []byte(marker)) {
		return nil, false
	}
	return body[len(marker):], true
}

// trailingComment returns the body of the comment that ends sql, without
// an optional marker.
func trailingComment(sql []byte) ([]byte, bool) {
	w := sql[max(0, len(sql)-window):]
	end := len(w)
	for end > 0 && isSpace(w[end-1]) {
		end--
	}
	if end > 0 && w[end-1] == ';' {
		end--
		for end > 0 && isSpace(w[end-1]) {
			end--
		}
	}
	if end < 4 || w[end-2] != '*' || w[end-1] != '/' {
		return nil, false
	}
	inner := w[:end-2]
	start := bytes.LastIndex(inner, []byte("/*"))
	if start < 0 {
		return nil, false // longer than the window, or not a comment
	}
	body := inner[start+2:]
	if bytes.Contains(body, []byte("*/")) {
		// "/* a /* b */ c */": the comment that ends sql is nested.
		return nil, false
	}
	t := bytes.TrimLeft(body, " \t\n\r\f\v")
	if bytes.HasPrefix(t, []byte(marker)) {
		body = t[len(marker):]
	}
	return body, true
}

func isSep(c byte) bool { return c == ',' || isSpace(c) }

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parseTag reads the pairs of a comment body into a Tag.
func (p *Policy) parseTag(body []byte) (Tag, bool) {
	t := Tag{gen: p.gen}
	var buf [maxValueBytes]byte
	i := 0
	for {
		for i < len(body) && isSep(body[i]) {
			i++
		}
		if i == len(body) {
			break
		}
		ks := i
		for i < len(body) && body[i] != '=' && body[i] != '\'' && !isSep(body[i]) {
			i++
		}
		if i == ks || i == len(body) || body[i] != '=' {
			return Tag{}, false
		}
		key := body[ks:i]
		i++
		quoted := i < len(body) && body[i] == '\''
		if quoted {
			i++
		}
		// Decoding never lengthens a value, and body fits in buf.
		n := 0
		closed := false
		for i < len(body) {
			c := body[i]
			if quoted {
				if c == '\'' {
					i++
					closed = true
					break
				}
				if c == '\\' && i+1 < len(body) {
					buf[n] = body[i+1]
					n++
					i += 2
					continue
				}
			} else if isSep(c) {
				break
			}
			if c == '%' {
				if i+2 >= len(body) {
					return Tag{}, false
				}
				hi, ok1 := unhex(body[i+1])
				lo, ok2 := unhex(body[i+2])
				if !ok1 || !ok2 {
					return Tag{}, false
				}
				c = hi<<4 | lo
				i += 2
			}
			buf[n] = c
			n++
			i++
		}
		if quoted && (!closed || i < len(body) && !isSep(body[i])) {
			return Tag{}, false
		}
		if n == 0 {
			return Tag{}, false
		}
		if prio, ok := p.apply(key, buf[:n], &t.vals, &t.set); ok {
			t.prio = prio + 1
		}
	}
	if t.prio == 0 && t.set == 0 {
		return Tag{}, false
	}
	return t, true
}
