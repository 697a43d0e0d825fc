package shard

import "strings"

// What a client is told when the router refuses a statement, and the
// pinning variables' values: the router's words, kept beside its
// decisions so that the pooler only sends them.

// RefusalText is a refused decision's ERROR 0A000: the message, a DETAIL
// naming the table and the reason, and a HINT with the ways to name a
// key.
func RefusalText(d Decision) (msg, detail, hint string) {
	var b strings.Builder
	if len(d.Table) > 0 {
		b.WriteString("table ")
		b.Write(d.Table)
		if d.Column != "" {
			b.WriteString(" (key " + d.Column + ")")
		}
		b.WriteString(": ")
	}
	b.WriteString(d.Reason.Text())
	hint = d.Reason.Hint()
	if hint == "" {
		hint = "Give the key in the statement (WHERE key = value), or name it: /* pgturnstile: shard_key=VALUE */ before the statement, or SET LOCAL pgturnstile.shard_key = 'VALUE' in a transaction."
	}
	return "pgturnstile: statement cannot be routed to one shard", b.String(), hint
}

// CrossShardText is the refusal of a statement of a transaction on shard
// pinned that the router sends elsewhere (d) or refuses: a scatter is
// refused with the scatter's reason.
func CrossShardText(d Decision, pinned string) (msg, detail, hint string) {
	if d.Source == SourceScatter {
		d = Decision{Source: SourceRefused, Reason: ReasonScatter, Table: d.Table, Column: d.Column}
	}
	if d.Source == SourceRefused {
		return RefusalText(d)
	}
	return "pgturnstile: statement for shard " + d.Database + " in a transaction on shard " + pinned,
		"A transaction runs on the shard of its first statement.", "Run it in a transaction of its own."
}

// RaiseSQL is a statement that makes Postgres itself raise 0A000 with
// msg, detail and hint: sent in place of a statement of a linked
// transaction, it ends the transaction failed on the server as on the
// client.
func RaiseSQL(msg, detail, hint string) string {
	return "DO $pgturnstile$BEGIN RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = " + sqlString(msg) +
		", DETAIL = " + sqlString(detail) + ", HINT = " + sqlString(hint) + "; END$pgturnstile$"
}

// sqlString quotes s as a standard SQL string literal.
func sqlString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Set sets the pin's variable name (pgturnstile.shard_key, .colo or
// .shard, without the prefix) to value; nil value clears it (RESET).
// False: name is none of the three.
func (p *Pin) Set(name string, value []byte) bool {
	switch name {
	case "shard_key":
		p.Key = value
	case "colo":
		p.Colo = string(value)
	case "shard":
		p.Shard = string(value)
	default:
		return false
	}
	return true
}

// EscapeStrings reports whether a standard_conforming_strings value makes
// '…' take backslash escapes: a value Postgres reads as false (parse_bool:
// off, false, no, 0 and their unambiguous prefixes).
func EscapeStrings(standardConformingStrings string) bool {
	v := strings.ToLower(strings.TrimSpace(standardConformingStrings))
	switch {
	case v == "0":
		return true
	case len(v) >= 2 && strings.HasPrefix("off", v):
		return true
	case v != "" && (strings.HasPrefix("false", v) || strings.HasPrefix("no", v)):
		return true
	}
	return false
}
