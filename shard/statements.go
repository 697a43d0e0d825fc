package shard

import (
	"bytes"
	"sync"
)

// Statements is a map's routing of the statements its clients prepare,
// shared by every client: each client keeps only a pointer to the
// Statement of its prepared text. A pooler's hot path reads what the last
// hundred clients read too (the text, the Prepared of pgbench's or an
// ORM's few statements), so it stays in cache; a copy per client would be
// a cold read at every Bind. Safe for concurrent use. Bounded: past
// maxStatements (or maxStatementBytes of text) a statement is prepared for
// its client alone.
type Statements struct {
	mu    sync.Mutex
	m     [2]map[string]*Statement // by mayTarget
	bytes int
}

const (
	maxStatements     = 4096
	maxStatementBytes = 4 << 20
)

// Statement is the routing of one prepared text under one map: final
// (Decision), or decided by each Bind (Prepared); Tx marks transaction
// control, which the pooler answers or sends on without a decision. Never
// changed once made.
type Statement struct {
	Text     string
	Tx       TxControl
	Decision Decision
	Prepared *Prepared
}

// Prepared returns the Statement of sql for a session with no pin, from
// the cluster's shared ones when it has it (or can add it). The session's
// escape-strings setting is the router's (SetEscapeStrings); only the
// common setting (off: standard_conforming_strings on) is shared.
func (r *Router) Statement(sql []byte, mayTarget bool) *Statement {
	c := r.cluster
	if r.escapeStrings {
		return r.newStatement(sql, Pin{}, mayTarget)
	}
	ss := &c.statements
	t := 0
	if mayTarget {
		t = 1
	}
	ss.mu.Lock()
	st := ss.m[t][string(sql)]
	ss.mu.Unlock()
	if st != nil {
		return st
	}
	st = r.newStatement(sql, Pin{}, mayTarget)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if prev := ss.m[t][st.Text]; prev != nil {
		return prev // another client's, made meanwhile: one copy
	}
	if n := len(ss.m[0]) + len(ss.m[1]); n < maxStatements && ss.bytes+len(st.Text) <= maxStatementBytes {
		if ss.m[t] == nil {
			ss.m[t] = map[string]*Statement{}
		}
		ss.m[t][st.Text] = st
		ss.bytes += len(st.Text)
	}
	return st
}

// PrepareStatement returns a Statement of sql for a session with pin, for
// it alone.
func (r *Router) PrepareStatement(sql []byte, pin Pin, mayTarget bool) *Statement {
	return r.newStatement(sql, pin, mayTarget)
}

func (r *Router) newStatement(sql []byte, pin Pin, mayTarget bool) *Statement {
	st := &Statement{Text: string(sql)}
	if st.Tx, _ = ReadTxControl(sql); st.Tx != TxNone {
		st.Decision = Decision{Source: SourceDefault}
		return st
	}
	st.Decision, st.Prepared = r.Prepare(sql, pin, mayTarget)
	if st.Decision.Table != nil {
		st.Decision.Table = bytes.Clone(st.Decision.Table) // the scanner's memory is reused
	}
	return st
}
