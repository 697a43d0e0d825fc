package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ParseError is a problem in a config or userlist file, with its location.
type ParseError struct {
	File string
	Line int // 1-based; 0 = the whole file
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

const (
	// maxIncludeDepth bounds %include nesting, as libusual does.
	maxIncludeDepth = 10
	// maxFileSize bounds what one config or userlist file may hold.
	maxFileSize = 64 << 20
)

// Load reads pgbouncer.ini and every file it %includes.
func Load(path string) (*Config, error) {
	data, err := readRegularFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load config file: %w", err)
	}
	return Parse(path, data)
}

// Parse parses pgbouncer.ini from data; path names it in errors and is the
// base for %include files, which are read from disk.
func Parse(path string, data []byte) (*Config, error) {
	return parse(path, data, readRegularFile)
}

// readRegularFile reads a file, refusing devices and FIFOs (a %include of
// /dev/zero must not hang the loader) and files over maxFileSize.
func readRegularFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}

func parse(path string, data []byte, read func(string) ([]byte, error)) (*Config, error) {
	c := Default()
	c.Path = path
	p := &parser{c: c, read: read, warned: map[string]bool{}}
	if err := p.file(path, data); err != nil {
		return nil, err
	}
	return c, nil
}

type parser struct {
	c       *Config
	read    func(string) ([]byte, error)
	section string   // current section, lower case; "" before the first
	stack   []string // files being read (absolute), outermost first
	warned  map[string]bool
}

func (p *parser) warn(once, file string, line int, format string, args ...any) {
	if p.warned[once] {
		return
	}
	p.warned[once] = true
	p.c.Warnings = append(p.c.Warnings, fmt.Sprintf(format, args...)+fmt.Sprintf(" (%s:%d)", file, line))
}

func absPath(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return filepath.Clean(path)
}

// file parses one file. The current section carries over %include
// boundaries in both directions, as in PgBouncer.
func (p *parser) file(name string, data []byte) error {
	p.stack = append(p.stack, absPath(name))
	defer func() { p.stack = p.stack[:len(p.stack)-1] }()
	text := string(data)
	for n := 1; text != ""; n++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		if err := p.line(name, n, line); err != nil {
			return err
		}
	}
	return nil
}

const blanks = " \t\r\n\v\f"

func isBlank(c byte) bool { return strings.IndexByte(blanks, c) >= 0 }

func (p *parser) line(file string, n int, line string) error {
	errf := func(format string, args ...any) error {
		return &ParseError{File: file, Line: n, Msg: fmt.Sprintf(format, args...)}
	}
	s := strings.Trim(line, blanks)
	if s == "" || s[0] == '#' || s[0] == ';' {
		return nil
	}
	switch s[0] {
	case '[':
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return errf("syntax error in configuration: missing ']'")
		}
		if rest := strings.TrimLeft(s[end+1:], blanks); rest != "" && rest[0] != '#' && rest[0] != ';' {
			return errf("syntax error in configuration: unexpected text after section header")
		}
		name := strings.TrimSpace(s[1:end])
		switch lower := strings.ToLower(name); lower {
		case "databases", "users", "pools", "pgbouncer", "peers":
			p.section = lower
		default:
			return errf("unknown section: [%s]", name)
		}
		return nil
	case '%':
		if strings.HasPrefix(s, "%include") && len(s) > len("%include") && isBlank(s[len("%include")]) {
			return p.include(file, n, strings.TrimSpace(s[len("%include"):]))
		}
		return errf("syntax error in configuration: unknown directive (only %%include is known)")
	}

	rawKey, rest, err := splitKey(s)
	if err != nil {
		return errf("syntax error in configuration: %v", err)
	}
	rest = strings.TrimLeft(rest, " \t")
	if rest == "" || rest[0] != '=' {
		return errf("syntax error in configuration: expected \"key = value\"")
	}
	val := strings.Trim(rest[1:], blanks)

	switch p.section {
	case "":
		return errf("value without section: %s", rawKey)
	case "pgbouncer":
		return p.setting(file, n, unquoteKey(rawKey), val)
	case "databases":
		return p.database(file, n, unquoteKey(rawKey), val)
	case "users":
		return p.user(file, n, unquoteKey(rawKey), val)
	case "pools":
		return p.pool(file, n, rawKey, val)
	case "peers":
		return p.peer(file, n, unquoteKey(rawKey), val)
	}
	return nil
}

func (p *parser) include(from string, n int, target string) error {
	errf := func(format string, args ...any) error {
		return &ParseError{File: from, Line: n, Msg: fmt.Sprintf(format, args...)}
	}
	if target == "" {
		return errf("%%include needs a file name")
	}
	if len(p.stack) > maxIncludeDepth {
		return errf("%%include nested too deep (more than %d levels)", maxIncludeDepth)
	}
	path := target
	data, err := p.read(path)
	if err != nil && errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(target) {
		// PgBouncer resolves relative to the working directory; also try
		// next to the including file so a config tree can be moved.
		alt := filepath.Join(filepath.Dir(from), target)
		if d, err2 := p.read(alt); err2 == nil {
			path, data, err = alt, d, nil
		}
	}
	if err != nil {
		return errf("cannot read %%include file %q: %v", target, err)
	}
	abs := absPath(path)
	if i := slices.Index(p.stack, abs); i >= 0 {
		chain := append(slices.Clone(p.stack[i:]), abs)
		for j := range chain {
			chain[j] = filepath.Base(chain[j])
		}
		return errf("%%include loop: %s", strings.Join(chain, " -> "))
	}
	return p.file(path, data)
}

// isKeyChar: the bare characters libusual accepts in a key.
func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '-' || c == '*'
}

// splitKey reads the key at the start of s: bare characters and quoted
// segments ("..." or '...', a doubled quote escapes it), e.g. mydb,
// "my db", "my.user"."my.db". It returns the key as written and the rest.
func splitKey(s string) (key, rest string, err error) {
	i := 0
	for i < len(s) {
		c := s[i]
		if isKeyChar(c) {
			i++
			continue
		}
		if c != '"' && c != '\'' {
			break
		}
		j, ok := endQuote(s, i)
		if !ok {
			return "", "", errors.New("unterminated quoted name")
		}
		i = j
	}
	if i == 0 {
		return "", "", errors.New("expected a name")
	}
	return s[:i], s[i:], nil
}

// endQuote returns the index just past the quoted segment starting at i.
func endQuote(s string, i int) (int, bool) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] != q {
			continue
		}
		if j+1 < len(s) && s[j+1] == q {
			j++
			continue
		}
		return j + 1, true
	}
	return 0, false
}

// unquoteKey removes the quotes of a key written by splitKey.
func unquoteKey(raw string) string {
	var b strings.Builder
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '"' && c != '\'' {
			b.WriteByte(c)
			i++
			continue
		}
		end, _ := endQuote(raw, i) // splitKey checked it
		inner := raw[i+1 : end-1]
		b.WriteString(strings.ReplaceAll(inner, string([]byte{c, c}), string(c)))
		i = end
	}
	return b.String()
}

// splitPoolKey splits a [pools] key at its one unquoted dot.
func splitPoolKey(raw string) (user, db string, ok bool) {
	dot := -1
	for i := 0; i < len(raw); {
		switch raw[i] {
		case '"', '\'':
			i, _ = endQuote(raw, i)
			continue
		case '.':
			if dot >= 0 {
				return "", "", false
			}
			dot = i
		}
		i++
	}
	if dot < 0 {
		return "", "", false
	}
	user, db = unquoteKey(raw[:dot]), unquoteKey(raw[dot+1:])
	return user, db, user != "" && db != ""
}

func (p *parser) setting(file string, n int, name, raw string) error {
	i, ok := keyIndex[strings.ToLower(name)]
	if !ok {
		return &ParseError{File: file, Line: n, Msg: "unknown parameter: pgbouncer/" + name}
	}
	k := &Keys[i]
	v, err := k.parse(raw)
	if err != nil {
		return &ParseError{File: file, Line: n, Msg: fmt.Sprintf("invalid value %q for parameter %s: %v", raw, k.Name, err)}
	}
	text := k.format(v)
	p.c.values[k.Name] = text
	k.apply(&p.c.Settings, v)
	if k.Status == NotSupported {
		def, _ := k.parse(k.Default)
		if text != k.format(def) {
			p.warn("setting "+k.Name, file, n, "setting %q is not supported yet and is ignored", k.Name)
		}
	}
	if k.Name == "auth_type" && !supportedAuthTypes[v.s] {
		p.warn("auth_type "+v.s, file, n, "auth_type %q is not supported yet", v.s)
	}
	return nil
}

type pair struct{ key, val string }

// parseConnstr splits "key=value key='quoted value' ..." as PgBouncer does:
// blanks around "=" are allowed, a single-quoted value may hold blanks and
// ” for a quote. Keys are returned in lower case.
func parseConnstr(s string) ([]pair, error) {
	var out []pair
	i := 0
	skip := func() {
		for i < len(s) && isBlank(s[i]) {
			i++
		}
	}
	for {
		skip()
		if i >= len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && !isBlank(s[i]) {
			i++
		}
		key := strings.ToLower(s[start:i])
		if key == "" {
			return nil, errors.New("syntax error in connection string: missing parameter name before '='")
		}
		skip()
		if i >= len(s) || s[i] != '=' {
			return nil, fmt.Errorf("syntax error in connection string: expected '=' after %q", key)
		}
		i++
		skip()
		var val string
		if i < len(s) && s[i] == '\'' {
			end, ok := endQuote(s, i)
			if !ok {
				return nil, fmt.Errorf("syntax error in connection string: unterminated quoted value of %q", key)
			}
			val = strings.ReplaceAll(s[i+1:end-1], "''", "'")
			i = end
			if i < len(s) && !isBlank(s[i]) {
				return nil, fmt.Errorf("syntax error in connection string: unexpected text after quoted value of %q", key)
			}
		} else {
			start = i
			for i < len(s) && !isBlank(s[i]) {
				i++
			}
			val = s[start:i]
		}
		out = append(out, pair{key, val})
	}
}

func (p *parser) database(file string, n int, name, val string) error {
	if name == "" {
		return &ParseError{File: file, Line: n, Msg: "empty database name"}
	}
	if name == "pgbouncer" {
		return &ParseError{File: file, Line: n, Msg: fmt.Sprintf("database %q: the name is reserved for the admin console", name)}
	}
	d, err := entry(p, dbKeys, file, n, name, val)
	if err != nil {
		return err
	}
	if err := checkHosts(d); err != nil {
		return &ParseError{File: file, Line: n, Msg: fmt.Sprintf("database %q: %v", name, err)}
	}
	d.Name, d.File, d.Line = name, file, n
	p.c.Databases[name] = d
	return nil
}

func (p *parser) user(file string, n int, name, val string) error {
	if name == "" {
		return &ParseError{File: file, Line: n, Msg: "empty user name"}
	}
	u, err := entry(p, userKeys, file, n, name, val)
	if err != nil {
		return err
	}
	u.Name, u.File, u.Line = name, file, n
	p.c.Users[name] = u
	return nil
}

func (p *parser) pool(file string, n int, rawKey, val string) error {
	errf := func(format string, args ...any) error {
		return &ParseError{File: file, Line: n, Msg: fmt.Sprintf(format, args...)}
	}
	user, db, ok := splitPoolKey(rawKey)
	if !ok {
		return errf(`invalid pool name %q: must be user.database (quote names that contain a dot: "my.user"."my.db")`, rawKey)
	}
	pairs, err := parseConnstr(val)
	if err != nil {
		return errf("pool %s: %v", rawKey, err)
	}
	if len(pairs) == 0 {
		return errf("pool %s: empty pool parameters", rawKey)
	}
	pl := &Pool{User: user, Database: db, PoolSize: -1, File: file, Line: n}
	for _, kv := range pairs {
		if kv.key != "pool_size" {
			return errf("pool %s: unrecognized pool parameter: %s", rawKey, kv.key)
		}
		v, err := parseInt(kv.val)
		if err == nil && v > math.MaxInt32 {
			err = fmt.Errorf("must be at most %d", math.MaxInt32)
		}
		if err != nil {
			return errf("pool %s: invalid value %q for pool_size: %v", rawKey, kv.val, err)
		}
		pl.PoolSize = int(max(v, -1)) // negative: no override, as in the fork
	}
	p.c.Pools[PoolKey(user, db)] = pl
	return nil
}
