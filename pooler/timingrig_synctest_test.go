package pooler

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/admin"
	"github.com/pgturnstile/pgturnstile/config"
	"github.com/pgturnstile/pgturnstile/internal/pgerror"
)

// timingRig and its helpers serve the synctest timing tests
// (timing_synctest_test.go): a Service in front of a pipePG
// (pipepg_synctest_test.go), its clients on net.Pipe ends.

const janitorPeriod = 100 * time.Millisecond

// timingRig is a Service serving pipe clients in front of a pipePG.
type timingRig struct {
	t       *testing.T
	svc     *Service
	pg      *pipePG
	log     *syncBuffer
	stop    context.CancelFunc
	served  chan error
	clients []*pipeClient
	start   time.Time
}

// timingIni is the configuration of a rig: one database "db" on the fake,
// session pooling unless settings say otherwise.
func timingIni(settings string) string {
	return `[databases]
db = host=fake.invalid port=5432 dbname=fake
[pgbouncer]
listen_addr =
` + testPoolerSettings + settings
}

func parseTimingConfig(t *testing.T, settings string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("timing.ini", []byte(timingIni(settings)))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// startTimingRig must run inside a synctest bubble. Its teardown (a
// t.Cleanup, which runs inside the bubble) closes the clients, the fake's
// backends and the Service; synctest.Test then fails if any goroutine of
// the bubble is left blocked.
func startTimingRig(t *testing.T, settings string, setup ...func(*Service)) *timingRig {
	t.Helper()
	lg := &syncBuffer{}
	svc, err := New(parseTimingConfig(t, settings), slog.New(slog.NewTextHandler(lg, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r := &timingRig{t: t, svc: svc, pg: newPipePG(), log: lg, served: make(chan error, 1), start: time.Now()}
	svc.dial = r.pg.dial
	for _, f := range setup {
		f(svc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.served <- svc.Serve(ctx) }()
	t.Cleanup(r.close)
	synctest.Wait() // the janitor's ticker runs from r.start
	return r
}

func (r *timingRig) close() {
	for _, c := range r.clients {
		c.conn.Close()
	}
	synctest.Wait() // the clients' goroutines end, their servers go idle
	r.pg.closeAll()
	r.stop()
	if err := <-r.served; err != nil {
		r.t.Errorf("Serve: %v", err)
	}
	if strings.Contains(r.log.String(), "panic") {
		r.t.Errorf("the pooler logged a panic:\n%s", r.log.String())
	}
}

// connect logs a client in to db through serveConn; conn wraps the
// client's pipe end on the pooler's side (nil: none).
func (r *timingRig) connect(user string, wrap func(net.Conn) net.Conn) *pipeClient {
	r.t.Helper()
	mine, theirs := net.Pipe()
	if wrap != nil {
		theirs = wrap(theirs)
	}
	r.svc.serveConn(theirs)
	pc := &pipeClient{conn: mine, fe: pgproto3.NewFrontend(mine, mine)}
	r.clients = append(r.clients, pc)
	pc.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: 196608, Parameters: map[string]string{"user": user, "database": "db"}})
	if err := pc.fe.Flush(); err != nil {
		r.t.Fatalf("startup: %v", err)
	}
	if rep := pc.readReply(); !rep.ready || rep.err != nil {
		r.t.Fatalf("login of %s: %+v", user, rep)
	}
	return pc
}

// pool returns the SHOW POOLS row of db/user (zero if there is none).
func (r *timingRig) pool(user string) admin.Pool {
	for _, p := range r.svc.Console().Pools() {
		if p.Database == "db" && p.User == user {
			return p
		}
	}
	return admin.Pool{}
}

// serverPIDs returns the fake pids of the pooler's servers (SHOW SERVERS),
// in the order the pooler opened them.
func (r *timingRig) serverPIDs() []int {
	var pids []int
	for _, s := range r.svc.Console().Servers() {
		pids = append(pids, s.RemotePID)
	}
	return pids
}

// sleepUntil advances fake time to r.start+d, then lets the bubble settle.
func (r *timingRig) sleepUntil(d time.Duration) {
	r.t.Helper()
	if now := time.Since(r.start); now > d {
		r.t.Fatalf("sleepUntil(%v) at %v", d, now)
	}
	time.Sleep(d - time.Since(r.start))
	synctest.Wait()
}

// elapsed is fake time since the rig started.
func (r *timingRig) elapsed(at time.Time) time.Duration { return at.Sub(r.start) }

// syncBuffer is a log sink the pooler's goroutines may write concurrently.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// checkError asserts that rep carries the error the client must see:
// severity, SQLSTATE and text as PgBouncer sends them, which are also
// internal/pgerror's for code.
func checkError(t *testing.T, rep reply, code pgerror.Code, severity, sqlState, text string) {
	t.Helper()
	if e := pgerror.New(code); e.Severity != severity || e.SQLState != sqlState || e.Message != text {
		t.Errorf("pgerror says %s %s %q for code %d; the test expects %s %s %q", e.Severity, e.SQLState, e.Message, code, severity, sqlState, text)
	}
	if rep.err == nil {
		t.Fatalf("reply %+v: want error %s %s %q", rep, severity, sqlState, text)
	}
	if rep.err.Severity != severity || rep.err.Code != sqlState || rep.err.Message != text {
		t.Errorf("error = %s %s %q; want %s %s %q", rep.err.Severity, rep.err.Code, rep.err.Message, severity, sqlState, text)
	}
}
