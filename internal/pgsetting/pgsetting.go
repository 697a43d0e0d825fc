// Package pgsetting is what the pooler writes and compares of Postgres
// run-time parameters (client_encoding, search_path, …): the statement
// that gives a server a client's startup value, the comparison of a
// reported value with the client's as PgBouncer makes it, SQL quoting of
// names and values, and a canonical key for a set of parameters.
package pgsetting

import (
	"slices"
	"strconv"
	"strings"
)

// Same compares a reported value with the client's as PgBouncer
// does, case-insensitively (client_encoding utf8 is UTF8), except for a
// value with a quoted identifier, whose case is its meaning.
func Same(have, want string) bool {
	if strings.ContainsRune(want, '"') || strings.ContainsRune(have, '"') {
		return have == want
	}
	return strings.EqualFold(have, want)
}

// scalarSettings are the tracked parameters whose value is one word or a
// plain string to Postgres: for these "SET name='value'" means what the
// startup packet's name=value means, and it is PgBouncer's form (its log
// watchers read varcache_apply lines).
var scalarSettings = map[string]bool{
	"client_encoding": true, "DateStyle": true, "TimeZone": true,
	"standard_conforming_strings": true, "application_name": true,
	"IntervalStyle": true, "default_transaction_read_only": true,
}

// AppendSet writes the statement that gives name the value a startup
// packet's name=value would give it. For a list parameter SET with a
// quoted string is not that: SET search_path = 'a,b' is the one schema
// "a,b", while the startup value a,b is two. set_config takes the text as
// the startup packet does, for any parameter.
func AppendSet(sb *strings.Builder, name, value string) {
	if scalarSettings[name] {
		sb.WriteString("SET ")
		sb.WriteString(QuoteIdent(name))
		sb.WriteString("=")
		sb.WriteString(QuoteLiteral(value))
		sb.WriteString(";")
		return
	}
	sb.WriteString("SELECT pg_catalog.set_config(")
	sb.WriteString(QuoteLiteral(name))
	sb.WriteString(", ")
	sb.WriteString(QuoteLiteral(value))
	sb.WriteString(", false);")
}

// QuoteLiteral quotes v as an SQL string literal.
func QuoteLiteral(v string) string {
	if strings.ContainsRune(v, '\\') {
		return "E'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), "'", "''") + "'"
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// QuoteIdent quotes a parameter name when it is not a plain identifier.
func QuoteIdent(n string) string {
	plain := n != ""
	for _, c := range n {
		if !(c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			plain = false
		}
	}
	if plain {
		return n
	}
	return `"` + strings.ReplaceAll(n, `"`, `""`) + `"`
}

// Key is a canonical string of a parameter map: sorted name=value
// pairs, each part length-prefixed so no two maps share a key.
func Key(m map[string]string) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	size := 0
	for _, k := range names {
		size += len(k) + len(m[k]) + 2*(2+1) // two lengths of (usually) up to 2 digits, two colons
	}
	var b strings.Builder
	b.Grow(size) // one allocation, not one per growth
	var num [20]byte
	for _, k := range names {
		b.Write(strconv.AppendInt(num[:0], int64(len(k)), 10))
		b.WriteByte(':')
		b.WriteString(k)
		b.Write(strconv.AppendInt(num[:0], int64(len(m[k])), 10))
		b.WriteByte(':')
		b.WriteString(m[k])
	}
	return b.String()
}
