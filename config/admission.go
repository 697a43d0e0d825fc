package config

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// The admission policy file (admission_file in pgbouncer.ini) is TOML. This
// file turns it into plain data, AdmissionPolicy; admission/classify compiles
// that into decisions. The package does not import package admission so
// that config stays a leaf every other package may use.
//
// The file is strict, like pgbouncer.ini: a key this code does not know, a
// value of the wrong type or out of range is an error "file:line: ...".
// The document is decoded into plain maps and checked here rather than
// decoded into structs and checked with MetaData.Undecoded: struct decoding
// matches keys case-insensitively ("Priority" would pass) and its type
// errors are text we could not reword. MetaData.Keys, in file order, finds
// the first unknown key. BurntSushi/toml reports syntax errors with their
// line but keeps the lines of keys to itself, so keyLines
// (admission_lines.go) finds them with a small scan of the text.

// Limits of an admission policy. They bound what clients can make the
// classifier look at and what the gate and its metrics must hold.
const (
	// MaxAdmissionPriorities bounds [priorities] names.
	MaxAdmissionPriorities = 8
	// MaxAdmissionLevels bounds [tree] levels.
	MaxAdmissionLevels = 4
	// MaxAdmissionNodes bounds the declared nodes of the tree.
	MaxAdmissionNodes = 4096
	// MaxAdmissionNameLen bounds a priority or level name.
	MaxAdmissionNameLen = 32
	// MaxAdmissionValueLen bounds a category value.
	MaxAdmissionValueLen = 64
)

// AdmissionPolicy is a parsed admission policy file with its defaults filled
// in. Priorities are tier indexes into Priorities (0 most important).
type AdmissionPolicy struct {
	// File names the file in messages.
	File string

	// Priorities names the tiers, most important first (1..8 names).
	Priorities []string
	// DefaultPriority is the tier of a client no rule, option or tag
	// places. Without [priorities] default it is tier 1 (the second name,
	// "high" by default: the library convention for user-visible
	// traffic), or tier 0 when there is only one name.
	DefaultPriority int
	// ShortTimeout and LongTimeout are the CoDel floors (default 5ms and
	// 100ms); the gate scales them up with the observed transaction time.
	ShortTimeout time.Duration
	LongTimeout  time.Duration
	// DebtDecayInterval is how long a full capacity's worth of debt takes
	// to decay (default 10s).
	DebtDecayInterval time.Duration
	// ShedSQLState is the SQLSTATE of a shed transaction: "53000" (default)
	// or "53300".
	ShedSQLState string

	// Levels are the dimensions of the fair-share tree from the root down
	// (0..4); none means one leaf for everything.
	Levels []string
	// Nodes are the declared nodes, in file order.
	Nodes []AdmissionNode

	// Rules place sessions; the first matching rule wins.
	Rules []AdmissionRule

	// Users holds per-user settings by user name.
	Users map[string]AdmissionUser
}

// AdmissionNode is one [[tree.node]].
type AdmissionNode struct {
	Line int // where the node starts, for messages
	// Path holds one value per level from the root (1..len(Levels)).
	Path []string
	// Weight is the share among siblings, > 0 (default 1).
	Weight float64
	// Ceiling caps the node at this fraction of its parent's capacity,
	// in (0, 1]; 0 means no ceiling.
	Ceiling float64
}

// AdmissionRule is one [[rule]]. Every pattern given must match; an empty
// pattern matches anything.
type AdmissionRule struct {
	Line int // where the rule starts, for messages
	// User, Database and ApplicationName are path.Match patterns ('*' does
	// not match '/').
	User            string
	Database        string
	ApplicationName string
	// Priority is the tier the rule gives, or -1 when the rule leaves the
	// default priority.
	Priority int
	// Category holds one value per level (len(Levels)); "" leaves that
	// level unset.
	Category []string
}

// AdmissionUser is one [users.NAME] table.
type AdmissionUser struct {
	// MaxPriority is the most important tier the user's sessions may
	// reach by rules, options or tags, or -1 when not set (then a
	// session's own rule-derived priority is its ceiling).
	MaxPriority int
}

// defaultAdmission returns the policy of an empty file.
func defaultAdmission(file string) *AdmissionPolicy {
	return &AdmissionPolicy{
		File:              file,
		Priorities:        []string{"critical", "high", "medium", "low"},
		DefaultPriority:   1,
		ShortTimeout:      5 * time.Millisecond,
		LongTimeout:       100 * time.Millisecond,
		DebtDecayInterval: 10 * time.Second,
		ShedSQLState:      "53000",
		Users:             map[string]AdmissionUser{},
	}
}

// PriorityIndex returns the tier of a priority name.
func (p *AdmissionPolicy) PriorityIndex(name string) (int, bool) {
	i := slices.Index(p.Priorities, name)
	return i, i >= 0
}

// LoadAdmission reads and parses an admission policy file.
func LoadAdmission(path string) (*AdmissionPolicy, error) {
	data, err := readRegularFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load admission file: %w", err)
	}
	return ParseAdmission(data, path)
}

// ParseAdmission parses an admission policy; name names it in errors. Every
// error is a *ParseError. Empty data gives the default policy.
func ParseAdmission(data []byte, name string) (*AdmissionPolicy, error) {
	var doc map[string]any
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ParseError{File: name, Line: pe.Position.Line, Msg: pe.Message}
		}
		return nil, &ParseError{File: name, Msg: err.Error()}
	}
	a := &admissionLoader{file: name, lines: scanKeyLines(data)}
	// Keys() lists every key in file order, so the first unknown one is
	// reported no matter how Go orders the maps below.
	for _, k := range md.Keys() {
		if !knownAdmissionKey(k) {
			return nil, a.errFree(k, "unknown key %q", k.String())
		}
	}
	p := defaultAdmission(name)
	if err := a.priorities(p, doc); err != nil {
		return nil, err
	}
	if err := a.tree(p, doc); err != nil {
		return nil, err
	}
	if err := a.rules(p, doc); err != nil {
		return nil, err
	}
	if err := a.users(p, doc); err != nil {
		return nil, err
	}
	return p, nil
}

// knownAdmissionKey says whether k (without array indexes) is part of the
// format. Names chosen by the operator (user names, category levels) are
// wildcards here; their checks come with their values.
func knownAdmissionKey(k toml.Key) bool {
	switch len(k) {
	case 1:
		switch k[0] {
		case "priorities", "tree", "rule", "users":
			return true
		}
	case 2:
		switch k[0] {
		case "priorities":
			switch k[1] {
			case "names", "default", "short_timeout", "long_timeout",
				"debt_decay_interval", "debt_forgive_per_success", "shed_sqlstate":
				return true
			}
		case "tree":
			return k[1] == "levels" || k[1] == "node"
		case "rule":
			switch k[1] {
			case "application_name", "user", "database", "priority", "category":
				return true
			}
		case "users":
			return true
		}
	case 3:
		switch k[0] {
		case "tree":
			if k[1] == "node" {
				switch k[2] {
				case "path", "weight", "ceiling":
					return true
				}
			}
		case "rule":
			return k[1] == "category"
		case "users":
			return k[2] == "max_priority"
		}
	}
	return false
}

// admissionLoader checks the decoded document and places its errors.
type admissionLoader struct {
	file  string
	lines keyLines
}

// errFree reports a problem at the first definition of k (a key without
// array indexes, as toml's MetaData gives it).
func (a *admissionLoader) errFree(k toml.Key, format string, args ...any) error {
	return &ParseError{File: a.file, Line: a.lines.firstLine(k), Msg: fmt.Sprintf(format, args...)}
}

// errAt reports a problem with the key at p (with array indexes); the
// message starts with the key's dotted name.
func (a *admissionLoader) errAt(p keyPath, format string, args ...any) error {
	return &ParseError{File: a.file, Line: a.lines.line(p), Msg: p.name() + ": " + fmt.Sprintf(format, args...)}
}

// keyPath names a value in the document: table keys and, for arrays of
// tables, element indexes.
type keyPath []pathElem

type pathElem struct {
	key   string
	index int // for an array element; key is then ""
}

func (p keyPath) key(k string) keyPath { return append(slices.Clip(p), pathElem{key: k}) }
func (p keyPath) index(i int) keyPath  { return append(slices.Clip(p), pathElem{index: i}) }
func keyOf(keys ...string) (p keyPath) { return p.keys(keys...) }
func (p keyPath) keys(k ...string) keyPath {
	for _, s := range k {
		p = p.key(s)
	}
	return p
}

// name is the dotted TOML name of p without indexes ("rule.priority").
func (p keyPath) name() string {
	var k toml.Key
	for _, e := range p {
		if e.key != "" {
			k = append(k, e.key)
		}
	}
	return k.String()
}

// tomlType names the TOML type of a decoded value for messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	case []map[string]any:
		return "array of tables"
	}
	return "datetime"
}

func (a *admissionLoader) table(p keyPath, v any) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, a.errAt(p, "must be a table, not %s", tomlType(v))
	}
	return m, nil
}

// tables accepts both [[x]] and x = [{...}].
func (a *admissionLoader) tables(p keyPath, v any) ([]map[string]any, error) {
	switch v := v.(type) {
	case []map[string]any:
		return v, nil
	case []any:
		out := make([]map[string]any, len(v))
		for i, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, a.errAt(p, "must be an array of tables, not %s", tomlType(e))
			}
			out[i] = m
		}
		return out, nil
	}
	return nil, a.errAt(p, "must be an array of tables, not %s", tomlType(v))
}

func (a *admissionLoader) str(p keyPath, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", a.errAt(p, "must be a string, not %s", tomlType(v))
	}
	return s, nil
}

func (a *admissionLoader) strings(p keyPath, v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, a.errAt(p, "must be an array of strings, not %s", tomlType(v))
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, a.errAt(p, "must be an array of strings, not of %s", tomlType(e))
		}
		out[i] = s
	}
	return out, nil
}

func (a *admissionLoader) number(p keyPath, v any) (float64, error) {
	switch n := v.(type) {
	case int64:
		return float64(n), nil
	case float64:
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return 0, a.errAt(p, "must be a finite number")
		}
		return n, nil
	}
	return 0, a.errAt(p, "must be a number, not %s", tomlType(v))
}

// duration takes Go duration strings only: a bare integer would leave its
// unit to guesswork.
func (a *admissionLoader) duration(p keyPath, v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, a.errAt(p, `must be a duration string such as "5ms", not %s`, tomlType(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, a.errAt(p, `invalid duration %q (examples: "5ms", "1.5s")`, s)
	}
	if d <= 0 {
		return 0, a.errAt(p, "must be positive, not %s", s)
	}
	return d, nil
}

// priority resolves a priority name.
func (a *admissionLoader) priority(p keyPath, v any, pol *AdmissionPolicy) (int, error) {
	s, err := a.str(p, v)
	if err != nil {
		return 0, err
	}
	i, ok := pol.PriorityIndex(s)
	if !ok {
		return 0, a.errAt(p, "unknown priority %q (priorities.names: %s)", s, strings.Join(pol.Priorities, ", "))
	}
	return i, nil
}

// validName is the charset of priority names: they appear in tags, options
// and log lines unquoted. A leading letter keeps them apart from tier
// numbers.
func validName(s string) bool {
	if s == "" || len(s) > MaxAdmissionNameLen || !isLetter(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// validLevel is the charset of level names: they are also option names
// (-c pgturnstile.LEVEL=…), which Postgres lowercases and spells with '_'.
func validLevel(s string) bool {
	if s == "" || len(s) > MaxAdmissionNameLen || !(s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z') && !isDigit(c) && c != '_' {
			return false
		}
	}
	return s != "priority" && s != "category"
}

// validAdmissionValue says whether s can be a category value: it must
// survive tags, options and "level=value/level=value" paths unquoted.
func validAdmissionValue(s string) bool {
	if s == "" || len(s) > MaxAdmissionValueLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != ':' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

const valueCharset = "1 to 64 letters, digits, '_', '-', '.' or ':'"

func (a *admissionLoader) priorities(pol *AdmissionPolicy, doc map[string]any) error {
	v, ok := doc["priorities"]
	if !ok {
		return nil
	}
	base := keyOf("priorities")
	t, err := a.table(base, v)
	if err != nil {
		return err
	}
	if v, ok := t["names"]; ok {
		p := base.key("names")
		names, err := a.strings(p, v)
		if err != nil {
			return err
		}
		if len(names) < 1 || len(names) > MaxAdmissionPriorities {
			return a.errAt(p, "must hold 1 to %d names, not %d", MaxAdmissionPriorities, len(names))
		}
		for i, n := range names {
			if !validName(n) {
				return a.errAt(p, "invalid name %q (a letter, then letters, digits, '_' or '-'; at most %d bytes)", n, MaxAdmissionNameLen)
			}
			if slices.Contains(names[:i], n) {
				return a.errAt(p, "duplicate name %q", n)
			}
		}
		pol.Priorities = names
		pol.DefaultPriority = min(1, len(names)-1)
	}
	if v, ok := t["default"]; ok {
		i, err := a.priority(base.key("default"), v, pol)
		if err != nil {
			return err
		}
		pol.DefaultPriority = i
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{
		{"short_timeout", &pol.ShortTimeout},
		{"long_timeout", &pol.LongTimeout},
		{"debt_decay_interval", &pol.DebtDecayInterval},
	} {
		if v, ok := t[d.key]; ok {
			if *d.dst, err = a.duration(base.key(d.key), v); err != nil {
				return err
			}
		}
	}
	if pol.ShortTimeout > pol.LongTimeout {
		// Blame whichever of the two the file sets; short_timeout when
		// both are.
		if _, ok := t["short_timeout"]; ok {
			return a.errAt(base.key("short_timeout"), "%s is longer than long_timeout (%s)", pol.ShortTimeout, pol.LongTimeout)
		}
		return a.errAt(base.key("long_timeout"), "%s is shorter than short_timeout (%s)", pol.LongTimeout, pol.ShortTimeout)
	}
	if v, ok := t["debt_forgive_per_success"]; ok {
		p := base.key("debt_forgive_per_success")
		f, err := a.number(p, v)
		if err != nil {
			return err
		}
		if f < 0 || f > 1 {
			return a.errAt(p, "must be between 0 and 1, not %g", f)
		}
		// Checked, so that a file written for it still loads as it did,
		// and dropped: the gate's debt decays with the demand behind it
		// (admission/doc.go), which does the forgiving.
	}
	if v, ok := t["shed_sqlstate"]; ok {
		p := base.key("shed_sqlstate")
		s, err := a.str(p, v)
		if err != nil {
			return err
		}
		if s != "53000" && s != "53300" {
			return a.errAt(p, `must be "53000" or "53300", not %q`, s)
		}
		pol.ShedSQLState = s
	}
	return nil
}

func (a *admissionLoader) tree(pol *AdmissionPolicy, doc map[string]any) error {
	v, ok := doc["tree"]
	if !ok {
		return nil
	}
	base := keyOf("tree")
	t, err := a.table(base, v)
	if err != nil {
		return err
	}
	if v, ok := t["levels"]; ok {
		p := base.key("levels")
		levels, err := a.strings(p, v)
		if err != nil {
			return err
		}
		if len(levels) > MaxAdmissionLevels {
			return a.errAt(p, "must hold at most %d levels, not %d", MaxAdmissionLevels, len(levels))
		}
		for i, l := range levels {
			if !validLevel(l) {
				return a.errAt(p, `invalid level %q (a lowercase letter, then lowercase letters, digits or '_'; at most %d bytes; not "priority" or "category")`, l, MaxAdmissionNameLen)
			}
			if slices.Contains(levels[:i], l) {
				return a.errAt(p, "duplicate level %q", l)
			}
		}
		pol.Levels = levels
	}
	v, ok = t["node"]
	if !ok {
		return nil
	}
	nodes, err := a.tables(base.key("node"), v)
	if err != nil {
		return err
	}
	if len(nodes) > 0 && len(pol.Levels) == 0 {
		return a.errAt(base.key("node"), "nodes need tree.levels")
	}
	if len(nodes) > MaxAdmissionNodes {
		return a.errAt(base.key("node"), "at most %d nodes, not %d", MaxAdmissionNodes, len(nodes))
	}
	seen := map[string]int{} // path → line
	for i, n := range nodes {
		np := base.key("node").index(i)
		node := AdmissionNode{Line: a.lines.line(np), Weight: 1}
		v, ok := n["path"]
		if !ok {
			return a.errAt(np, "missing path")
		}
		pp := np.key("path")
		s, err := a.str(pp, v)
		if err != nil {
			return err
		}
		if node.Path, err = a.nodePath(pp, s, pol.Levels); err != nil {
			return err
		}
		if line, dup := seen[s]; dup {
			return a.errAt(pp, "duplicate node %q (first at line %d)", s, line)
		}
		seen[s] = node.Line
		if v, ok := n["weight"]; ok {
			wp := np.key("weight")
			if node.Weight, err = a.number(wp, v); err != nil {
				return err
			}
			if node.Weight <= 0 {
				return a.errAt(wp, "must be positive, not %g", node.Weight)
			}
		}
		if v, ok := n["ceiling"]; ok {
			cp := np.key("ceiling")
			if node.Ceiling, err = a.number(cp, v); err != nil {
				return err
			}
			if node.Ceiling <= 0 || node.Ceiling > 1 {
				return a.errAt(cp, "must be in (0, 1], not %g", node.Ceiling)
			}
		}
		pol.Nodes = append(pol.Nodes, node)
	}
	return nil
}

// nodePath parses "level=value/level=value": levels in tree.levels order
// from the root, so a path reads the same as the gate's category names.
func (a *admissionLoader) nodePath(p keyPath, s string, levels []string) ([]string, error) {
	segs := strings.Split(s, "/")
	if len(segs) > len(levels) {
		return nil, a.errAt(p, "%q is deeper than tree.levels (%d)", s, len(levels))
	}
	out := make([]string, len(segs))
	for i, seg := range segs {
		l, v, ok := strings.Cut(seg, "=")
		if !ok {
			return nil, a.errAt(p, `%q: segment %q is not "level=value"`, s, seg)
		}
		if l != levels[i] {
			return nil, a.errAt(p, "%q: level %q where tree.levels has %q", s, l, levels[i])
		}
		if !validAdmissionValue(v) {
			return nil, a.errAt(p, "%q: invalid value %q (%s)", s, v, valueCharset)
		}
		out[i] = v
	}
	return out, nil
}

func (a *admissionLoader) rules(pol *AdmissionPolicy, doc map[string]any) error {
	v, ok := doc["rule"]
	if !ok {
		return nil
	}
	rules, err := a.tables(keyOf("rule"), v)
	if err != nil {
		return err
	}
	for i, r := range rules {
		rp := keyOf("rule").index(i)
		rule := AdmissionRule{Line: a.lines.line(rp), Priority: -1}
		for _, f := range []struct {
			key string
			dst *string
		}{
			{"user", &rule.User},
			{"database", &rule.Database},
			{"application_name", &rule.ApplicationName},
		} {
			v, ok := r[f.key]
			if !ok {
				continue
			}
			fp := rp.key(f.key)
			if *f.dst, err = a.str(fp, v); err != nil {
				return err
			}
			if !validGlob(*f.dst) {
				return a.errAt(fp, "invalid pattern %q", *f.dst)
			}
		}
		if v, ok := r["priority"]; ok {
			if rule.Priority, err = a.priority(rp.key("priority"), v, pol); err != nil {
				return err
			}
		}
		if v, ok := r["category"]; ok {
			if rule.Category, err = a.category(rp.key("category"), v, pol.Levels); err != nil {
				return err
			}
		}
		pol.Rules = append(pol.Rules, rule)
	}
	return nil
}

// validGlob checks the whole pattern: path.Match reports a bad pattern only
// when matching gets that far, so a failing match must not hide one.
func validGlob(p string) bool {
	if p == "" {
		return false
	}
	for i := 0; i < len(p); i++ {
		if _, err := path.Match(p[i:], ""); err != nil {
			return false
		}
	}
	return true
}

// category reads { level = "value", ... } into one value per level.
func (a *admissionLoader) category(p keyPath, v any, levels []string) ([]string, error) {
	t, err := a.table(p, v)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(levels))
	// Sorted, so that the error for a table with several bad entries does
	// not depend on map order.
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, l := range keys {
		lp := p.key(l)
		i := slices.Index(levels, l)
		if i < 0 && len(levels) == 0 {
			return nil, a.errAt(lp, "unknown level %q (no tree.levels)", l)
		}
		if i < 0 {
			return nil, a.errAt(lp, "unknown level %q (tree.levels: %s)", l, strings.Join(levels, ", "))
		}
		s, err := a.str(lp, t[l])
		if err != nil {
			return nil, err
		}
		if !validAdmissionValue(s) {
			return nil, a.errAt(lp, "invalid value %q (%s)", s, valueCharset)
		}
		out[i] = s
	}
	return out, nil
}

func (a *admissionLoader) users(pol *AdmissionPolicy, doc map[string]any) error {
	v, ok := doc["users"]
	if !ok {
		return nil
	}
	t, err := a.table(keyOf("users"), v)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(t))
	for k := range t {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		up := keyOf("users", name)
		ut, err := a.table(up, t[name])
		if err != nil {
			return err
		}
		u := AdmissionUser{MaxPriority: -1}
		if v, ok := ut["max_priority"]; ok {
			if u.MaxPriority, err = a.priority(up.key("max_priority"), v, pol); err != nil {
				return err
			}
		}
		pol.Users[name] = u
	}
	return nil
}
