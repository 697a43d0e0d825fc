package pooler

import (
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// noticeReply reads up to ReadyForQuery or the connection's end, keeping
// the NOTICEs' texts and when each came.
type noticeReply struct {
	reply
	notices []string
	at      []time.Time
}

func readWithNotices(pc *pipeClient) noticeReply {
	var r noticeReply
	for {
		msg, err := pc.fe.Receive()
		if err != nil {
			r.ioErr, r.reply.at = err, time.Now()
			return r
		}
		switch m := msg.(type) {
		case *pgproto3.NoticeResponse:
			if m.Severity != "NOTICE" || m.Code != "00000" {
				r.notices = append(r.notices, "bad fields: "+m.Severity+" "+m.Code+" "+m.Message)
			} else {
				r.notices = append(r.notices, m.Message)
			}
			r.at = append(r.at, time.Now())
		case *pgproto3.ErrorResponse:
			e := *m
			r.err = &e
		case *pgproto3.ReadyForQuery:
			r.ready, r.status, r.reply.at = true, m.TxStatus, time.Now()
			return r
		}
	}
}

// query_wait_notify: a client queued that long hears PgBouncer's NOTICE,
// once per wait, and again in a later wait; one served sooner hears none.
func TestTimingQueryWaitNotify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\ndefault_pool_size = 1\nreserve_pool_size = 0\nquery_wait_timeout = 0\nquery_wait_notify = 2\n")
		holder := r.connect("u", nil)
		if rep := holder.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("holder's query: %v", rep)
		}
		waiter := r.connect("u", nil)
		r.sleepUntil(250 * time.Millisecond) // off the janitor's beat
		got := make(chan noticeReply, 1)
		ask := func(c *pipeClient) {
			c.fe.Send(&pgproto3.Query{String: "SELECT 2"})
			go func() {
				if err := c.fe.Flush(); err != nil {
					got <- noticeReply{reply: reply{ioErr: err}}
					return
				}
				got <- readWithNotices(c)
			}()
		}
		ask(waiter)
		r.sleepUntil(5 * time.Second) // 4.75 s in the queue
		holder.close()                // the waiter gets the server
		rep := <-got
		if !rep.ready || rep.err != nil || len(rep.notices) != 1 || rep.notices[0] != msgQueued {
			t.Fatalf("waiter's reply %v, notices %q; want one %q", rep.reply, rep.notices, msgQueued)
		}
		if at := r.elapsed(rep.at[0]); at < 2250*time.Millisecond || at > 2250*time.Millisecond+janitorPeriod {
			t.Errorf("notice at %v; want 2 s after the wait began (0.25 s), by the next janitor tick", at)
		}
		// Served at once: no notice.
		ask(waiter)
		if rep := <-got; !rep.ready || len(rep.notices) != 0 {
			t.Errorf("unqueued query: %v, notices %q; want none", rep.reply, rep.notices)
		}
		// A second wait of the same client is told again.
		other := r.connect("u", nil)
		ask(other)
		r.sleepUntil(8 * time.Second)
		waiter.close()
		if rep := <-got; !rep.ready || len(rep.notices) != 1 {
			t.Errorf("second waiter: %v, notices %q; want one", rep.reply, rep.notices)
		}
	})
}

// query_wait_notify = 0: no notice however long the wait.
func TestTimingQueryWaitNotifyOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "pool_mode = session\ndefault_pool_size = 1\nreserve_pool_size = 0\nquery_wait_timeout = 0\nquery_wait_notify = 0\n")
		holder := r.connect("u", nil)
		if rep := holder.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("holder's query: %v", rep)
		}
		waiter := r.connect("u", nil)
		waiter.fe.Send(&pgproto3.Query{String: "SELECT 2"})
		got := make(chan noticeReply, 1)
		go func() { waiter.fe.Flush(); got <- readWithNotices(waiter) }()
		r.sleepUntil(10 * time.Second)
		holder.close()
		if rep := <-got; !rep.ready || len(rep.notices) != 0 {
			t.Errorf("waiter: %v, notices %q; want none", rep.reply, rep.notices)
		}
	})
}

// login_notify_message: a NOTICE with the welcome, before ReadyForQuery.
func TestLoginNotifyMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startTimingRig(t, "login_notify_message = you are on the pooler\n")
		mine, theirs := net.Pipe()
		r.svc.serveConn(theirs)
		pc := &pipeClient{conn: mine, fe: pgproto3.NewFrontend(mine, mine)}
		r.clients = append(r.clients, pc)
		pc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: 196608, Parameters: map[string]string{"user": "u", "database": "db"}})
		if err := pc.fe.Flush(); err != nil {
			t.Fatal(err)
		}
		if rep := readWithNotices(pc); !rep.ready || len(rep.notices) != 1 || rep.notices[0] != "you are on the pooler" {
			t.Errorf("login: %v, notices %q; want one with the message", rep.reply, rep.notices)
		}
	})
}
