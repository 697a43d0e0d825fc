package pooler

// The fake Postgres's SQL side: what each statement kind answers, the
// failures an input can inject, DEALLOCATE and DISCARD ALL, SET, COPY FROM
// STDIN. fakeserver_test.go has the connection and the extended protocol.

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

var fakeRowDescription = &pgproto3.RowDescription{Fields: []pgproto3.FieldDescription{
	{Name: []byte("query"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
	{Name: []byte("params"), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1},
}}

// fakeKind classifies a statement by its first word.
func fakeKind(q []byte) string {
	if len(bytes.TrimSpace(q)) == 0 {
		return "empty"
	}
	t := bytes.TrimLeft(q[:min(len(q), 64)], " \t\r\n\f\v")
	end := bytes.IndexAny(t, " \t\r\n\f\v;(")
	if end < 0 {
		end = len(t)
	}
	word := strings.ToLower(string(t[:end]))
	switch word {
	case "begin", "start":
		return "begin"
	case "commit", "end":
		return "commit"
	case "rollback", "abort":
		return "rollback"
	case "discard", "deallocate", "set", "copy", "do":
		return word
	}
	return "select"
}

// run executes a statement: simple says it came as a Query (which sends
// RowDescription itself and ends with ReadyForQuery, except while COPY
// runs). It reports whether the caller should send ReadyForQuery.
func (fc *fakeConn) run(q, params []byte, simple bool) bool {
	kind := fakeKind(q)
	extended := !simple
	if kind == "empty" {
		fc.send(&pgproto3.EmptyQueryResponse{})
		return true
	}
	if fc.tx == 'E' && kind != "commit" && kind != "rollback" {
		fc.fail(extended, "25P02", "current transaction is aborted, commands ignored until end of transaction block")
		return true
	}
	if failed, ready := fc.injectedFailure(q, simple); failed {
		return ready
	}
	if bytes.Contains(q, []byte("notice")) {
		fc.send(&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000", Message: "a notice"})
		fc.flush()
	}
	switch kind {
	case "set":
		fc.setStatements(q)
		return true
	case "copy":
		return fc.copyFrom(q, simple)
	}
	if tag, ok := fc.command(kind, q, params, simple); ok {
		fc.send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	}
	return true
}

// injectedFailure fails a statement whose text asks for it: fail_fatal
// (FATAL, the connection closes), fail_parse in a simple query (a syntax
// error; in Parse it fails there instead), fail_exec (an execution error).
// failed reports that it did; ready is then run's result.
func (fc *fakeConn) injectedFailure(q []byte, simple bool) (failed, ready bool) {
	extended := !simple
	switch {
	case bytes.Contains(q, []byte("fail_fatal")):
		fc.fatal("57P01", "terminating connection due to administrator command")
		return true, false
	case simple && bytes.Contains(q, []byte("fail_parse")):
		fc.fail(extended, "42601", "syntax error at or near \"fail_parse\"")
		return true, true
	case bytes.Contains(q, []byte("fail_exec")):
		fc.fail(extended, "42P01", "relation \"fail_exec\" does not exist")
		return true, true
	}
	return false, false
}

// command executes a statement answered by CommandComplete and returns
// its tag; ok is false when it failed instead (the error is sent).
func (fc *fakeConn) command(kind string, q, params []byte, simple bool) (tag string, ok bool) {
	extended := !simple
	switch kind {
	case "begin":
		fc.tx = 'T'
		return "BEGIN", true
	case "commit":
		tag = "COMMIT"
		if fc.tx == 'E' {
			tag = "ROLLBACK"
		}
		fc.tx = 'I'
		clear(fc.portals)
		return tag, true
	case "rollback":
		fc.tx = 'I'
		clear(fc.portals)
		return "ROLLBACK", true
	case "discard":
		return fc.discardAll(extended)
	case "deallocate":
		return fc.deallocate(q, extended)
	case "do":
		return "DO", true
	}
	if simple {
		fc.send(fakeRowDescription)
	}
	row := [][]byte{[]byte(fakeDigest(q)), []byte(fakeDigest(params))}
	switch {
	case bytes.Contains(q, fakeBigRowMarker):
		row[1] = fakeBigRow
	case bytes.Contains(q, fakeNoRowMarker):
		return "SELECT 0", true
	case bytes.Contains(q, fakeNullMarker):
		row[1] = nil
	}
	fc.send(&pgproto3.DataRow{Values: row})
	return "SELECT 1", true
}

// A statement that carries fakeBigRowMarker gets fakeBigRow (8 KiB) in
// its row's second column: a test fills a client's socket buffers with a
// thousand replies instead of a hundred thousand.
var (
	fakeBigRowMarker = []byte("/* fake:bigrow */")
	fakeBigRow       = bytes.Repeat([]byte("x"), 8<<10)
)

// A statement that carries fakeNoRowMarker returns no row; one that
// carries fakeNullMarker a NULL second column: what an auth_query answers
// for an unknown role and for a role without a password.
var (
	fakeNoRowMarker = []byte("/* fake:norow */")
	fakeNullMarker  = []byte("/* fake:null */")
)

// discardAll runs DISCARD ALL: refused in a transaction block, else it
// drops the named statements and the portals.
func (fc *fakeConn) discardAll(extended bool) (tag string, ok bool) {
	if fc.tx != 'I' {
		fc.fail(extended, "25001", "DISCARD ALL cannot run inside a transaction block")
		return "", false
	}
	fc.dropNamedStatements()
	clear(fc.portals)
	return "DISCARD ALL", true
}

// dropNamedStatements forgets every prepared statement but the unnamed one.
func (fc *fakeConn) dropNamedStatements() {
	for name := range fc.stmts {
		if name != "" {
			delete(fc.stmts, name)
		}
	}
}

// deallocate runs DEALLOCATE [PREPARE] name or ALL; a name is folded to
// lower case unless double-quoted, as Postgres does.
func (fc *fakeConn) deallocate(q []byte, extended bool) (tag string, ok bool) {
	f := strings.Fields(strings.TrimRight(strings.TrimSpace(string(q)), ";"))
	if len(f) > 1 && strings.EqualFold(f[1], "prepare") {
		f = f[1:]
	}
	if len(f) != 2 {
		fc.fail(extended, "42601", "syntax error in DEALLOCATE")
		return "", false
	}
	if strings.EqualFold(f[1], "all") {
		fc.dropNamedStatements()
		return "DEALLOCATE ALL", true
	}
	name := f[1]
	if len(name) >= 2 && name[0] == '"' && name[len(name)-1] == '"' {
		name = strings.ReplaceAll(name[1:len(name)-1], `""`, `"`)
	} else {
		name = strings.ToLower(name)
	}
	if name == "" || fc.stmts[name] == nil {
		fc.fail(extended, "26000", fmt.Sprintf("prepared statement %q does not exist", name))
		return "", false
	}
	delete(fc.stmts, name)
	return "DEALLOCATE", true
}

// setStatements answers each statement of a SET string with CommandComplete,
// reporting the parameters Postgres reports (GUC_REPORT) first.
func (fc *fakeConn) setStatements(q []byte) {
	for _, stmt := range strings.Split(string(q), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if name, value, ok := fakeParseSet(stmt); ok {
			if strings.EqualFold(name, "datestyle") && value == "German" {
				// Postgres reports the canonical form of what was set.
				value = "German, DMY"
			}
			switch strings.ToLower(name) {
			case "application_name", "client_encoding", "datestyle", "timezone", "intervalstyle", "standard_conforming_strings":
				fc.send(&pgproto3.ParameterStatus{Name: name, Value: value})
			}
		}
		fc.send(&pgproto3.CommandComplete{CommandTag: []byte("SET")})
	}
}

// copyFrom starts COPY FROM STDIN, which only a simple query may run here;
// it reports run's result (no ReadyForQuery until the COPY ends).
func (fc *fakeConn) copyFrom(q []byte, simple bool) bool {
	if !simple || !strings.Contains(strings.ToLower(string(q)), "from stdin") {
		fc.fail(!simple, "0A000", "COPY is only supported FROM STDIN in a simple query here")
		return true
	}
	fc.copyIn = true
	fc.copyBytes = 0
	fc.send(&pgproto3.CopyInResponse{OverallFormat: 0})
	fc.flush()
	return false
}

// copyMessage handles a message while COPY FROM STDIN runs (started by a
// simple query, so it ends with ReadyForQuery).
func (fc *fakeConn) copyMessage(typ byte, body []byte) {
	switch typ {
	case 'd':
		fc.copyBytes += len(body)
		return
	case 'H':
		return // ignored during COPY, as Postgres does
	case 'S':
		return // ignored during COPY, as Postgres does
	case 'c':
		fc.send(&pgproto3.CommandComplete{CommandTag: []byte("COPY " + strconv.Itoa(fc.copyBytes))})
	case 'f':
		fc.fail(false, "57014", "COPY from stdin failed: "+string(bytes.TrimRight(body, "\x00")))
	default:
		fc.fail(false, "08P01", fmt.Sprintf("unexpected message type 0x%02X during COPY from stdin", typ))
	}
	fc.copyIn = false
	fc.ready()
}

// fakeParseSet reads "SET name = value" / "SET name TO value" with the
// name optionally double-quoted and the value optionally single-quoted.
func fakeParseSet(stmt string) (name, value string, ok bool) {
	s := strings.TrimSpace(stmt)
	if len(s) < 4 || !strings.EqualFold(s[:4], "set ") {
		return "", "", false
	}
	s = strings.TrimSpace(s[4:])
	if strings.HasPrefix(s, `"`) {
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return "", "", false
		}
		name, s = s[1:1+end], s[2+end:]
	} else {
		i := strings.IndexAny(s, " =")
		if i < 0 {
			return "", "", false
		}
		name, s = s[:i], s[i:]
	}
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "="):
		s = s[1:]
	case len(s) >= 3 && strings.EqualFold(s[:3], "to "):
		s = s[3:]
	default:
		return "", "", false
	}
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		s = strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	return name, s, true
}
