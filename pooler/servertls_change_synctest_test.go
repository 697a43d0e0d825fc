package pooler

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// A change of server_tls_* (SET, RELOAD) closes the servers connected
// with the old settings, as PgBouncer tags every pool dirty: a plaintext
// server does not survive TLS being turned on; the next transaction logs
// in a new server with the new settings.
func TestTimingServerTLSChangeClosesOldServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sslRequests atomic.Int32
		r := startTimingRig(t, "pool_mode = transaction\n", refuseSSL(&sslRequests))
		c := r.connect("u", nil)
		if rep := c.query("SELECT 1"); !rep.ready || rep.err != nil {
			t.Fatalf("first query: %v", rep)
		}
		if sslRequests.Load() != 0 {
			t.Fatal("TLS asked for with server_tls_sslmode = disable")
		}
		if err := r.svc.Apply(parseTimingConfig(t, "pool_mode = transaction\nserver_tls_sslmode = prefer\n"), false); err != nil {
			t.Fatal(err)
		}
		r.sleepUntil(time.Since(r.start) + 2*janitorPeriod)
		if how := r.pg.endedHow(1); how == "" {
			t.Error("the plaintext server is still open after server_tls_sslmode was changed to prefer")
		}
		// PgBouncer's line; the server's prefix (S-n: db/user@addr),
		// which the suite matches per pool ("pTxnPool.*database
		// configuration changed"), comes from the attributes.
		if re := regexp.MustCompile(`closing because: database configuration changed \(age=\S+\)" conn=S-\d+ db=db user=u addr=`); !re.MatchString(r.log.String()) {
			t.Errorf("no log line matching %q in\n%s", re, r.log.String())
		}
		if rep := c.query("SELECT 2"); !rep.ready || rep.err != nil {
			t.Fatalf("query after the change: %v", rep)
		}
		if pids := r.serverPIDs(); len(pids) != 1 || pids[0] == 1 {
			t.Errorf("servers after the change: %v; want one new one", pids)
		}
		if n := sslRequests.Load(); n != 1 {
			t.Errorf("%d SSLRequests; want 1 (the new server's login)", n)
		}
	})
}

// A login error cached while server_tls_* made logins fail is forgotten
// when server_tls_* changes: the next client is not refused with it.
func TestTimingServerTLSChangeClearsCachedLoginError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sslRequests atomic.Int32
		settings := "pool_mode = transaction\nserver_login_retry = 30\nquery_wait_timeout = 20\n"
		r := startTimingRig(t, settings+"server_tls_sslmode = require\n", refuseSSL(&sslRequests))
		// The fake refuses TLS: require fails every login. The first
		// client is refused with it (a TLS setup the settings require
		// cannot be retried into working: loginfail.FailsWaiters); the
		// second at once with the cached error (PgBouncer's fast fail).
		first := r.startClient("u")
		synctest.Wait()
		if sslRequests.Load() == 0 {
			t.Fatal("no login was tried")
		}
		if rep := first.readReply(); rep.err == nil || rep.err.Message != "server login failed: server refused SSL" {
			t.Fatalf("first client while logins fail: %v; want FATAL server login failed: server refused SSL", rep)
		}
		if rep := r.startClient("u").readReply(); rep.err == nil {
			t.Fatalf("second client while logins fail: %v; want the cached login error", rep)
		}
		if err := r.svc.Apply(parseTimingConfig(t, settings+"server_tls_sslmode = prefer\n"), false); err != nil {
			t.Fatal(err)
		}
		third := r.startClient("u")
		if rep := third.readReply(); !rep.ready || rep.err != nil {
			t.Errorf("client after server_tls_sslmode was fixed: %v; want logged in", rep)
		}
	})
}

// startClient sends a client's startup packet for db without reading the
// reply.
func (r *timingRig) startClient(user string) *pipeClient {
	r.t.Helper()
	mine, theirs := net.Pipe()
	r.svc.serveConn(theirs)
	pc := &pipeClient{conn: mine, fe: pgproto3.NewFrontend(mine, mine)}
	r.clients = append(r.clients, pc)
	pc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: 196608, Parameters: map[string]string{"user": user, "database": "db"}})
	if err := pc.fe.Flush(); err != nil {
		r.t.Fatalf("startup: %v", err)
	}
	return pc
}

// refuseSSL makes the rig's fake Postgres answer an SSLRequest with 'N',
// as a Postgres without ssl does, counting the requests.
func refuseSSL(n *atomic.Int32) func(*Service) {
	return func(s *Service) {
		pgDial := s.dial
		s.dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := pgDial(ctx, network, address)
			if err != nil {
				return nil, err
			}
			return &sslRefuser{Conn: c, n: n}, nil
		}
	}
}

var sslRequestPacket = []byte{0, 0, 0, 8, 4, 210, 22, 47}

// sslRefuser answers an SSLRequest, the first thing written, with 'N'
// itself; everything else goes to the fake.
type sslRefuser struct {
	net.Conn
	n       *atomic.Int32
	mu      sync.Mutex
	first   bool // something was written
	pending bool // an 'N' is owed to the next Read
}

func (c *sslRefuser) Write(b []byte) (int, error) {
	c.mu.Lock()
	first := !c.first
	c.first = true
	if first && bytes.Equal(b, sslRequestPacket) {
		c.pending = true
		c.mu.Unlock()
		c.n.Add(1)
		return len(b), nil
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *sslRefuser) Read(b []byte) (int, error) {
	c.mu.Lock()
	if c.pending && len(b) > 0 {
		c.pending = false
		c.mu.Unlock()
		b[0] = 'N'
		return 1, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(b)
}
