package shard

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
	"github.com/pgturnstile/pgturnstile/internal/tomlpos"
)

// The shard file (shard_file in pgbouncer.ini) is TOML, strict like
// pgbouncer.ini and the admission file: a key this code does not know, a
// value of the wrong type and a broken invariant are errors
// "file:line: ...". The document is decoded into plain maps and checked
// here (struct decoding would match keys case-insensitively and word its
// own type errors); MetaData.Keys, in file order, finds the first unknown
// key, and tomlpos finds the lines BurntSushi/toml keeps to itself.
// The format is described in doc.go and docs/sharding.md.

// Limits of a shard file.
const (
	// MaxLogicalShards bounds logical_shards: a colocation holds one
	// entry per logical shard.
	MaxLogicalShards = 1 << 16
	// maxNameLen is Postgres' NAMEDATALEN-1, for database, user, table
	// and column names.
	maxNameLen = 63
	// maxFileSize bounds what a shard file may hold.
	maxFileSize = 16 << 20
)

// FileError is an error in a shard file, at a line when there is one.
type FileError struct {
	File string
	Line int // 1-based; 0 = the whole file
	Msg  string
}

func (e *FileError) Error() string {
	if e.Line <= 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// OnMissingKey is what a cluster does with a statement on a colocated
// table whose shard cannot be decided.
type OnMissingKey uint8

const (
	// MissingKeyError refuses the statement (SQLSTATE 0A000).
	MissingKeyError OnMissingKey = iota
	// MissingKeyDefault sends it to the default database.
	MissingKeyDefault
	// MissingKeyScatter runs it on every shard when it is a read-only
	// SELECT outside a transaction, and refuses it otherwise.
	MissingKeyScatter
)

var missingKeyNames = [...]string{MissingKeyError: "error", MissingKeyDefault: "default", MissingKeyScatter: "scatter"}

func (o OnMissingKey) String() string {
	if int(o) < len(missingKeyNames) {
		return missingKeyNames[o]
	}
	return "invalid"
}

// Map is a parsed shard file: one immutable value per load (RELOAD
// publishes a new one), safe to read from any number of goroutines.
// Lookups do not allocate.
type Map struct {
	// File names the file in messages.
	File string

	clusters []*Cluster
	byName   map[string]*Cluster
}

// Cluster returns the sharded cluster clients reach as database name, or
// nil when that database is not sharded.
func (m *Map) Cluster(name string) *Cluster {
	if m == nil {
		return nil
	}
	return m.byName[name]
}

// Clusters returns the clusters in file order; the slice is the map's own
// and must not be changed.
func (m *Map) Clusters() []*Cluster {
	if m == nil {
		return nil
	}
	return m.clusters
}

// Cluster is one [[cluster]]: a database name clients connect to, behind
// which tables are spread over [databases] entries.
type Cluster struct {
	// Name is the database name clients connect with; it is not itself a
	// [databases] entry.
	Name string
	// Line is where the cluster starts in the file.
	Line int
	// DefaultDatabase is the [databases] entry for unsharded tables and
	// statements that name no colocated table.
	DefaultDatabase string
	// LogicalShards is the number of logical shards, a power of two: the
	// MODULUS of Postgres' hash partitioning the placement equals.
	LogicalShards uint32
	// OnMissingKey is the policy for statements whose shard cannot be
	// decided (default: MissingKeyError).
	OnMissingKey OnMissingKey
	// Shadow computes and counts routing decisions but sends everything
	// to DefaultDatabase.
	Shadow bool
	// TargetUsers may name a shard explicitly (shard=NAME|all hints), as
	// admin_users may.
	TargetUsers []string
	// Views: the cluster's shards reach the colo tables through per-shard
	// views on one host (`pgturnstile shard views`, the logical phase),
	// so the router refuses what would reach past them.
	Views bool

	colos  []*Colo
	tables map[string]Table
	// names filters the names asked about: the scanner asks about every
	// identifier of a statement, and most are no table's.
	names nameFilter
	// statements are the prepared texts' routing under this map, shared
	// by its clients (statements.go).
	statements Statements
	// scanners are lent to the routers of this map's clients, one per
	// statement (Router.scanner).
	scanners sync.Pool
}

// nameFilter holds the length and initial of each table's name (the
// part after its schema): a name that is no table's is told apart by one
// bit test instead of a map lookup. It holds a superset of the tables:
// lengths of 63 and more share a row, and an initial counts by its low 5
// bits, so 'F' and 'f' (and '&') share one; a yes still goes to the map.
type nameFilter [64]uint32

func (f *nameFilter) add(table string) {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		table = table[i+1:]
	}
	if table != "" {
		f[min(len(table), 63)] |= 1 << (table[0] & 31)
	}
}

// mayHold reports that name ("table" or "schema.table") may be a table.
func (f *nameFilter) mayHold(name []byte) bool {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			name = name[i+1:]
			break
		}
	}
	return f.mayHoldPart(name)
}

// mayHoldPart is mayHold for a name without a '.' (an unquoted
// identifier), in either case.
func (f *nameFilter) mayHoldPart(name []byte) bool {
	return len(name) > 0 && f[min(len(name), 63)]&(1<<(name[0]&31)) != 0
}

// Table is a colocated table: its colocation and its key column.
type Table struct {
	Colo   *Colo
	Column string
}

// Table looks up a table by name as the file spells it ("files", or
// "schema.files"); name is a byte slice so that a scanner can pass the
// statement's bytes without allocating.
func (c *Cluster) Table(name []byte) (Table, bool) {
	if !c.names.mayHold(name) {
		return Table{}, false
	}
	t, ok := c.tables[string(name)]
	return t, ok
}

// Colos returns the cluster's colocations in file order; the slice is the
// map's own and must not be changed.
func (c *Cluster) Colos() []*Colo { return c.colos }

// Colo returns the colocation of that name, or nil.
func (c *Cluster) Colo(name string) *Colo {
	for _, co := range c.colos {
		if co.Name == name {
			return co
		}
	}
	return nil
}

// MayTarget says whether user is one of TargetUsers.
func (c *Cluster) MayTarget(user string) bool { return slices.Contains(c.TargetUsers, user) }

// Databases returns every [databases] entry the cluster routes to: the
// default database, then each range's database in file order, each once.
func (c *Cluster) Databases() []string {
	dbs := []string{c.DefaultDatabase}
	for _, co := range c.colos {
		for _, r := range co.ranges {
			if !slices.Contains(dbs, r.Database) {
				dbs = append(dbs, r.Database)
			}
		}
	}
	return dbs
}

// Colo is one colocation: tables that share a key type and a placement,
// so that a transaction keyed by one value stays on one database.
type Colo struct {
	Name    string
	Line    int
	KeyType KeyType

	index     int // in its cluster's colos
	ranges    []Range
	databases []string // distinct, in range order
	shard     []uint16 // logical shard → index in databases
}

// Range is one entry of a colocation's shards: logical shards First to
// Last (inclusive) live in Database.
type Range struct {
	First, Last uint32
	Database    string
	Line        int
}

func (r Range) String() string {
	if r.First == r.Last {
		return strconv.FormatUint(uint64(r.First), 10)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// Databases returns the databases the colocation's ranges name, each
// once, in range order; the slice is the map's own.
func (co *Colo) Databases() []string { return co.databases }

// Ranges returns the colocation's ranges in logical-shard order; the
// slice is the map's own and must not be changed.
func (co *Colo) Ranges() []Range { return co.ranges }

// Database returns the [databases] entry holding logical shard l, which
// must be below the cluster's LogicalShards.
func (co *Colo) Database(l uint32) string { return co.databases[co.shard[l]] }

// Place returns the logical shard of a key's row hash and the database
// holding it.
func (co *Colo) Place(h Hash) (logical uint32, database string) {
	l := h.Logical(uint32(len(co.shard)))
	return l, co.databases[co.shard[l]]
}

// Load reads and parses a shard file; databases are the names of the
// [databases] entries the file may route to.
func Load(path string, databases []string) (*Map, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load shard file: %w", err)
	}
	return Parse(data, path, databases)
}

// LoadStandalone reads a shard file apart from any pgbouncer.ini (for
// `pgturnstile shard views`, which prints the [databases] entries): every
// check but the one that its databases exist.
func LoadStandalone(path string) (*Map, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load shard file: %w", err)
	}
	return parse(data, path, nil, true)
}

func readFile(path string) ([]byte, error) {
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

// Parse parses a shard file; name names it in errors, and databases are
// the names of the [databases] entries it may route to. Every error is a
// *FileError. An empty file gives a map without clusters.
func Parse(data []byte, name string, databases []string) (*Map, error) {
	return parse(data, name, databases, false)
}

// ParseStandalone is Parse apart from any pgbouncer.ini (for a map about
// to be published to etcd without one): every check but the one that its
// databases exist.
func ParseStandalone(data []byte, name string) (*Map, error) {
	return parse(data, name, nil, true)
}

// parse is Parse; anyDatabase accepts every database name.
func parse(data []byte, name string, databases []string, anyDatabase bool) (*Map, error) {
	var doc map[string]any
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &FileError{File: name, Line: pe.Position.Line, Msg: pe.Message}
		}
		return nil, &FileError{File: name, Msg: err.Error()}
	}
	l := &loader{file: name, lines: tomlpos.Scan(data), databases: map[string]bool{}, anyDatabase: anyDatabase}
	for _, db := range databases {
		l.databases[db] = true
	}
	// Keys() lists every key in file order, so the first unknown one is
	// reported whatever order Go gives the maps below.
	for _, k := range md.Keys() {
		if !knownKey(k) {
			return nil, &FileError{File: name, Line: l.lines.FirstLine(k), Msg: fmt.Sprintf("unknown key %q", k.String())}
		}
	}
	m := &Map{File: name, byName: map[string]*Cluster{}}
	v, ok := doc["cluster"]
	if !ok {
		return m, nil
	}
	clusters, err := l.tables(tomlpos.Keys("cluster"), v)
	if err != nil {
		return nil, err
	}
	for i, t := range clusters {
		c, err := l.cluster(tomlpos.Keys("cluster").Index(i), t)
		if err != nil {
			return nil, err
		}
		if prev, dup := m.byName[c.Name]; dup {
			return nil, l.errAt(tomlpos.Keys("cluster").Index(i).Key("name"), "duplicate cluster %q (first at line %d)", c.Name, prev.Line)
		}
		m.byName[c.Name] = c
		m.clusters = append(m.clusters, c)
	}
	// A table may sit in a colocation of each cluster, but not in two of
	// one cluster: checked per cluster in l.cluster.
	return m, nil
}

// knownKey says whether k (without array indexes) is part of the format.
// Table names are the operator's: any key under "tables" is one.
func knownKey(k toml.Key) bool {
	if len(k) == 0 || k[0] != "cluster" {
		return false
	}
	switch len(k) {
	case 1:
		return true
	case 2:
		switch k[1] {
		case "name", "default_database", "logical_shards", "on_missing_key", "shadow", "target_users", "views", "colo":
			return true
		}
	case 3:
		if k[1] == "colo" {
			switch k[2] {
			case "name", "key_type", "tables", "shards":
				return true
			}
		}
	case 4:
		if k[1] == "colo" {
			switch k[2] {
			case "tables":
				return true
			case "shards":
				return k[3] == "range" || k[3] == "database"
			}
		}
	}
	return false
}

// loader checks the decoded document and places its errors.
type loader struct {
	file      string
	lines     *tomlpos.Lines
	databases map[string]bool
	// anyDatabase: the file is read apart from pgbouncer.ini
	// (LoadStandalone), so any database name is taken.
	anyDatabase bool
}

// errAt reports a problem with the value at p; the message starts with
// the key's dotted name.
func (l *loader) errAt(p tomlpos.Path, format string, args ...any) error {
	return &FileError{File: l.file, Line: l.lines.Line(p), Msg: p.Name() + ": " + fmt.Sprintf(format, args...)}
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

func (l *loader) table(p tomlpos.Path, v any) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, l.errAt(p, "must be a table, not %s", tomlType(v))
	}
	return m, nil
}

// tables accepts both [[x]] and x = [{...}].
func (l *loader) tables(p tomlpos.Path, v any) ([]map[string]any, error) {
	switch v := v.(type) {
	case []map[string]any:
		return v, nil
	case []any:
		out := make([]map[string]any, len(v))
		for i, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, l.errAt(p.Index(i), "must be an array of tables, not of %s", tomlType(e))
			}
			out[i] = m
		}
		return out, nil
	}
	return nil, l.errAt(p, "must be an array of tables, not %s", tomlType(v))
}

func (l *loader) str(p tomlpos.Path, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", l.errAt(p, "must be a string, not %s", tomlType(v))
	}
	return s, nil
}

// name reads a required name: a database, cluster, user, colocation,
// table or column name, non-empty and at most 63 bytes.
func (l *loader) name(p tomlpos.Path, t map[string]any, key string) (string, error) {
	v, ok := t[key]
	if !ok {
		return "", l.errAt(p, "missing %s", key)
	}
	return l.nameValue(p.Key(key), v)
}

func (l *loader) nameValue(p tomlpos.Path, v any) (string, error) {
	s, err := l.str(p, v)
	if err != nil {
		return "", err
	}
	if err := checkName(s); err != "" {
		return "", l.errAt(p, "%s", err)
	}
	return s, nil
}

func checkName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxNameLen:
		return fmt.Sprintf("%q is longer than %d bytes", s, maxNameLen)
	case strings.ContainsAny(s, "\x00\n\r"):
		return fmt.Sprintf("%q holds a control character", s)
	}
	return ""
}

// database reads a name that must be a [databases] entry.
func (l *loader) database(p tomlpos.Path, t map[string]any, key string) (string, error) {
	db, err := l.name(p, t, key)
	if err != nil {
		return "", err
	}
	if !l.databases[db] && !l.anyDatabase {
		return "", l.errAt(p.Key(key), "no database %q in [databases]", db)
	}
	return db, nil
}

func (l *loader) cluster(p tomlpos.Path, t map[string]any) (*Cluster, error) {
	c := &Cluster{Line: l.lines.Line(p), tables: map[string]Table{}}
	var err error
	if c.Name, err = l.name(p, t, "name"); err != nil {
		return nil, err
	}
	if l.databases[c.Name] {
		// Clients connecting to the name must reach the router, not a
		// pool of the entry.
		return nil, l.errAt(p.Key("name"), "%q is also a [databases] entry; a cluster needs a name of its own", c.Name)
	}
	if c.DefaultDatabase, err = l.database(p, t, "default_database"); err != nil {
		return nil, err
	}
	v, ok := t["logical_shards"]
	if !ok {
		return nil, l.errAt(p, "missing logical_shards")
	}
	lp := p.Key("logical_shards")
	n, ok := v.(int64)
	if !ok {
		return nil, l.errAt(lp, "must be an integer, not %s", tomlType(v))
	}
	if n < 1 || n > MaxLogicalShards || n&(n-1) != 0 {
		return nil, l.errAt(lp, "must be a power of two from 1 to %d, not %d", MaxLogicalShards, n)
	}
	c.LogicalShards = uint32(n)
	if v, ok := t["on_missing_key"]; ok {
		mp := p.Key("on_missing_key")
		s, err := l.str(mp, v)
		if err != nil {
			return nil, err
		}
		i := slices.Index(missingKeyNames[:], s)
		if i < 0 {
			return nil, l.errAt(mp, `must be "error", "default" or "scatter", not %q`, s)
		}
		c.OnMissingKey = OnMissingKey(i)
	}
	if v, ok := t["shadow"]; ok {
		b, ok := v.(bool)
		if !ok {
			return nil, l.errAt(p.Key("shadow"), "must be a boolean, not %s", tomlType(v))
		}
		c.Shadow = b
	}
	if v, ok := t["views"]; ok {
		b, ok := v.(bool)
		if !ok {
			return nil, l.errAt(p.Key("views"), "must be a boolean, not %s", tomlType(v))
		}
		c.Views = b
	}
	if v, ok := t["target_users"]; ok {
		up := p.Key("target_users")
		arr, ok := v.([]any)
		if !ok {
			return nil, l.errAt(up, "must be an array of strings, not %s", tomlType(v))
		}
		c.TargetUsers = []string{}
		for i, e := range arr {
			u, err := l.nameValue(up.Index(i), e)
			if err != nil {
				return nil, err
			}
			if slices.Contains(c.TargetUsers, u) {
				return nil, l.errAt(up.Index(i), "duplicate user %q", u)
			}
			c.TargetUsers = append(c.TargetUsers, u)
		}
	}
	v, ok = t["colo"]
	if !ok {
		return c, nil
	}
	colos, err := l.tables(p.Key("colo"), v)
	if err != nil {
		return nil, err
	}
	tableLine := map[string]int{} // table → line of its first colocation
	for i, ct := range colos {
		cp := p.Key("colo").Index(i)
		co, err := l.colo(cp, ct, c.LogicalShards)
		if err != nil {
			return nil, err
		}
		if prev := c.Colo(co.Name); prev != nil {
			return nil, l.errAt(cp.Key("name"), "duplicate colocation %q (first at line %d)", co.Name, prev.Line)
		}
		// Tables in sorted order, so that the error for several bad
		// entries does not depend on map order.
		tt, err := l.table(cp.Key("tables"), ct["tables"])
		if err != nil {
			return nil, err
		}
		if len(tt) == 0 {
			return nil, l.errAt(cp.Key("tables"), "must name at least one table")
		}
		names := make([]string, 0, len(tt))
		for k := range tt {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, name := range names {
			tp := cp.Key("tables").Key(name)
			if msg := checkTableName(name); msg != "" {
				return nil, l.errAt(tp, "%s", msg)
			}
			if c.Views && strings.Contains(name, ".") {
				return nil, l.errAt(tp, "table %q: with views = true a colo table is named without its schema (search_path finds its views)", name)
			}
			col, err := l.nameValue(tp, tt[name])
			if err != nil {
				return nil, err
			}
			if prev, dup := c.tables[name]; dup {
				return nil, l.errAt(tp, "table %q is already in colocation %q (line %d): a table belongs to one colocation", name, prev.Colo.Name, tableLine[name])
			}
			c.tables[name] = Table{Colo: co, Column: col}
			c.names.add(name)
			tableLine[name] = l.lines.Line(tp)
		}
		co.index = len(c.colos)
		c.colos = append(c.colos, co)
	}
	return c, nil
}

// checkTableName accepts "table" or "schema.table", each part a name.
func checkTableName(s string) string {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return fmt.Sprintf("table %q: at most schema.table", s)
	}
	for _, part := range parts {
		if msg := checkName(part); msg != "" {
			return fmt.Sprintf("table %q: %s", s, msg)
		}
	}
	return ""
}

func (l *loader) colo(p tomlpos.Path, t map[string]any, m uint32) (*Colo, error) {
	co := &Colo{Line: l.lines.Line(p)}
	var err error
	if co.Name, err = l.name(p, t, "name"); err != nil {
		return nil, err
	}
	if !validColoName(co.Name) {
		return nil, l.errAt(p.Key("name"), "invalid name %q (a letter, then letters, digits or '_'; it is written in hints)", co.Name)
	}
	v, ok := t["key_type"]
	if !ok {
		return nil, l.errAt(p, "missing key_type")
	}
	s, err := l.str(p.Key("key_type"), v)
	if err != nil {
		return nil, err
	}
	if co.KeyType, ok = ParseKeyType(s); !ok {
		return nil, l.errAt(p.Key("key_type"), `must be "bigint", "int", "smallint", "text" or "uuid", not %q`, s)
	}
	if _, ok := t["tables"]; !ok {
		return nil, l.errAt(p, "missing tables")
	}
	v, ok = t["shards"]
	if !ok {
		return nil, l.errAt(p, "missing shards")
	}
	sp := p.Key("shards")
	entries, err := l.tables(sp, v)
	if err != nil {
		return nil, err
	}
	// owner[l] is the index of the range holding logical shard l, + 1.
	owner := make([]int, m)
	for i, e := range entries {
		ep := sp.Index(i)
		r := Range{Line: l.lines.Line(ep)}
		rv, ok := e["range"]
		if !ok {
			return nil, l.errAt(ep, "missing range")
		}
		rs, err := l.str(ep.Key("range"), rv)
		if err != nil {
			return nil, err
		}
		if r.First, r.Last, err = parseRange(rs); err != nil {
			return nil, l.errAt(ep.Key("range"), "%q: %v", rs, err)
		}
		if r.Last >= m {
			return nil, l.errAt(ep.Key("range"), "%q is beyond logical shard %d (logical_shards = %d)", rs, m-1, m)
		}
		if r.Database, err = l.database(ep, e, "database"); err != nil {
			return nil, err
		}
		for s := r.First; s <= r.Last; s++ {
			if o := owner[s]; o != 0 {
				prev := co.ranges[o-1]
				return nil, l.errAt(ep.Key("range"), "%q overlaps range %q (line %d) at logical shard %d", rs, prev.String(), prev.Line, s)
			}
			owner[s] = len(co.ranges) + 1
		}
		co.ranges = append(co.ranges, r)
	}
	if gaps := uncovered(owner); gaps != "" {
		return nil, l.errAt(sp, "logical shards %s are in no range: the ranges must cover 0-%d exactly once", gaps, m-1)
	}
	slices.SortFunc(co.ranges, func(a, b Range) int { return int(a.First) - int(b.First) })
	co.shard = make([]uint16, m)
	for _, r := range co.ranges {
		i := slices.Index(co.databases, r.Database)
		if i < 0 {
			i = len(co.databases)
			co.databases = append(co.databases, r.Database)
		}
		for s := r.First; s <= r.Last; s++ {
			co.shard[s] = uint16(i)
		}
	}
	return co, nil
}

// ParseRange reads a range of logical shards as the shard file writes
// it: "N" or "FIRST-LAST" (FIRST <= LAST), decimal.
func ParseRange(s string) (first, last uint32, err error) { return parseRange(s) }

// parseRange reads "N" or "A-B" (A <= B), decimal.
func parseRange(s string) (first, last uint32, err error) {
	a, b, isRange := strings.Cut(s, "-")
	first, err = parseShardNumber(strings.TrimSpace(a))
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return first, first, nil
	}
	last, err = parseShardNumber(strings.TrimSpace(b))
	if err != nil {
		return 0, 0, err
	}
	if last < first {
		return 0, 0, errors.New("a range goes from the lower logical shard to the higher")
	}
	return first, last, nil
}

func parseShardNumber(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > math.MaxInt32 {
		return 0, errors.New(`not "N" or "FIRST-LAST" with decimal logical shard numbers`)
	}
	return uint32(n), nil
}

// uncovered describes the logical shards no range holds ("64-127, 200"),
// or "" when there are none; at most five runs are listed.
func uncovered(owner []int) string {
	var runs []string
	for s := 0; s < len(owner); s++ {
		if owner[s] != 0 {
			continue
		}
		e := s
		for e+1 < len(owner) && owner[e+1] == 0 {
			e++
		}
		if len(runs) == 5 {
			runs = append(runs, "...")
			break
		}
		runs = append(runs, Range{First: uint32(s), Last: uint32(e)}.String())
		s = e
	}
	return strings.Join(runs, ", ")
}

func validColoName(s string) bool {
	if s == "" || len(s) > maxNameLen || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
