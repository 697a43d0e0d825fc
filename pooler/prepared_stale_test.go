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
	// The client's description is still of the old shape: as Postgres
	// would, for as long as the client does not prepare the text again,
	// the pooler refuses it, and the server gets none of it but the Sync.
	fake.take()
	runAgain("the next, with the old description", stale, bindOnly...)
	runAgain("even with a Describe", stale, bindDescribe...)
	wantServerGot(t, fake, "SS")
	prepareAgain := []pgproto3.FrontendMessage{&pgproto3.Close{ObjectType: 'S', Name: "s1"}, &pgproto3.Parse{Name: "s1", Query: q}, &pgproto3.Describe{ObjectType: 'S', Name: "s1"}, &pgproto3.Sync{}}
	runAgain("prepared again", "3|1|T|Z", prepareAgain...)
	runAgain("the next, prepared again", "2|D|C:SELECT 1|Z", bindOnly...)

	fake.migrate()
	runAgain("BEGIN", "C:BEGIN|Z", &pgproto3.Query{String: "BEGIN"})
	runAgain("in a block", stale, bindDescribe...)
	runAgain("ROLLBACK", "C:ROLLBACK|Z", &pgproto3.Query{String: "ROLLBACK"})
	runAgain("after ROLLBACK, with the old description", stale, bindDescribe...)
	runAgain("prepared again after ROLLBACK", "3|1|T|Z", prepareAgain...)
	runAgain("after ROLLBACK, prepared again", ran, bindDescribe...)

	// A new client preparing the text: Parse answered by the pooler,
	// Describe of the statement sent again, whose reply gives the new
	// client the new shape; the first client's description is now the
	// old one.
	fake.migrate()
	d := dialPS(t, tp, "ps")
	d.send(&pgproto3.Parse{Name: "mine", Query: q}, &pgproto3.Describe{ObjectType: 'S', Name: "mine"}, &pgproto3.Sync{})
	if got := d.untilReady(); got != "1|T|Z" {
		t.Fatalf("new client's Parse and Describe: %s", got)
	}
	d.send(&pgproto3.Bind{PreparedStatement: "mine"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got := d.untilReady(); got != "2|D|C:SELECT 1|Z" {
		t.Fatalf("new client's Bind, Execute: %s", got)
	}
	runAgain("the first client after the new one's Describe", stale, bindOnly...)
	if problems, _ := fake.takeProblems(); len(problems) > 0 {
		t.Errorf("protocol problems: %v", problems)
	}
}

// wantServerGot checks the message types the fake server got since the
// last take.
func wantServerGot(t *testing.T, fake *fakePostgres, want string) {
	t.Helper()
	var kinds []byte
	for _, m := range fake.take() {
		kinds = append(kinds, m.typ)
	}
	if string(kinds) != want {
		t.Errorf("the server got %q, want %q", kinds, want)
	}
}

// Shape epochs: clients X and Y share the server's statement for one
// text. After a migration X meets the stale plan and prepares the text
// again, which prepares the server's statement again; Y, whose description
// is the old one, must not be sent rows of the new shape: it gets 0A000,
// as its own statement would directly, without anything running on the
// server, until it prepares the text again. X, having prepared it again,
// runs. A request sent again transparently with a Describe (X's, after a
// second migration) gives X the new shape, not Y.
func TestStalePlanOtherClientRefused(t *testing.T) {
	fake, tp := startPSPooler(t)
	const q = "SELECT 1 /* select_star */"
	prepare := []pgproto3.FrontendMessage{&pgproto3.Parse{Name: "s1", Query: q}, &pgproto3.Describe{ObjectType: 'S', Name: "s1"}, &pgproto3.Sync{}}
	prepareAgain := append([]pgproto3.FrontendMessage{&pgproto3.Close{ObjectType: 'S', Name: "s1"}}, prepare...)
	bindOnly := []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{}}
	bindDescribe := []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{}}
	const (
		ran         = "2|D|C:SELECT 1|Z"
		ranDescribe = "2|T|D|C:SELECT 1|Z"
		stale       = "E ERROR 0A000 cached plan must not change result type|Z"
	)
	x, y := dialPS(t, tp, "ps"), dialPS(t, tp, "ps")
	run := func(c *psClient, what, want string, msgs ...pgproto3.FrontendMessage) {
		t.Helper()
		c.send(msgs...)
		if got := c.untilReady(); got != want {
			t.Fatalf("%s: %s, want %s", what, got, want)
		}
	}
	run(x, "X prepares", "1|T|Z", prepare...)
	run(y, "Y prepares", "1|T|Z", prepare...)
	run(x, "X runs", ran, bindOnly...)
	run(y, "Y runs", ran, bindOnly...)

	fake.migrate()
	run(x, "X after the migration", stale, bindOnly...) // Postgres's
	run(x, "X prepares again", "3|1|T|Z", prepareAgain...)
	run(x, "X prepared again", ran, bindOnly...)
	fake.take()
	run(y, "Y with the old description", stale, bindOnly...) // the pooler's
	wantServerGot(t, fake, "S")
	run(y, "Y again with the old description", stale, bindDescribe...)
	run(y, "Y prepares again", "3|1|T|Z", prepareAgain...)
	run(y, "Y prepared again", ran, bindOnly...)

	// A second migration, met by X's describing request: sent again
	// transparently, and X's next Bind without a Describe runs.
	fake.migrate()
	run(x, "X describes after the second migration", ranDescribe, bindDescribe...)
	run(x, "X then without a Describe", ran, bindOnly...)
	run(y, "Y after the second migration", stale, bindOnly...)
	run(y, "Y prepares again", "3|1|T|Z", prepareAgain...)
	run(y, "Y prepared again", ran, bindOnly...)
	if problems, _ := fake.takeProblems(); len(problems) > 0 {
		t.Errorf("protocol problems: %v", problems)
	}
}
