package stmtcache

import (
	"bytes"
	"strings"
)

// DeallocateTarget recognises a query body that is exactly
// "DEALLOCATE [PREPARE] name[;]" and returns name (unquoted). ALL is not a
// target.
func DeallocateTarget(body []byte) (string, bool) {
	// Most queries are not DEALLOCATE: tell them apart without a copy.
	if t := bytes.TrimLeft(body, " \t\r\n\f\v"); len(t) < len("deallocate") || !bytes.EqualFold(t[:len("deallocate")], []byte("deallocate")) {
		return "", false
	}
	q := strings.TrimRight(string(body), "\x00")
	q = strings.TrimSpace(q)
	q = strings.TrimSpace(strings.TrimSuffix(q, ";"))
	f := strings.Fields(q)
	if len(f) < 2 || !strings.EqualFold(f[0], "deallocate") {
		return "", false
	}
	f = f[1:]
	if len(f) == 2 && strings.EqualFold(f[0], "prepare") {
		f = f[1:]
	}
	if len(f) != 1 {
		return "", false
	}
	name := f[0]
	if len(name) >= 2 && name[0] == '"' && name[len(name)-1] == '"' {
		// "" is no name (Postgres: zero-length delimited identifier).
		unquoted := strings.ReplaceAll(name[1:len(name)-1], `""`, `"`)
		return unquoted, unquoted != ""
	}
	if strings.EqualFold(name, "all") {
		return "", false
	}
	return strings.ToLower(name), true
}
