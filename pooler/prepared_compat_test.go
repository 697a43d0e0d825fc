package pooler

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Prepared-statement mapping where PgBouncer's behaviour is the reference
// (issue 18): its texts and log lines, and what a client's map holds after
// DEALLOCATE ALL, DISCARD ALL and an aborted pipeline.

// psClient is a protocol-level client of a test pooler.
type psClient struct {
	t    *testing.T
	conn net.Conn
	fe   *pgproto3.Frontend
}

func dialPS(t *testing.T, tp *testPooler, db string) *psClient {
	t.Helper()
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	c := &psClient{t: t, conn: conn, fe: pgproto3.NewFrontend(conn, conn)}
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "u"}, {"database", db}})); err != nil {
		t.Fatal(err)
	}
	if got := c.untilReady(); strings.Contains(got, "E ") {
		t.Fatalf("login: %s", got)
	}
	return c
}

// send writes msgs and flushes.
func (c *psClient) send(msgs ...pgproto3.FrontendMessage) {
	c.t.Helper()
	for _, m := range msgs {
		c.fe.Send(m)
	}
	if err := c.fe.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

// untilReady reads up to a ReadyForQuery and returns what came, one word a
// message: "1" ParseComplete, "2" BindComplete, "3" CloseComplete, "T"
// RowDescription, "n" NoData, "D" DataRow, "C:<tag>" CommandComplete,
// "E <severity> <code> <message>" ErrorResponse, "Z".
func (c *psClient) untilReady() string {
	c.t.Helper()
	var out []string
	for {
		m, err := c.fe.Receive()
		if err != nil {
			c.t.Fatalf("after %q: %v", out, err)
		}
		switch m := m.(type) {
		case *pgproto3.ParseComplete:
			out = append(out, "1")
		case *pgproto3.BindComplete:
			out = append(out, "2")
		case *pgproto3.CloseComplete:
			out = append(out, "3")
		case *pgproto3.RowDescription:
			out = append(out, "T")
		case *pgproto3.NoData:
			out = append(out, "n")
		case *pgproto3.DataRow:
			out = append(out, "D")
		case *pgproto3.CommandComplete:
			out = append(out, "C:"+string(m.CommandTag))
		case *pgproto3.ErrorResponse:
			out = append(out, "E "+m.Severity+" "+m.Code+" "+m.Message)
		case *pgproto3.ReadyForQuery:
			out = append(out, "Z")
			return strings.Join(out, "|")
		}
	}
}

func startPSPooler(t *testing.T) (*fakePostgres, *testPooler) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"ps": "pool_mode=transaction"}, "default_pool_size = 1\nmax_prepared_statements = 10\n")
	t.Cleanup(func() { tp.shutdown(t, fake) })
	return fake, tp
}

// After a client's DEALLOCATE ALL or DISCARD ALL its names are gone, as in
// PgBouncer 1.22+, and the connection stays usable. A Bind or Describe of
// one gets Postgres's own error, 26000 prepared statement "…" does not
// exist, as the client would get directly (issue 32: drivers such as
// pgjdbc prepare again on 26000), with PgBouncer's log line for the name
// not found; a name never prepared keeps PgBouncer's 08P01 (issue 18).
// Before issue 18 the Bind went to the server under the client's own name.
func TestBindAfterDeallocateAllIsPostgresError(t *testing.T) {
	for _, reset := range []string{"DEALLOCATE ALL", "DISCARD ALL"} {
		t.Run(reset, func(t *testing.T) {
			fake, tp := startPSPooler(t)
			c := dialPS(t, tp, "ps")
			c.send(&pgproto3.Parse{Name: "_pg3_0", Query: "SELECT 1"}, &pgproto3.Bind{PreparedStatement: "_pg3_0"}, &pgproto3.Execute{}, &pgproto3.Sync{})
			if got := c.untilReady(); got != "1|2|D|C:SELECT 1|Z" {
				t.Fatalf("prepare and execute: %s", got)
			}
			c.send(&pgproto3.Query{String: reset})
			if got := c.untilReady(); got != "C:"+reset+"|Z" {
				t.Fatalf("%s: %s", reset, got)
			}
			fake.take()
			c.send(&pgproto3.Bind{PreparedStatement: "_pg3_0"}, &pgproto3.Execute{}, &pgproto3.Sync{})
			const gone = `E ERROR 26000 prepared statement "_pg3_0" does not exist|Z`
			if got, want := c.untilReady(), gone; got != want {
				t.Errorf("Bind after %s: %s, want %s", reset, got, want)
			}
			c.send(&pgproto3.Describe{ObjectType: 'S', Name: "_pg3_0"}, &pgproto3.Sync{})
			if got, want := c.untilReady(), gone; got != want {
				t.Errorf("Describe after %s: %s, want %s", reset, got, want)
			}
			for _, m := range fake.take() {
				if m.typ == 'B' || m.typ == 'D' {
					t.Errorf("the server got a %c for a name the client does not hold", m.typ)
				}
			}
			log := tp.log.tail()
			for _, line := range []string{"prepared statement '_pg3_0' not found", `pooler error: prepared statement "_pg3_0" does not exist`} {
				if !strings.Contains(log, line) {
					t.Errorf("log lacks %q:\n%s", line, log)
				}
			}
			// Still usable: the name can be prepared again and run.
			c.send(&pgproto3.Parse{Name: "_pg3_0", Query: "SELECT 1"}, &pgproto3.Bind{PreparedStatement: "_pg3_0"}, &pgproto3.Execute{}, &pgproto3.Sync{})
			if got := c.untilReady(); got != "1|2|D|C:SELECT 1|Z" {
				t.Errorf("prepare again: %s", got)
			}
		})
	}
}

// A Parse of a name the client already holds gets PgBouncer's error text
// and SQLSTATE and its log line "prepared statement 'x' was already
// prepared", whether it reaches a server (in a batch with other messages)
// or is answered without one (alone, a statement some server has parsed),
// and the connection stays usable (PgBouncer closes it).
func TestParseOfHeldNameIsPgBouncersError(t *testing.T) {
	fake, tp := startPSPooler(t)
	c := dialPS(t, tp, "ps")
	c.send(&pgproto3.Parse{Name: "test", Query: "SELECT 1"}, &pgproto3.Sync{})
	if got := c.untilReady(); got != "1|Z" {
		t.Fatalf("prepare: %s", got)
	}
	const refused = "E ERROR 08P01 prepared statement name is already in use"
	// Alone: answered without a server.
	c.send(&pgproto3.Parse{Name: "test", Query: "SELECT 1"}, &pgproto3.Sync{})
	if got, want := c.untilReady(), refused+"|Z"; got != want {
		t.Errorf("Parse again: %s, want %s", got, want)
	}
	// After a Query in the same batch: on a server, and what follows it
	// up to the Sync is skipped as Postgres would.
	c.send(&pgproto3.Query{String: "SELECT 2"}, &pgproto3.Parse{Name: "test", Query: "SELECT 1"}, &pgproto3.Bind{PreparedStatement: "test"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got, want := c.untilReady()+"/"+c.untilReady(), "T|D|C:SELECT 1|Z/"+refused+"|Z"; got != want {
		t.Errorf("Query, Parse again, Bind, Execute, Sync: %s, want %s", got, want)
	}
	if n := strings.Count(tp.log.tail(), "prepared statement 'test' was already prepared"); n != 2 {
		t.Errorf("the log has %d lines \"prepared statement 'test' was already prepared\", want 2:\n%s", n, tp.log.tail())
	}
	c.send(&pgproto3.Bind{PreparedStatement: "test"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got := c.untilReady(); got != "2|D|C:SELECT 1|Z" {
		t.Errorf("execute the statement held: %s", got)
	}
	if problems, errs := fake.takeProblems(); len(problems) > 0 || errs > 0 {
		t.Errorf("the server saw %d protocol problems and sent %d errors: %v", len(problems), errs, problems)
	}
}

// In a pipeline, a Parse that fails makes the server skip every message up
// to the Sync, Parses included (issue 18, cause 17). As in PgBouncer, the
// failed and the skipped Parses keep the client's names, and a statement
// is prepared on the server again when the client binds it: psycopg's
// pipeline mode counts them all as prepared and binds them later, which
// once got "prepared statement does not exist". A client that knows its
// Parse did not run may parse the name again without an error.
func TestPipelineSkippedParseKeepsName(t *testing.T) {
	fake, tp := startPSPooler(t)
	c := dialPS(t, tp, "ps")
	run := func(name string) []pgproto3.FrontendMessage {
		return []pgproto3.FrontendMessage{&pgproto3.Bind{PreparedStatement: name}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}}
	}
	var pipe []pgproto3.FrontendMessage
	pipe = append(pipe, &pgproto3.Parse{Name: "_pg3_0", Query: "SELECT 1"})
	pipe = append(pipe, run("_pg3_0")...)
	pipe = append(pipe, &pgproto3.Parse{Name: "_pg3_1", Query: "SELECT fail_parse"})
	pipe = append(pipe, run("_pg3_1")...)
	pipe = append(pipe, &pgproto3.Parse{Name: "_pg3_2", Query: "SELECT 2"})
	pipe = append(pipe, run("_pg3_2")...)
	pipe = append(pipe, &pgproto3.Sync{})
	c.send(pipe...)
	const syntaxError = `E ERROR 42601 syntax error at or near "fail_parse"`
	if got, want := c.untilReady(), "1|2|T|D|C:SELECT 1|"+syntaxError+"|Z"; got != want {
		t.Fatalf("the pipeline: %s, want %s", got, want)
	}
	// The skipped statement runs: prepared on the server at its Bind.
	c.send(append(run("_pg3_2"), &pgproto3.Sync{})...)
	if got, want := c.untilReady(), "2|T|D|C:SELECT 1|Z"; got != want {
		t.Errorf("Bind of the skipped _pg3_2: %s, want %s", got, want)
	}
	// The failed one is prepared again, and fails again as it would.
	c.send(append(run("_pg3_1"), &pgproto3.Sync{})...)
	if got, want := c.untilReady(), syntaxError+"|Z"; got != want {
		t.Errorf("Bind of the failed _pg3_1: %s, want %s", got, want)
	}
	// Skipped again, then parsed again by a client that knows.
	pipe = []pgproto3.FrontendMessage{&pgproto3.Parse{Name: "_pg3_3", Query: "SELECT fail_parse"}, &pgproto3.Parse{Name: "_pg3_4", Query: "SELECT 4"}, &pgproto3.Sync{}}
	c.send(pipe...)
	if got, want := c.untilReady(), syntaxError+"|Z"; got != want {
		t.Fatalf("second pipeline: %s, want %s", got, want)
	}
	for _, name := range []string{"_pg3_3", "_pg3_4"} {
		c.send(&pgproto3.Parse{Name: name, Query: "SELECT 4"}, &pgproto3.Bind{PreparedStatement: name}, &pgproto3.Execute{}, &pgproto3.Sync{})
		if got, want := c.untilReady(), "1|2|D|C:SELECT 1|Z"; got != want {
			t.Errorf("Parse again of %s, which did not run: %s, want %s", name, got, want)
		}
		// Confirmed now: a further Parse of it is refused.
		c.send(&pgproto3.Parse{Name: name, Query: "SELECT 4"}, &pgproto3.Sync{})
		if got, want := c.untilReady(), "E ERROR 08P01 prepared statement name is already in use|Z"; got != want {
			t.Errorf("a third Parse of %s: %s, want %s", name, got, want)
		}
	}
	if problems, errs := fake.takeProblems(); len(problems) > 0 || errs != 3 {
		t.Errorf("the server saw %d protocol problems and sent %d errors (want 3): %v", len(problems), errs, problems)
	}
}

// A Parse that comes after the server's error has already reached the
// pooler is dropped by the pooler, not skipped by the server; it keeps
// its name all the same, so that what a pipelining client gets does not
// depend on when the error came back (psycopg's pipeline mode: PgBouncer's
// test_prepared_failed_prepare_pipeline failed about one run in 15, with
// "prepared statement did not exist" for the later Bind).
func TestPipelineParseDroppedAfterErrorKeepsName(t *testing.T) {
	fake, tp := startPSPooler(t)
	c := dialPS(t, tp, "ps")
	// The failing Parse and a Flush: its error comes back before the
	// client sends the rest of the pipeline.
	c.send(&pgproto3.Parse{Name: "_pg3_1", Query: "SELECT fail_parse"}, &pgproto3.Flush{})
	m, err := c.fe.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := m.(*pgproto3.ErrorResponse); !ok || e.Code != "42601" {
		t.Fatalf("after the failing Parse and Flush: %#v, want the syntax error", m)
	}
	c.send(&pgproto3.Parse{Name: "_pg3_2", Query: "SELECT 2"}, &pgproto3.Bind{PreparedStatement: "_pg3_2"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got := c.untilReady(); got != "Z" {
		t.Fatalf("the rest of the aborted pipeline: %s, want Z alone", got)
	}
	c.send(&pgproto3.Bind{PreparedStatement: "_pg3_2"}, &pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got, want := c.untilReady(), "2|T|D|C:SELECT 1|Z"; got != want {
		t.Errorf("Bind of the dropped _pg3_2: %s, want %s", got, want)
	}
	// A client that knows it did not run parses it again, without error.
	c.send(&pgproto3.Parse{Name: "_pg3_1", Query: "SELECT 1"}, &pgproto3.Bind{PreparedStatement: "_pg3_1"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got, want := c.untilReady(), "1|2|D|C:SELECT 1|Z"; got != want {
		t.Errorf("Parse again of the failed _pg3_1: %s, want %s", got, want)
	}
	if problems, errs := fake.takeProblems(); len(problems) > 0 || errs != 1 {
		t.Errorf("the server saw %d protocol problems and sent %d errors (want 1): %v", len(problems), errs, problems)
	}
}

// max_prepared_statements set to 0 at runtime stops the mapping for
// clients already connected too, as PgBouncer reads it for each message:
// their statement names go to the server as they are (so a name prepared
// while mapped does not exist there), and the statements the servers
// have stay. Set above 0 again, the mapping resumes with the names the
// client had.
func TestMaxPreparedStatementsZeroAtRuntimeStopsMapping(t *testing.T) {
	fake, tp := startPSPooler(t)
	c := dialPS(t, tp, "ps")
	c.send(&pgproto3.Parse{Name: "s1", Query: "SELECT 1"}, &pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got := c.untilReady(); got != "1|2|D|C:SELECT 1|Z" {
		t.Fatalf("prepare and execute s1: %s", got)
	}
	set := func(n int) {
		t.Helper()
		cfg := *tp.svc.config()
		cfg.Settings.MaxPreparedStatements = n
		if err := tp.svc.Apply(&cfg, false); err != nil {
			t.Fatal(err)
		}
	}
	bindNames := func() []string {
		var names []string
		for _, m := range fake.take() {
			if m.typ == 'B' {
				names = append(names, string(m.body[1:bytes.IndexByte(m.body[1:], 0)+1]))
			}
		}
		return names
	}
	fake.take()

	// A transaction block first: its link has a pump goroutine, which
	// is done with the client's mapping before the mapping stops.
	c.send(&pgproto3.Query{String: "BEGIN"})
	if got := c.untilReady(); got != "C:BEGIN|Z" {
		t.Fatalf("BEGIN: %s", got)
	}
	set(0)
	c.send(&pgproto3.Query{String: "COMMIT"})
	if got := c.untilReady(); got != "C:COMMIT|Z" {
		t.Fatalf("COMMIT: %s", got)
	}
	c.send(&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got, want := c.untilReady(), `E ERROR 26000 prepared statement "s1" does not exist|Z`; got != want {
		t.Errorf("Bind of s1 with max_prepared_statements = 0: %s, want the server's %s", got, want)
	}
	if got := bindNames(); len(got) != 1 || got[0] != "s1" {
		t.Errorf("the server got Binds of %q, want the client's own name s1", got)
	}
	c.send(&pgproto3.Parse{Name: "s2", Query: "SELECT 2"}, &pgproto3.Bind{PreparedStatement: "s2"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got := c.untilReady(); got != "1|2|D|C:SELECT 1|Z" {
		t.Errorf("prepare and execute s2 unmapped: %s", got)
	}
	if got := bindNames(); len(got) != 1 || got[0] != "s2" {
		t.Errorf("the server got Binds of %q, want s2 as it is", got)
	}

	set(10)
	c.send(&pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got := c.untilReady(); got != "2|D|C:SELECT 1|Z" {
		t.Errorf("Bind of s1 mapped again: %s", got)
	}
	if got := bindNames(); len(got) != 1 || !strings.HasPrefix(got[0], "PGTS_") {
		t.Errorf("the server got Binds of %q, want the pooler's name for s1", got)
	}

	// A DISCARD ALL while unmapped drops the server's statements: the
	// pooler knows, and prepares s1 on it again once mapping is back.
	set(0)
	c.send(&pgproto3.Query{String: "DISCARD ALL"})
	if got := c.untilReady(); got != "C:DISCARD ALL|Z" {
		t.Fatalf("DISCARD ALL: %s", got)
	}
	set(10)
	c.send(&pgproto3.Parse{Name: "s1", Query: "SELECT 1"}, &pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	if got := c.untilReady(); got != "1|2|D|C:SELECT 1|Z" {
		t.Errorf("prepare and execute s1 after an unmapped DISCARD ALL: %s", got)
	}
}
