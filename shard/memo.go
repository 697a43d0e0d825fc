package shard

import "bytes"

// A client of the simple protocol sends the same statement again and
// again with one literal changed: pgbench's `SELECT … WHERE aid = 4711`,
// an ORM's interpolated `WHERE org_id = 42`. Scanning each one costs
// little when the scanner's tables are in the cache, and four times as
// much in a pooler where a hundred clients take turns and evict them
// (bench/FINDINGS.md §3). So a Router remembers its last statement that
// one literal key decided: when the next text is the same bytes around a
// literal of the same form, the decision is that literal's placement, as
// the scan would have found it, for a comparison of the two texts.
//
// Why that is exact: the scan lexes from left to right, so it reaches the
// literal's first byte in the state it reached it before (the bytes in
// front are the same, and end where a token may start: a space, '=', '('
// or ','). A run of digits, or a '…' holding no quote or backslash, is
// one token whatever its value, and the bytes after it are the same and
// do not continue it (not a letter, digit, '.' or '$'). Every token of
// the statement is therefore the same but the literal's value, and the
// scan decides from tokens: the same table, key column, conjuncts and
// cast, so the same one key, whose value is the new literal's. Nothing
// else the decision reads changes: no pin (SET pgturnstile.shard_key or
// .shard), the same standard_conforming_strings, the same cluster (a
// Router serves one; a new map makes a new Router), and no hint (a
// decision by a hint is not remembered). TestRouteMemo and FuzzRouteMemo
// check the claim against a router without a memo.

// maxMemoText bounds the statement a Router copies (issue 34's statements
// of the fast path are at most 512 bytes); maxMemoLiteral the literal it
// places from a comparison.
const (
	maxMemoText    = 512
	maxMemoLiteral = 128
)

// routeMemo is what a Router keeps of its last statement decided by one
// literal key.
type routeMemo struct {
	text []byte
	// at and end: the literal's token in text.
	at, end int
	// key is the statement's key but for its value: colocation, type,
	// and whether it was written as a number.
	key Key
	// neg: a number with a '-' right before it, part of its value.
	neg bool
	// escape: standard_conforming_strings was off.
	escape bool
}

// memoRoute is the decision for sql by the memo, if the memo applies.
func (r *Router) memoRoute(sql []byte, pin Pin) (Decision, bool) {
	m := &r.memo
	if m.text == nil || pin.Key != nil || pin.Shard != "" || m.escape != r.escapeStrings {
		return Decision{}, false
	}
	tail := len(m.text) - m.end
	n := len(sql) - m.at - tail
	if n <= 0 || n > maxMemoLiteral ||
		!bytes.Equal(sql[:m.at], m.text[:m.at]) || !bytes.Equal(sql[len(sql)-tail:], m.text[m.end:]) {
		return Decision{}, false
	}
	lit := sql[m.at : m.at+n]
	k := m.key
	if k.Number {
		for _, c := range lit {
			if !isDigit(c) {
				return Decision{}, false
			}
		}
		k.Value = lit
		if m.neg {
			k.Value = sql[m.at-1 : m.at+n]
		}
	} else {
		// A zero byte too leaves it to the scan, which refuses one where
		// standard_conforming_strings is off (as it does '\000').
		if n < 2 || lit[0] != '\'' || lit[n-1] != '\'' || bytes.IndexByte(lit[1:n-1], '\'') >= 0 || bytes.IndexByte(lit[1:n-1], '\\') >= 0 ||
			bytes.IndexByte(lit[1:n-1], 0) >= 0 {
			return Decision{}, false
		}
		k.Value = lit[1 : n-1]
	}
	return placeKey(r.cluster.colos[k.Colo], k), true
}

// remember keeps sql, just routed by a scan whose result is still in s,
// as the memo when one literal key decided it; otherwise the memo stays
// as it was.
// The caller has checked that d's source is a literal and that sql is at
// most maxMemoText long.
func (r *Router) remember(s *Scanner, sql []byte, pin Pin) {
	if pin.Key != nil || pin.Shard != "" || r.cluster.Views || s.res.Outcome != Keyed || len(s.res.Keys) != 1 {
		return
	}
	k := s.res.Keys[0]
	at, end := int(s.lastKeyAt), int(s.lastKeyEnd)
	if k.Param > 0 || k.Null || at < 1 || end <= at || end > len(sql) || end-at > maxMemoLiteral {
		return
	}
	lit := sql[at:end]
	neg := false
	if k.Number {
		// The value is the digits, or '-' and the digits right after it.
		switch {
		case bytes.Equal(k.Value, lit):
		case len(k.Value) == len(lit)+1 && k.Value[0] == '-' && sql[at-1] == '-' && bytes.Equal(k.Value[1:], lit):
			neg = true
		default:
			return
		}
		for _, c := range lit {
			if !isDigit(c) {
				return
			}
		}
	} else {
		// A plain '…' whose value is its bytes: no prefix (E, U&, N, B,
		// X) before it, no quote or backslash inside.
		if len(lit) < 2 || lit[0] != '\'' || lit[len(lit)-1] != '\'' ||
			bytes.IndexByte(lit[1:len(lit)-1], '\'') >= 0 || bytes.IndexByte(lit[1:len(lit)-1], '\\') >= 0 ||
			!bytes.Equal(k.Value, lit[1:len(lit)-1]) {
			return
		}
	}
	// Where the literal starts a token whatever its value, and ends one.
	switch b := sql[at-1]; {
	case b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '=' || b == '(' || b == ',':
	case b == '-' && neg:
	default:
		return
	}
	if end < len(sql) {
		if b := sql[end]; isIdentCont(b) || b == '.' || b == '$' || b == '\'' {
			return
		}
	}
	m := &r.memo
	m.text = append(m.text[:0], sql...)
	m.at, m.end, m.neg, m.escape = at, end, neg, r.escapeStrings
	m.key = Key{Colo: k.Colo, Type: k.Type, Number: k.Number}
}
