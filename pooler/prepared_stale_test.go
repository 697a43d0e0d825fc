package pooler

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// A statement whose plan went stale on the server (0A000 cached plan must
// not change result type, after a migration): the request that began an
// implicit transaction and describes what it runs is sent again once,
// re-prepared, and the client sees only the second run; one that does not
// describe gets the error, and the next use prepares the statement again;
// in a transaction block the error reaches the client (issue 32).
func TestStalePlanPreparedAgain(t *testing.T) {
	fake, tp := startPSPooler(t)
	c := dialPS(t, tp, "ps")
	const q = "SELECT 1 /* select_star */"
	c.send(&pgproto3.Parse{Name: "s1", Query: q}, &pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{})
	const ran = "2|T|D|C:SELECT 1|Z"
	if got := c.untilReady(); got != "1|"+ran {
		t.Fatalf("prepare and execute: %s", got)
	}
	runAgain := func(what string, want string, msgs ...pgproto3.FrontendMessage) {
		t.Helper()
		c.send(msgs...)
		if got := c.untilReady(); got != want {
			t.Fatalf("%s: %s, want %s", what, got, want)
		}
	}
	bindDescribe := []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{}}
	bindOnly := []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{}}
	const stale = "E ERROR 0A000 cached plan must not change result type|Z"

	fake.take()
	fake.migrate()
	runAgain("Bind, Describe, Execute after a migration", ran, bindDescribe...)
	// The server got the request, its error, then Close and Parse of the
	// statement and the request again.
	var kinds []byte
	for _, m := range fake.take() {
		kinds = append(kinds, m.typ)
	}
	if got, want := string(kinds), "BDESCPBDES"; got != want {
		t.Errorf("the server got %s, want %s", got, want)
	}
	runAgain("and again", ran, bindDescribe...)

	fake.migrate()
	runAgain("Bind, Execute without a Describe", stale, bindOnly...)
	runAgain("the next, prepared again", "2|D|C:SELECT 1|Z", bindOnly...)

	fake.migrate()
	runAgain("BEGIN", "C:BEGIN|Z", &pgproto3.Query{String: "BEGIN"})
	runAgain("in a block", stale, bindDescribe...)
	runAgain("ROLLBACK", "C:ROLLBACK|Z", &pgproto3.Query{String: "ROLLBACK"})
	runAgain("after ROLLBACK", ran, bindDescribe...)

	// A new client preparing the text: Parse answered by the pooler,
	// Describe of the statement sent again.
	fake.migrate()
	d := dialPS(t, tp, "ps")
	d.send(&pgproto3.Parse{Name: "mine", Query: q}, &pgproto3.Describe{ObjectType: 'S', Name: "mine"}, &pgproto3.Sync{})
	if got := d.untilReady(); got != "1|T|Z" {
		t.Fatalf("new client's Parse and Describe: %s", got)
	}
	if problems, _ := fake.takeProblems(); len(problems) > 0 {
		t.Errorf("protocol problems: %v", problems)
	}
}
