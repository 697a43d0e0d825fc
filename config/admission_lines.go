package config

import (
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// keyLines knows on which line each key of a TOML document is defined.
// BurntSushi/toml records key positions but does not export them, so this
// re-reads the (already valid) document line by line: table headers, array
// of tables headers (counting their elements), "key = value" lines, and
// just enough of each value (strings, brackets, comments) to skip values
// that span lines. Keys inside inline tables are not indexed; a lookup
// falls back to the nearest enclosing key that is.
type keyLines struct {
	exact map[string]int // path with array indexes → line
	first map[string]int // path without indexes → its first line
}

func (kl keyLines) line(p keyPath) int {
	for n := len(p); n > 0; n-- {
		if l, ok := kl.exact[encodePath(p[:n])]; ok {
			return l
		}
	}
	return 0
}

func (kl keyLines) firstLine(k toml.Key) int {
	for n := len(k); n > 0; n-- {
		if l, ok := kl.first[strings.Join(k[:n], "\x00")]; ok {
			return l
		}
	}
	return 0
}

// encodePath makes a map key of p; NUL and SOH cannot collide with a
// path's own text in any way that matters for a line lookup.
func encodePath(p keyPath) string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 {
			b.WriteByte(0)
		}
		if e.key == "" {
			b.WriteByte(1)
			b.WriteString(strconv.Itoa(e.index))
		} else {
			b.WriteString(e.key)
		}
	}
	return b.String()
}

func scanKeyLines(data []byte) keyLines {
	kl := keyLines{exact: map[string]int{}, first: map[string]int{}}
	counts := map[string]int{} // array of tables (with indexes) → elements
	var table keyPath          // the current table, with indexes
	var tableFree []string     // the same without indexes
	var v valueSkipper
	record := func(p keyPath, free []string, n int) {
		if k := encodePath(p); kl.exact[k] == 0 {
			kl.exact[k] = n
		}
		if k := strings.Join(free, "\x00"); kl.first[k] == 0 {
			kl.first[k] = n
		}
	}
	// resolve turns header keys into a path: a name that is an array of
	// tables stands for its last element, as in TOML.
	resolve := func(comps []string) keyPath {
		var p keyPath
		for _, c := range comps {
			p = p.key(c)
			if n := counts[encodePath(p)]; n > 0 {
				p = p.index(n - 1)
			}
		}
		return p
	}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		s := line
		if v.pending() {
			v.skip(s)
			continue
		}
		s = strings.TrimLeft(s, " \t")
		if s == "" || s[0] == '#' {
			continue
		}
		if s[0] == '[' {
			array := strings.HasPrefix(s, "[[")
			rest := s[1:]
			if array {
				rest = s[2:]
			}
			comps, _ := parseTOMLKey(rest)
			if len(comps) == 0 {
				continue
			}
			tableFree = comps
			if !array {
				table = resolve(comps)
				record(table, comps, n)
				continue
			}
			arr := resolve(comps[:len(comps)-1]).key(comps[len(comps)-1])
			k := encodePath(arr)
			table = arr.index(counts[k])
			counts[k]++
			record(arr, comps, n)
			record(table, comps, n)
			continue
		}
		comps, rest := parseTOMLKey(s)
		rest = strings.TrimLeft(rest, " \t")
		if len(comps) == 0 || !strings.HasPrefix(rest, "=") {
			continue
		}
		p, free := table, append([]string(nil), tableFree...)
		for _, c := range comps {
			p = p.key(c)
			free = append(free, c)
			record(p, free, n)
		}
		v.skip(rest[1:])
	}
	return kl
}

// parseTOMLKey reads a dotted key (bare, "basic" or 'literal' parts) from
// the start of s and returns its parts and what follows.
func parseTOMLKey(s string) (comps []string, rest string) {
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return comps, s
		}
		var part string
		switch s[0] {
		case '"':
			end := 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return comps, ""
			}
			part = s[:end+1]
			if u, err := strconv.Unquote(part); err == nil {
				part = u
			} else {
				part = part[1 : len(part)-1]
			}
			s = s[end+1:]
		case '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return comps, ""
			}
			part, s = s[1:end+1], s[end+2:]
		default:
			end := strings.IndexAny(s, " \t=.]#")
			if end < 0 {
				end = len(s)
			}
			if end == 0 {
				return comps, s
			}
			part, s = s[:end], s[end:]
		}
		comps = append(comps, part)
		s = strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(s, ".") {
			return comps, s
		}
		s = s[1:]
	}
}

// valueSkipper follows a value across lines: open brackets and multi-line
// strings continue it, a comment ends the line.
type valueSkipper struct {
	depth int    // open [ and {
	ml    string // the delimiter of an open multi-line string
}

func (v *valueSkipper) pending() bool { return v.depth > 0 || v.ml != "" }

func (v *valueSkipper) skip(s string) {
	for i := 0; i < len(s); {
		if v.ml != "" {
			if v.ml == `"""` && s[i] == '\\' {
				i += 2
				continue
			}
			if strings.HasPrefix(s[i:], v.ml) {
				i += 3
				v.ml = ""
				continue
			}
			i++
			continue
		}
		switch c := s[i]; c {
		case '#':
			return
		case '"', '\'':
			if d := strings.Repeat(string(c), 3); strings.HasPrefix(s[i:], d) {
				v.ml = d
				i += 3
				continue
			}
			i++
			for i < len(s) && s[i] != c {
				if c == '"' && s[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case '[', '{':
			v.depth++
			i++
		case ']', '}':
			v.depth--
			i++
		default:
			i++
		}
	}
}
