package pooler

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// server_fast_close: after RECONNECT a session client idle between
// transactions loses its server at once, with FATAL "database
// configuration changed"; one in a transaction keeps it until the
// transaction ends. Without the setting the server stays with its client.
func TestTimingServerFastClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\nserver_fast_close = 1\n")
		idle, inTx := r.connect("u", nil), r.connect("u", nil)
		if rep := idle.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query: %v", rep)
		}
		if rep := inTx.query("BEGIN"); !rep.ready || rep.status != 'T' {
			t.Fatalf("BEGIN: %v", rep)
		}
		got := make(chan reply, 1)
		go func() { got <- idle.readReply() }()
		r.sleepUntil(time.Second)
		if err := r.svc.Console().Reconnect("db"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case rep := <-got:
			checkError(t, rep, pgerror.ConfigChanged, "FATAL", "08P01", "database configuration changed")
			if at := r.elapsed(rep.at); at != time.Second {
				t.Errorf("told at %v; want at the RECONNECT (1s)", at)
			}
		default:
			t.Fatal("the idle session client kept its server after RECONNECT")
		}
		if rep := inTx.query("SELECT 2"); !rep.ready || rep.err != nil || rep.status != 'T' {
			t.Fatalf("query in the open transaction: %v", rep)
		}
		if rep := inTx.query("COMMIT"); !rep.ready || rep.err != nil {
			t.Fatalf("COMMIT: %v", rep)
		}
		go func() { got <- inTx.readReply() }()
		r.sleepUntil(time.Second + 2*janitorPeriod)
		select {
		case rep := <-got:
			checkError(t, rep, pgerror.ConfigChanged, "FATAL", "08P01", "database configuration changed")
		default:
			t.Fatal("the session client kept its server after its transaction ended")
		}
		time.Sleep(janitorPeriod)
		synctest.Wait()
		// PgBouncer's lines: each server closed, and each client told
		// (disconnect_server passes its reason on to the linked client).
		if n := strings.Count(r.log.String(), "closing because: database configuration changed"); n != 4 {
			t.Errorf("%d close lines; want 4 (two servers, two clients):\n%s", n, r.log.String())
		}
		if n := strings.Count(r.log.String(), "closing because: client close request"); n != 0 {
			t.Errorf("a client the pooler closed is logged as closing itself:\n%s", r.log.String())
		}
	})
}

func TestTimingServerFastCloseOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\n")
		c := r.connect("u", nil)
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("query: %v", rep)
		}
		if err := r.svc.Console().Reconnect("db"); err != nil {
			t.Fatal(err)
		}
		r.sleepUntil(2 * time.Second)
		if rep := c.query("SELECT 2"); !rep.ready || rep.err != nil {
			t.Errorf("query after RECONNECT without server_fast_close: %v", rep)
		}
	})
}
