package pooler

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Lowering max_prepared_statements (SET or RELOAD) shrinks a server's
// statement cache to the new limit the next time a statement is prepared
// on it, as PgBouncer: the least recently used statements are closed on
// the server. Before, each new statement evicted one, so the cache stayed
// at its old size.
func TestLoweredMaxPreparedStatementsShrinksServerCache(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"ps": "pool_mode=transaction"}, "default_pool_size = 1\nmax_prepared_statements = 5\n")
	defer tp.shutdown(t, fake)

	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fe := pgproto3.NewFrontend(conn, conn)
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "u"}, {"database", "ps"}})); err != nil {
		t.Fatal(err)
	}
	untilReady := func(what string) {
		t.Helper()
		for {
			m, err := fe.Receive()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			switch m := m.(type) {
			case *pgproto3.ErrorResponse:
				t.Fatalf("%s: %s %s", what, m.Code, m.Message)
			case *pgproto3.ReadyForQuery:
				return
			}
		}
	}
	untilReady("login")
	prepare := func(i int) {
		t.Helper()
		fe.Send(&pgproto3.Parse{Name: fmt.Sprintf("s%d", i), Query: fmt.Sprintf("SELECT %d", i)})
		fe.Send(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		untilReady(fmt.Sprintf("prepare s%d", i))
	}
	cached := func() int {
		t.Helper()
		servers := tp.svc.Console().Servers()
		if len(servers) != 1 {
			t.Fatalf("%d servers; want 1", len(servers))
		}
		return servers[0].PreparedStatements
	}
	for i := range 5 {
		prepare(i)
	}
	if n := cached(); n != 5 {
		t.Fatalf("the server holds %d statements; want 5", n)
	}

	cfg := *tp.svc.config()
	cfg.Settings.MaxPreparedStatements = 2
	if err := tp.svc.Apply(&cfg, false); err != nil {
		t.Fatal(err)
	}
	prepare(5)
	if n := cached(); n != 2 {
		t.Errorf("after max_prepared_statements was lowered to 2 and one more statement prepared, the server holds %d statements; want 2", n)
	}
	if problems, errs := fake.takeProblems(); len(problems) > 0 || errs > 0 {
		t.Errorf("the server saw %d protocol problems and sent %d errors: %v", len(problems), errs, problems)
	}
}
