package shard

// Transaction control the pooler answers itself for a sharded cluster: a
// BEGIN opens no transaction on any server until the transaction's first
// routable statement says which shard it belongs to; the BEGIN is sent
// ahead of that statement. A COMMIT or ROLLBACK of a transaction that
// never reached a server is answered too. Only the forms Postgres cannot
// fail on are recognised, so a held BEGIN never fails late.

// TxControl is a transaction-control statement the pooler may answer.
type TxControl uint8

const (
	TxNone     TxControl = iota
	TxBegin              // BEGIN or START TRANSACTION, with valid modes
	TxCommit             // COMMIT or END
	TxRollback           // ROLLBACK or ABORT
	// Held with a BEGIN until the transaction's first statement, sent
	// ahead of it after the BEGIN (their errors, if any, surface there).
	TxSavepoint  // SAVEPOINT name
	TxRelease    // RELEASE [SAVEPOINT] name
	TxRollbackTo // ROLLBACK [WORK|TRANSACTION] TO [SAVEPOINT] name
	TxSetLocal   // SET LOCAL …, SET TRANSACTION …
)

// Tag is the CommandComplete tag Postgres answers the statement with.
func (t TxControl) Tag(startTransaction bool) string {
	switch t {
	case TxBegin:
		if startTransaction {
			return "START TRANSACTION"
		}
		return "BEGIN"
	case TxCommit:
		return "COMMIT"
	case TxRollback, TxRollbackTo:
		return "ROLLBACK"
	case TxSavepoint:
		return "SAVEPOINT"
	case TxRelease:
		return "RELEASE"
	case TxSetLocal:
		return "SET"
	}
	return ""
}

// HeldInTransaction reports the statements a pooler holds after a held
// BEGIN rather than send alone: they only change the transaction's state.
func (t TxControl) HeldInTransaction() bool { return t >= TxSavepoint }

// ReadTxControl recognises a text that is exactly one transaction-control
// statement (a ';' after it allowed): BEGIN [WORK|TRANSACTION] [modes],
// START TRANSACTION [modes], COMMIT|END|ROLLBACK|ABORT [WORK|TRANSACTION]
// [AND NO CHAIN]. modes are ISOLATION LEVEL {SERIALIZABLE | REPEATABLE
// READ | READ COMMITTED | READ UNCOMMITTED}, READ WRITE, READ ONLY and
// [NOT] DEFERRABLE, separated by commas or spaces. start reports START
// TRANSACTION (its tag differs). Anything else, AND CHAIN and ROLLBACK TO
// SAVEPOINT included, is TxNone.
func ReadTxControl(sql []byte) (kind TxControl, start bool) {
	lx := lexer{src: sql}
	var toks [24]token
	n := 0
	for {
		t := lx.next()
		if t.kind == tokEOF {
			break
		}
		if t.kind == tokBad || n == len(toks) {
			return TxNone, false
		}
		toks[n] = t
		n++
	}
	if n > 0 && toks[n-1].kind == tokPunct && sql[toks[n-1].start] == ';' {
		n--
	}
	for _, t := range toks[:n] {
		if t.kind == tokPunct && sql[t.start] == ';' {
			return TxNone, false // more than one statement
		}
	}
	word := func(j int, w string) bool {
		return j < n && toks[j].kind == tokIdent && equalFold(sql[toks[j].start:toks[j].end], w)
	}
	i := 1
	switch {
	case word(0, "begin"):
		kind = TxBegin
		if word(1, "work") || word(1, "transaction") {
			i = 2
		}
	case word(0, "start") && word(1, "transaction"):
		kind, start, i = TxBegin, true, 2
	case word(0, "commit") || word(0, "end"):
		kind = TxCommit
	case word(0, "rollback") || word(0, "abort"):
		kind = TxRollback
		j := 1
		if word(j, "work") || word(j, "transaction") {
			j++
		}
		if word(0, "rollback") && word(j, "to") {
			j++
			if word(j, "savepoint") {
				j++
			}
			if j+1 == n && toks[j].kind == tokIdent || j+1 == n && toks[j].kind == tokQIdent {
				return TxRollbackTo, false
			}
			return TxNone, false
		}
	case word(0, "savepoint"):
		if n == 2 && (toks[1].kind == tokIdent || toks[1].kind == tokQIdent) {
			return TxSavepoint, false
		}
		return TxNone, false
	case word(0, "release"):
		j := 1
		if word(j, "savepoint") {
			j++
		}
		if j+1 == n && (toks[j].kind == tokIdent || toks[j].kind == tokQIdent) {
			return TxRelease, false
		}
		return TxNone, false
	case word(0, "set") && (word(1, "local") || word(1, "transaction")):
		if n > 2 {
			return TxSetLocal, false
		}
		return TxNone, false
	default:
		return TxNone, false
	}
	if kind != TxBegin {
		if word(i, "work") || word(i, "transaction") {
			i++
		}
		if word(i, "and") && word(i+1, "no") && word(i+2, "chain") {
			i += 3
		}
		if i != n {
			return TxNone, false
		}
		return kind, false
	}
	// The modes: each once is not required by Postgres (it takes the last
	// of a repeated one), so any sequence of valid modes is accepted.
	for first := true; i < n; first = false {
		if !first && toks[i].kind == tokPunct && sql[toks[i].start] == ',' {
			i++
		}
		switch {
		case word(i, "isolation") && word(i+1, "level"):
			switch {
			case word(i+2, "serializable"):
				i += 3
			case word(i+2, "repeatable") && word(i+3, "read"):
				i += 4
			case word(i+2, "read") && (word(i+3, "committed") || word(i+3, "uncommitted")):
				i += 4
			default:
				return TxNone, false
			}
		case word(i, "read") && (word(i+1, "write") || word(i+1, "only")):
			i += 2
		case word(i, "deferrable"):
			i++
		case word(i, "not") && word(i+1, "deferrable"):
			i += 2
		default:
			return TxNone, false
		}
	}
	return TxBegin, start
}

// MaybeControl reports whether a text may be one of the statements the
// pooler answers or holds itself (transaction control, SET/RESET of the
// router's settings): whether its first word is one they start with. It
// reads past spaces and comments to the first word only, so that the
// statements of the hot path (SELECT, INSERT, …) are told apart without
// being lexed twice.
func MaybeControl(sql []byte) bool {
	lx := lexer{src: sql}
	if ok, _ := lx.skipSpace(); !ok {
		return false
	}
	start := lx.pos
	end := start
	for end < len(sql) && end-start < 10 && (sql[end]|0x20 >= 'a' && sql[end]|0x20 <= 'z') {
		end++
	}
	if end < len(sql) && isIdentCont(sql[end]) {
		return false // a longer word
	}
	w := sql[start:end]
	switch len(w) {
	case 3:
		return equalFold(w, "set") || equalFold(w, "end")
	case 5:
		return equalFold(w, "reset") || equalFold(w, "begin") || equalFold(w, "start") || equalFold(w, "abort")
	case 6:
		return equalFold(w, "commit")
	case 7:
		return equalFold(w, "release")
	case 8:
		return equalFold(w, "rollback")
	case 9:
		return equalFold(w, "savepoint")
	}
	return false
}
