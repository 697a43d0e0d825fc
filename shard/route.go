package shard

import (
	"bytes"
	"errors"
)

// The routing decision: where one statement of a sharded cluster runs,
// from (in order) an explicit target, an explicit key, the keys the
// scanner finds in the text, or the cluster's default database; or why it
// cannot run on one database. The pooler calls it at the one place where
// a transaction chooses its pool; it holds the transaction's pin and the
// session's settings and passes them in.

// Source says where a decision came from, for SHOW ROUTES and the
// pgturnstile_route_decisions_total metric.
type Source uint8

const (
	SourceDefault Source = iota // no sharded table: the default database
	SourceLiteral               // a key written in the statement
	SourceParam                 // a key given as $n, decoded at Bind
	SourceHint                  // a shard_key comment
	SourceOption                // SET pgturnstile.shard_key or the startup option
	SourceTarget                // an explicit shard=NAME
	SourceScatter               // every shard (shard=all, on_missing_key = scatter)
	SourceRefused               // no shard could be decided
	numSources
)

var sourceNames = [...]string{
	SourceDefault: "default", SourceLiteral: "literal", SourceParam: "param", SourceHint: "hint",
	SourceOption: "option", SourceTarget: "target", SourceScatter: "scatter", SourceRefused: "refused",
}

func (s Source) String() string { return sourceNames[s] }

// Sources lists every source, for metrics that must show all of them.
func Sources() []Source {
	out := make([]Source, numSources)
	for i := range out {
		out[i] = Source(i)
	}
	return out
}

// More reasons a statement is refused, beyond the scanner's.
const (
	ReasonKeysSplit    Reason = iota + 64 // keys on two databases
	ReasonHintMismatch                    // a hint and the statement's own key disagree
	ReasonBadHint                         // a pgturnstile comment or SET that does not read
	ReasonNotTarget                       // shard=… from a user who may not target
	ReasonUnknownShard                    // shard=NAME that is none of the cluster's databases
	ReasonUnknownColo                     // colo=NAME that is none of the cluster's
	ReasonNoColo                          // a key with no colocation to hash it by
	ReasonScatter                         // every shard: inside a transaction, or not a Query or an unnamed Parse
)

var routeReasonText = map[Reason]string{
	ReasonKeysSplit:    "its keys belong to more than one shard",
	ReasonHintMismatch: "the shard_key hint and the statement's key belong to different shards",
	ReasonBadHint:      "a pgturnstile hint that cannot be read",
	ReasonNotTarget:    "only admin users and target_users may name a shard",
	ReasonUnknownShard: "the named shard is not one of the cluster's databases",
	ReasonUnknownColo:  "the named colocation is not one of the cluster's",
	ReasonNoColo:       "a shard_key without a colocation (name one with colo=…)",
	ReasonScatter:      "it would run on every shard (shard=all, on_missing_key = scatter), which the router does only outside a transaction (and a session pinned to a shard), for a simple Query or an unnamed statement parsed, bound and executed in one batch",
}

// Text is the reason in words, for the DETAIL.
func (r Reason) Text() string {
	if int(r) < len(reasonText) {
		return reasonText[r]
	}
	return routeReasonText[r]
}

// Hint is the HINT of a refusal for reason r, or "" for the router's
// usual one (name the key).
func (r Reason) Hint() string {
	switch r {
	case ReasonViewsSearchPath:
		return "Leave search_path as the shard's role sets it; name other schemas' tables with their schema."
	case ReasonViewsQualified:
		return "Name the table without its schema: each shard's role finds its view of the table first."
	case ReasonScatterNamed:
		return "Send it as one batch of Parse or Bind, Describe, Execute of every row and Sync (no fetch size, no named portal), or on the simple protocol, or give the key."
	}
	return ""
}

// Decision is where a statement runs.
type Decision struct {
	Source Source
	// Database is the [databases] entry that runs it; empty when
	// refused, scattered, or waiting for its Bind (Pending).
	Database string
	// Colo and Logical: the colocation and logical shard of a keyed
	// decision. A decision by several keys (all on Database) spans
	// Logical, the lowest of their logical shards, to LogicalMax, the
	// highest (equal for one key); ManyColos says its keys are of more
	// than one colocation (Colo is one of them). PAUSE SHARD holds a
	// transaction whose span meets a paused range. A key that does not
	// decode for its type is in no logical shard: Logical and
	// LogicalMax are 0.
	Colo       *Colo
	Logical    uint32
	LogicalMax uint32
	ManyColos  bool
	// Reason, Table and Column say why it was refused (Source ==
	// SourceRefused); Table is valid until the Router's next call.
	Reason Reason
	Table  []byte
	Column string
	// Pending: the key is a $n of a Parse; the Bind decides (Bind).
	Pending bool
}

// Refused reports a refusal.
func (d Decision) Refused() bool { return d.Source == SourceRefused }

// Scattered reports a decision to run on every shard.
func (d Decision) Scattered() bool { return d.Source == SourceScatter }

// Pin is what the session and the transaction say about routing: the
// values of SET [LOCAL] pgturnstile.shard_key, .colo and .shard and of the
// startup options, the innermost first. The pooler keeps them.
type Pin struct {
	Key   []byte
	Colo  string
	Shard string
}

// Empty reports a pin that says nothing.
func (p Pin) Empty() bool { return p.Key == nil && p.Colo == "" && p.Shard == "" }

// Lookup makes a Cluster the scanner's Tables: a table as the shard file
// names it, "schema.table" when the statement qualifies it (a bare name in
// the file also matches public.name). The colocation is its index in
// Colos.
func (c *Cluster) Lookup(schema, name []byte) (colo int, key string, typ KeyType, ok bool) {
	var t Table
	if len(schema) > 0 {
		var buf [2*maxNameLen + 2]byte
		if len(schema)+1+len(name) <= len(buf) {
			n := copy(buf[:], schema)
			buf[n] = '.'
			n++
			n += copy(buf[n:], name)
			t, ok = c.Table(buf[:n])
		}
		if !ok && string(schema) == "public" {
			t, ok = c.Table(name)
		}
	} else {
		t, ok = c.Table(name)
	}
	if !ok {
		return 0, "", 0, false
	}
	return t.Colo.index, t.Column, t.Colo.KeyType, true
}

// Router decides routes for one client of one cluster; it is not safe for
// concurrent use. Its scanner (2.2 KB, and its token buffers) is lent
// from the cluster's for each statement (Router.scanner), so a client
// costs the router about 100 bytes between statements rather than a
// scanner of its own, and its memo's copy of its last statement routed
// by a literal (memo.go, at most 512 bytes) once it has one. A warm
// router allocates nothing.
type Router struct {
	cluster       *Cluster
	escapeStrings bool
	// memo is the last statement one literal key decided (memo.go);
	// empty until there is one. Held by value: the line the router's
	// other fields are on, not one more to fetch.
	memo routeMemo
}

// NewRouter returns a Router for the cluster.
func NewRouter(c *Cluster) *Router { return &Router{cluster: c} }

// Cluster is the cluster the router serves.
func (r *Router) Cluster() *Cluster { return r.cluster }

// SetEscapeStrings follows the session's standard_conforming_strings
// (off: '…' takes backslash escapes).
func (r *Router) SetEscapeStrings(off bool) { r.escapeStrings = off }

// scanner lends the router one of its cluster's scanners, set for the
// session; release gives it back.
func (r *Router) scanner() *Scanner {
	s, _ := r.cluster.scanners.Get().(*Scanner)
	if s == nil {
		s = &Scanner{Tables: r.cluster}
	}
	s.EscapeStrings = r.escapeStrings
	return s
}

// release gives s back once d, decided with it, no longer refers to its
// memory: a refusal's table name may be a name folded or unescaped into
// the scanner's scratch (the only place it writes names), so when the
// scan wrote any, the decision keeps a copy of its name.
func (r *Router) release(s *Scanner, d *Decision) {
	if d.Table != nil && len(s.scratch) > 0 {
		d.Table = bytes.Clone(d.Table)
	}
	s.res = Result{}
	s.lx.src, s.trailing = nil, nil // no reference to a client's buffer kept
	r.cluster.scanners.Put(s)
}

// Route decides where a Query's text (or a Parse's, whose $n keys make
// the decision Pending) runs. mayTarget: the user is an admin or one of
// target_users.
func (r *Router) Route(sql []byte, pin Pin, mayTarget bool) Decision {
	if d, ok := r.memoRoute(sql, pin); ok {
		return d
	}
	return r.scan(sql, pin, mayTarget)
}

// scan is Route by a scan of the text, whatever the memo holds.
func (r *Router) scan(sql []byte, pin Pin, mayTarget bool) Decision {
	s := r.scanner()
	d := r.route(s, sql, pin, mayTarget)
	if d.Source == SourceLiteral && len(sql) <= maxMemoText {
		r.remember(s, sql, pin)
	}
	r.release(s, &d)
	return d
}

// route is Route with a scanner lent; the scan's result stays in s.
func (r *Router) route(s *Scanner, sql []byte, pin Pin, mayTarget bool) Decision {
	c := r.cluster
	hint, leading, err := leadingHint(sql)
	if err != nil {
		return refused(ReasonBadHint, nil, "")
	}
	if d, ok := r.target(hint, pin, mayTarget); ok {
		return d
	}
	res := s.Scan(sql)
	if c.Views && res.Reason != ReasonTooLong {
		if reason, table := s.viewsBypass(); reason != ReasonNone {
			return refused(reason, table, "")
		}
	}
	if !leading {
		// The trailing comment, which the scan found without lexing the
		// text twice (a text too long to scan is lexed for it alone).
		if s.trailing != nil {
			hint = trailingHint(s.trailing)
		} else if res.Reason == ReasonTooLong {
			hint, _ = ReadHint(sql)
		}
		if d, ok := r.target(hint, pin, mayTarget); ok {
			return d
		}
	}
	// An explicit key: the hint's, else the session's.
	key, colo, src := hint.Key, string(hint.Colo), SourceHint
	if key == nil && pin.Key != nil {
		key, colo, src = pin.Key, pin.Colo, SourceOption
	}
	if key != nil {
		co, ok := r.coloFor(colo, res)
		if !ok {
			if colo != "" {
				return refused(ReasonUnknownColo, nil, "")
			}
			return refused(ReasonNoColo, nil, "")
		}
		d := placeText(co, key, src)
		if res.Outcome == Keyed && !r.agree(&d, res.Keys) {
			return refused(ReasonHintMismatch, nil, "")
		}
		return d
	}
	switch res.Outcome {
	case Unsharded:
		return Decision{Source: SourceDefault, Database: c.DefaultDatabase}
	case Refused:
		return r.missingKey(res.Reason, res.Table, res.KeyColumn)
	}
	return r.keyed(res.Keys)
}

// target decides an explicit target (a shard= hint, else the session's
// pgturnstile.shard); ok is false when there is none.
func (r *Router) target(hint Hint, pin Pin, mayTarget bool) (Decision, bool) {
	target := pin.Shard
	if hint.Shard != nil {
		target = string(hint.Shard) // a rare path: allocation allowed
	}
	if target == "" {
		return Decision{}, false
	}
	if !mayTarget {
		return refused(ReasonNotTarget, nil, ""), true
	}
	if target == "all" {
		return Decision{Source: SourceScatter}, true
	}
	for _, db := range r.cluster.Databases() {
		if db == target {
			return Decision{Source: SourceTarget, Database: db}, true
		}
	}
	return refused(ReasonUnknownShard, nil, ""), true
}

// keyed decides from the scanner's keys: every literal must land on one
// database; any $n leaves the decision to the Bind.
func (r *Router) keyed(keys []Key) Decision {
	var d Decision
	have := false
	for _, k := range keys {
		if k.Param > 0 {
			return Decision{Source: SourceParam, Pending: true}
		}
		kd := placeKey(r.cluster.colos[k.Colo], k)
		if !have {
			d, have = kd, true
			continue
		}
		if kd.Database != d.Database {
			return refused(ReasonKeysSplit, nil, "")
		}
		d.widen(kd)
	}
	return d
}

// widen makes d's logical span cover k's, a decision on the same
// database.
func (d *Decision) widen(k Decision) {
	if k.Colo != d.Colo {
		d.ManyColos = true
	}
	d.Logical = min(d.Logical, k.Logical)
	d.LogicalMax = max(d.LogicalMax, k.LogicalMax)
}

// agree reports that the statement's literal keys are all on d's
// database, and widens d's logical span to theirs.
func (r *Router) agree(d *Decision, keys []Key) bool {
	for _, k := range keys {
		if k.Param > 0 {
			continue // checked at Bind against the pinned shard
		}
		kd := placeKey(r.cluster.colos[k.Colo], k)
		if kd.Database != d.Database {
			return false
		}
		d.widen(kd)
	}
	return true
}

// coloFor is the colocation an explicit key hashes by: the named one, the
// cluster's only one, or the one of the statement's tables.
func (r *Router) coloFor(name string, res Result) (*Colo, bool) {
	c := r.cluster
	if name != "" {
		co := c.Colo(name)
		return co, co != nil
	}
	if len(c.colos) == 1 {
		return c.colos[0], true
	}
	if res.Outcome == Keyed && len(res.Keys) > 0 {
		return c.colos[res.Keys[0].Colo], true
	}
	if len(res.Table) > 0 {
		if t, ok := c.Table(res.Table); ok {
			return t.Colo, true
		}
	}
	return nil, false
}

// missingKey applies on_missing_key to a statement the scanner refused.
func (r *Router) missingKey(reason Reason, table []byte, column string) Decision {
	switch r.cluster.OnMissingKey {
	case MissingKeyDefault:
		return Decision{Source: SourceDefault, Database: r.cluster.DefaultDatabase}
	case MissingKeyScatter:
		return Decision{Source: SourceScatter, Reason: reason, Table: table, Column: column}
	}
	return refused(reason, table, column)
}

func refused(reason Reason, table []byte, column string) Decision {
	return Decision{Source: SourceRefused, Reason: reason, Table: table, Column: column}
}

// placeKey places one literal key. A value that does not decode for the
// key's type goes to the colocation's first database: there Postgres
// gives the genuine error, or finds no row (a number written as a string
// of another type cannot equal the key).
func placeKey(co *Colo, k Key) Decision {
	if k.Null {
		l, db := co.Place(NullHash)
		return Decision{Source: SourceLiteral, Database: db, Colo: co, Logical: l, LogicalMax: l}
	}
	d := placeText(co, k.Value, SourceLiteral)
	if k.Number && co.KeyType != KeyBigint && co.KeyType != KeyInt && co.KeyType != KeySmallint {
		// text = 5 or uuid = 5: an error in Postgres wherever it runs.
		return Decision{Source: SourceLiteral, Database: co.databases[0], Colo: co}
	}
	return d
}

func placeText(co *Colo, v []byte, src Source) Decision {
	h, err := co.KeyType.HashText(v)
	if err != nil {
		return Decision{Source: src, Database: co.databases[0], Colo: co}
	}
	l, db := co.Place(h)
	return Decision{Source: src, Database: db, Colo: co, Logical: l, LogicalMax: l}
}

// Prepared is what routing keeps of a Parse whose keys are parameters:
// which $n (and of which colocation) decide, and the literal keys' database
// if any. It is made once per distinct statement and shared by every
// Bind of it.
type Prepared struct {
	params []preparedParam
	// literal is the database the statement's literal keys chose ("" for
	// none), and lit their span of logical shards.
	literal string
	lit     Decision
}

type preparedParam struct {
	n    int // $n, 1-based
	colo *Colo
}

// ErrNoParam is a Bind that does not carry the $n a statement's key is.
var ErrNoParam = errors.New("the Bind does not carry the key's parameter")

// Prepare scans a Parse's text and keeps what its Binds need. A decision
// that is not Pending is final (the Parse names no sharded table, its keys
// are literals, or it is refused) and Prepared is nil.
func (r *Router) Prepare(sql []byte, pin Pin, mayTarget bool) (Decision, *Prepared) {
	s := r.scanner()
	d := r.route(s, sql, pin, mayTarget)
	var p *Prepared
	if d.Pending {
		p, d = r.prepared(s, d)
	}
	r.release(s, &d)
	return d, p
}

// prepared is Prepare's part for a Pending decision, from the keys the
// scan left in s.
func (r *Router) prepared(s *Scanner, d Decision) (*Prepared, Decision) {
	p := &Prepared{}
	for _, k := range s.res.Keys {
		if k.Param > 0 {
			p.params = append(p.params, preparedParam{n: k.Param, colo: r.cluster.colos[k.Colo]})
			continue
		}
		kd := placeKey(r.cluster.colos[k.Colo], k)
		if p.literal != "" && p.literal != kd.Database {
			return nil, refused(ReasonKeysSplit, nil, "")
		}
		if p.literal == "" {
			p.lit = kd
		} else {
			p.lit.widen(kd)
		}
		p.literal = kd.Database
	}
	return p, d
}

// BindParams is a Bind message's parameters as the pooler reads them.
type BindParams interface {
	// Param returns parameter i (0-based): its bytes, whether it is in
	// binary format, and whether it is NULL; ok is false when the Bind
	// has fewer parameters.
	Param(i int) (value []byte, binary, null, ok bool)
}

// Bind decides a Pending statement from its Bind's parameters: every key
// (and the literal ones) must land on one database.
func (p *Prepared) Bind(params BindParams) (Decision, error) {
	d := Decision{Source: SourceParam, Database: p.literal}
	have := p.literal != ""
	if have {
		d.Colo, d.Logical, d.LogicalMax, d.ManyColos = p.lit.Colo, p.lit.Logical, p.lit.LogicalMax, p.lit.ManyColos
	}
	for _, pp := range p.params {
		v, binary, null, ok := params.Param(pp.n - 1)
		if !ok {
			return Decision{}, ErrNoParam
		}
		var kd Decision
		switch {
		case null:
			l, db := pp.colo.Place(NullHash)
			kd = Decision{Database: db, Colo: pp.colo, Logical: l, LogicalMax: l}
		case binary:
			h, err := pp.colo.KeyType.HashBinary(v)
			if err != nil {
				kd = Decision{Database: pp.colo.databases[0], Colo: pp.colo}
				break
			}
			l, db := pp.colo.Place(h)
			kd = Decision{Database: db, Colo: pp.colo, Logical: l, LogicalMax: l}
		default:
			kd = placeText(pp.colo, v, SourceParam)
		}
		if d.Database != "" && kd.Database != d.Database {
			return refused(ReasonKeysSplit, nil, ""), nil
		}
		if !have {
			d.Database, d.Colo, d.Logical, d.LogicalMax = kd.Database, kd.Colo, kd.Logical, kd.LogicalMax
			have = true
			continue
		}
		d.widen(kd)
	}
	return d, nil
}
