package pooler

import (
	"context"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// A client waiting for a server that cannot log in (Postgres accepts the
// connection and never answers: pre_auth_delay, an overloaded host) is
// ended by query_timeout when it is set, with PgBouncer's words for a
// waiting client ("query_timeout"), not left to its own connect timeout;
// the login is given up after server_connect_timeout with "connect
// timeout" in the log (PgBouncer's suite: test_server_connect_timeout_establish).
func TestTimingQueryTimeoutEndsLoginWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var held []net.Conn
		r := startTimingRig(t, "", func(s *Service) {
			s.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
				mine, theirs := net.Pipe()
				held = append(held, theirs) // read nothing, answer nothing
				return mine, nil
			}
		})
		t.Cleanup(func() {
			for _, c := range held {
				c.Close()
			}
		})
		// Set on the console, as the suite does.
		for _, kv := range [][2]string{{"query_timeout", "3"}, {"server_connect_timeout", "2"}} {
			if err := r.svc.Console().Set(kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
		mine, theirs := net.Pipe()
		r.svc.serveConn(theirs)
		pc := &pipeClient{conn: mine, fe: pgproto3.NewFrontend(mine, mine)}
		r.clients = append(r.clients, pc)
		pc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: 196608, Parameters: map[string]string{"user": "u", "database": "db"}})
		if err := pc.fe.Flush(); err != nil {
			t.Fatalf("startup: %v", err)
		}
		rep := pc.readReply()
		checkError(t, rep, pgerror.QueryTimeoutWaiting, "FATAL", "08P01", "query_timeout")
		if got := r.elapsed(rep.at); got < 3*time.Second || got > 3*time.Second+janitorPeriod {
			t.Errorf("the client was ended after %v; want query_timeout (3s) to the next janitor tick", got)
		}
		if !strings.Contains(r.log.String(), "closing because: connect timeout") {
			t.Errorf("no \"closing because: connect timeout\" in the log:\n%s", r.log.String())
		}
	})
}
