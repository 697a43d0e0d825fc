package classify

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/pgturnstile/pgturnstile/admission"
	"github.com/pgturnstile/pgturnstile/config"
)

// maxLevels is the most tree levels a Session or Tag can carry.
const maxLevels = config.MaxAdmissionLevels

// Policy is a compiled admission policy. It is immutable, so the pooler's
// goroutines share it; RELOAD builds a new one.
type Policy struct {
	gen   uint32 // stamps Sessions and Tags made by this Policy
	names []string
	def   int8

	short, long, decay time.Duration
	shed               string

	levels []string
	// values[l] lists the values declared at level l in the tree, with ""
	// at index 0 standing for "undeclared" (the tree's "other"); index[l]
	// is its inverse. Sessions and Tags hold these indexes, so they carry
	// no strings and cost no allocation.
	values [][]string
	index  []map[string]uint16
	tree   *admission.Tree

	rules []rule
	users map[string]int8 // max_priority of the users that set one

	otherLeaf admission.LeafID // every level undeclared
}

type rule struct {
	user, database, app string // "" matches anything
	prio                int8   // -1: the default priority
	vals                [maxLevels]uint16
}

// gens numbers Policies; 0 is never used, so zero Sessions and Tags belong
// to none.
var gens atomic.Uint32

func nextGen() uint32 {
	for {
		if g := gens.Add(1); g != 0 {
			return g
		}
	}
}

// Load reads the admission_file at file and compiles it; an error of the
// compilation names the file.
func Load(file string) (*Policy, error) {
	raw, err := config.LoadAdmission(file)
	if err != nil {
		return nil, err
	}
	pol, err := New(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return pol, nil
}

// New compiles p. It checks again what config.ParseAdmission guarantees, so
// that a policy built by hand cannot make the classifier index out of range.
func New(p *config.AdmissionPolicy) (*Policy, error) {
	if p == nil {
		return nil, errors.New("classify: no policy")
	}
	tiers := len(p.Priorities)
	if tiers < 1 || tiers > config.MaxAdmissionPriorities {
		return nil, fmt.Errorf("classify: %d priorities, want 1 to %d", tiers, config.MaxAdmissionPriorities)
	}
	validTier := func(t int) bool { return t >= 0 && t < tiers }
	if !validTier(p.DefaultPriority) {
		return nil, fmt.Errorf("classify: default priority %d out of range", p.DefaultPriority)
	}
	if len(p.Levels) > maxLevels {
		return nil, fmt.Errorf("classify: %d levels, want at most %d", len(p.Levels), maxLevels)
	}
	spec := admission.TreeSpec{Levels: p.Levels}
	for _, n := range p.Nodes {
		spec.Nodes = append(spec.Nodes, admission.NodeSpec{Path: n.Path, Weight: n.Weight, Ceiling: n.Ceiling})
	}
	tree, err := admission.NewTree(spec)
	if err != nil {
		return nil, fmt.Errorf("classify: %w", err)
	}
	c := &Policy{
		gen:    nextGen(),
		names:  append([]string(nil), p.Priorities...),
		def:    int8(p.DefaultPriority),
		short:  p.ShortTimeout,
		long:   p.LongTimeout,
		decay:  p.DebtDecayInterval,
		shed:   p.ShedSQLState,
		levels: append([]string(nil), p.Levels...),
		values: make([][]string, len(p.Levels)),
		index:  make([]map[string]uint16, len(p.Levels)),
		tree:   tree,
		users:  map[string]int8{},
	}
	for l := range c.levels {
		c.values[l] = []string{""}
		c.index[l] = map[string]uint16{}
	}
	for _, n := range p.Nodes {
		for l, v := range n.Path {
			if _, ok := c.index[l][v]; ok || v == "" {
				continue
			}
			if len(c.values[l]) > 0xffff {
				return nil, fmt.Errorf("classify: more than %d values at level %q", 0xffff, c.levels[l])
			}
			c.index[l][v] = uint16(len(c.values[l]))
			c.values[l] = append(c.values[l], v)
		}
	}
	for _, r := range p.Rules {
		if r.Priority != -1 && !validTier(r.Priority) {
			return nil, fmt.Errorf("classify: rule at line %d: priority %d out of range", r.Line, r.Priority)
		}
		if r.Category != nil && len(r.Category) != len(c.levels) {
			return nil, fmt.Errorf("classify: rule at line %d: %d category values for %d levels", r.Line, len(r.Category), len(c.levels))
		}
		cr := rule{user: r.User, database: r.Database, app: r.ApplicationName, prio: int8(r.Priority)}
		for l, v := range r.Category {
			cr.vals[l] = c.index[l][v]
		}
		c.rules = append(c.rules, cr)
	}
	for name, u := range p.Users {
		if u.MaxPriority == -1 {
			continue
		}
		if !validTier(u.MaxPriority) {
			return nil, fmt.Errorf("classify: user %q: max priority %d out of range", name, u.MaxPriority)
		}
		c.users[name] = int8(u.MaxPriority)
	}
	var none [maxLevels]uint16
	c.otherLeaf = c.leafOf(&none)
	return c, nil
}

// Tiers is the number of priority tiers.
func (p *Policy) Tiers() int { return len(p.names) }

// PriorityName names a tier ("3" for a tier the policy does not have).
func (p *Policy) PriorityName(prio int) string {
	if prio >= 0 && prio < len(p.names) {
		return p.names[prio]
	}
	return strconv.Itoa(prio)
}

// DefaultPriority is the tier of a session nothing places.
func (p *Policy) DefaultPriority() int { return int(p.def) }

// Short and Long are the CoDel timeout floors.
func (p *Policy) Short() time.Duration { return p.short }
func (p *Policy) Long() time.Duration  { return p.long }

// DebtDecay is the time a full pool's worth of debt takes to decay.
func (p *Policy) DebtDecay() time.Duration { return p.decay }

// ShedSQLState is the SQLSTATE of a shed transaction, "53000" or "53300".
func (p *Policy) ShedSQLState() string { return p.shed }

// Tree is the fair-share tree; LeafIDs from this Policy are its leaves.
func (p *Policy) Tree() *admission.Tree { return p.tree }

// GateConfig is the part of a gate's configuration this policy decides;
// the pooler adds PoolSize, MaxWait and the clock.
func (p *Policy) GateConfig() admission.Config {
	return admission.Config{
		Tiers:     len(p.names),
		Short:     p.short,
		Long:      p.long,
		DebtDecay: p.decay,
		Tree:      p.tree,
	}
}

// leafOf maps value indexes to a leaf. The strings are the policy's own, so
// the tree's map lookups find them without copying anything.
func (p *Policy) leafOf(vals *[maxLevels]uint16) admission.LeafID {
	var s [maxLevels]string
	for l := range p.levels {
		s[l] = p.values[l][vals[l]]
	}
	return p.tree.Leaf(s[:len(p.levels)])
}

// Session is the class of a client connection before any tag: what the
// rules, the startup options and the defaults give it, and the most
// important tier tags may ask for. The pooler keeps one per client and
// recomputes it when application_name changes or the policy is reloaded.
type Session struct {
	gen  uint32
	prio int8
	max  int8
	vals [maxLevels]uint16
	leaf admission.LeafID
}

// Priority is the session's tier when a transaction carries no tag.
func (s Session) Priority() int { return int(s.prio) }

// MaxPriority is the most important tier a tag may ask for.
func (s Session) MaxPriority() int { return int(s.max) }

// Leaf is the session's category leaf when a transaction carries no tag.
func (s Session) Leaf() admission.LeafID { return s.leaf }

// OptionTag is one pgturnstile.KEY=VALUE setting from the startup options
// (see SplitOptions). Key is lowercase, without the "pgturnstile." prefix.
type OptionTag struct {
	Key, Value string
}

// Session places a client: the first rule that matches user, database and
// applicationName gives a priority (else the default) and category values;
// the user's max_priority, or else that priority, bounds what opts and
// later tags may ask for; then opts apply in order (a later one wins),
// priority clamped to the maximum. Unknown keys and values that are not a
// tier are ignored; undeclared category values select "other".
func (p *Policy) Session(user, database, applicationName string, opts []OptionTag) Session {
	s := Session{gen: p.gen, prio: p.def}
	for i := range p.rules {
		r := &p.rules[i]
		if match(r.user, user) && match(r.database, database) && match(r.app, applicationName) {
			if r.prio >= 0 {
				s.prio = r.prio
			}
			s.vals = r.vals
			break
		}
	}
	s.max = s.prio
	if m, ok := p.users[user]; ok {
		s.max = m
		s.prio = max(s.prio, m)
	}
	// Copies on the stack let options and tags share one []byte path
	// without allocating.
	var kbuf [config.MaxAdmissionNameLen]byte
	var vbuf [maxValueBytes]byte
	for _, o := range opts {
		if len(o.Key) > len(kbuf) || len(o.Value) > len(vbuf) {
			continue // longer than any key or value this policy knows
		}
		k := kbuf[:copy(kbuf[:], o.Key)]
		v := vbuf[:copy(vbuf[:], o.Value)]
		var set uint8
		if prio, ok := p.apply(k, v, &s.vals, &set); ok {
			s.prio = max(prio, s.max)
		}
	}
	s.leaf = p.leafOf(&s.vals)
	return s
}

func match(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	ok, _ := path.Match(pattern, name) // patterns were checked at load
	return ok
}

// apply applies one key=value to vals (marking the levels it sets in set);
// for a priority key with a valid tier it returns that tier instead.
func (p *Policy) apply(key, v []byte, vals *[maxLevels]uint16, set *uint8) (prio int8, isPrio bool) {
	switch string(key) {
	case "priority":
		return p.priorityOf(v)
	case "category":
		p.applyCategory(v, vals, set)
		return 0, false
	}
	if l := p.levelIndex(key); l >= 0 {
		vals[l] = p.valueIndex(l, v)
		*set |= 1 << l
	}
	return 0, false
}

// priorityOf reads a tier name or number.
func (p *Policy) priorityOf(v []byte) (int8, bool) {
	for i, n := range p.names {
		if string(v) == n {
			return int8(i), true
		}
	}
	if len(v) == 0 || len(v) > 2 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n >= len(p.names) {
		return 0, false
	}
	return int8(n), true
}

func (p *Policy) valueIndex(l int, v []byte) uint16 {
	return p.index[l][string(v)] // a missing value reads 0: "other"
}

// applyCategory reads "v0/v1/…" (values from the root level down; an empty
// one leaves its level alone) or "level=value/level=value". A value with
// more parts than levels, or naming an unknown level, is ignored whole.
func (p *Policy) applyCategory(v []byte, vals *[maxLevels]uint16, set *uint8) {
	var tmp [maxLevels]uint16
	var tset uint8
	for i := 0; len(v) > 0 || i == 0; i++ {
		seg := v
		if j := indexByte(v, '/'); j >= 0 {
			seg, v = v[:j], v[j+1:]
		} else {
			v = nil
		}
		l := i
		if j := indexByte(seg, '='); j >= 0 {
			l = p.levelIndex(seg[:j])
			seg = seg[j+1:]
		}
		if l < 0 || l >= len(p.levels) {
			return
		}
		if len(seg) > 0 {
			tmp[l] = p.valueIndex(l, seg)
			tset |= 1 << l
		}
	}
	for l := range p.levels {
		if tset&(1<<l) != 0 {
			vals[l] = tmp[l]
		}
	}
	*set |= tset
}

func (p *Policy) levelIndex(name []byte) int {
	for l, n := range p.levels {
		if string(name) == n {
			return l
		}
	}
	return -1
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// Classify classifies a transaction by its first statement: a simple
// Query's text, or the text of the Parse its first Bind refers to.
func (p *Policy) Classify(s *Session, sql []byte) admission.Class {
	t, ok := p.TagOf(sql)
	return p.ClassifyTag(s, t, ok)
}

// ClassifyTag classifies a transaction whose first statement carried t (ok
// as TagOf returned it). A tag's priority is clamped to the session's
// maximum; its category values replace the session's at the levels it
// names.
func (p *Policy) ClassifyTag(s *Session, t Tag, ok bool) admission.Class {
	if s.gen != p.gen {
		// A zero Session or one from a replaced policy: default class,
		// and never more important than it was.
		prio := max(p.def, min(s.prio, int8(len(p.names)-1)))
		return admission.Class{Priority: int(prio), Leaf: p.otherLeaf}
	}
	c := admission.Class{Priority: int(s.prio), Leaf: s.leaf}
	if !ok || t.gen != p.gen {
		return c
	}
	if t.prio > 0 {
		c.Priority = int(max(t.prio-1, s.max))
	}
	if t.set != 0 {
		vals := s.vals
		for l := range p.levels {
			if t.set&(1<<l) != 0 {
				vals[l] = t.vals[l]
			}
		}
		c.Leaf = p.leafOf(&vals)
	}
	return c
}

// OptionIssue is a startup option (OptionTag) that Session did not apply
// as written: the client is told (pooler: a NOTICE at login) rather than
// left to find out from SHOW ADMISSION.
type OptionIssue struct {
	Reason string // IssueUnknownKey, IssueBadPriority or IssueClampedPriority
	Key    string // without the "pgturnstile." prefix
	Value  string
	// Max is the most important priority the session may have, for
	// IssueClampedPriority.
	Max string
}

// The reasons of an OptionIssue, also the label of the counter of them.
const (
	IssueUnknownKey      = "unknown_key"      // not priority, category, or a level of the tree
	IssueBadPriority     = "bad_priority"     // priority= names no tier
	IssueClampedPriority = "clamped_priority" // priority above the user's max_priority: lowered to it
)

// OptionIssues lists what Session(user, database, applicationName, opts)
// ignored or changed among opts: unknown keys, priorities that name no
// tier, priorities more important than the session may ask for (clamped).
// It runs once per login with options, not on the path of a transaction.
func (p *Policy) OptionIssues(user, database, applicationName string, opts []OptionTag) []OptionIssue {
	var out []OptionIssue
	var sess Session
	placed := false
	for _, o := range opts {
		switch {
		case o.Key == "priority":
			prio, ok := p.priorityOf([]byte(o.Value))
			if !ok {
				out = append(out, OptionIssue{Reason: IssueBadPriority, Key: o.Key, Value: o.Value})
				continue
			}
			if !placed {
				sess, placed = p.Session(user, database, applicationName, nil), true
			}
			if prio < sess.max {
				out = append(out, OptionIssue{Reason: IssueClampedPriority, Key: o.Key, Value: o.Value,
					Max: p.PriorityName(int(sess.max))})
			}
		case o.Key == "category", p.levelIndex([]byte(o.Key)) >= 0:
		default:
			out = append(out, OptionIssue{Reason: IssueUnknownKey, Key: o.Key, Value: o.Value})
		}
	}
	return out
}
