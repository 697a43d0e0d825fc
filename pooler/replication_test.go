package pooler

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// replClient is a raw client connection for the replication tests: it
// logs in with the given startup parameters and reads the pooler's replies.
type replClient struct {
	t    *testing.T
	conn net.Conn
	br   *backendReader
}

func dialRepl(t *testing.T, addr string, params [][2]string) *replClient {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(startupPacket(0, params)); err != nil {
		t.Fatal(err)
	}
	return &replClient{t: t, conn: conn, br: newBackendReader(conn)}
}

// untilReady reads up to ReadyForQuery or the end of the connection and
// returns the message types read, an ErrorResponse as E(message), and the
// ParameterStatus values.
func (rc *replClient) untilReady() (string, map[string]string) {
	rc.t.Helper()
	var out []string
	params := map[string]string{}
	for {
		typ, body, err := rc.br.next()
		if err != nil {
			if isClosed(err) || strings.Contains(err.Error(), "EOF") {
				return strings.Join(out, " "), params
			}
			rc.t.Fatalf("after %v: %v", out, err)
		}
		switch typ {
		case 'E':
			msg := errorMessage(body)
			if d := errorField(body, 'D'); d != "" {
				msg += ": " + d
			}
			out = append(out, "E("+msg+")")
		case 'K':
			params["\x00key"] = string(body)
			out = append(out, "K")
		case 'S':
			kv := strings.SplitN(string(body), "\x00", 3)
			params[kv[0]] = kv[1]
			out = append(out, "S")
		default:
			out = append(out, string(typ))
		}
		if typ == 'Z' {
			return strings.Join(out, " "), params
		}
	}
}

// errorMessage is the M field of an ErrorResponse body.
func errorMessage(body []byte) string { return errorField(body, 'M') }

// errorField is one field of an ErrorResponse body ("" if absent).
func errorField(body []byte, code byte) string {
	for _, f := range strings.Split(string(body), "\x00") {
		if len(f) > 0 && f[0] == code {
			return f[1:]
		}
	}
	return ""
}

func (rc *replClient) query(sql string) {
	msg := append([]byte{'Q', 0, 0, 0, 0}, sql...)
	msg = append(msg, 0)
	binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-1))
	if _, err := rc.conn.Write(msg); err != nil {
		rc.t.Fatal(err)
	}
}

// waitLog waits for a log line containing all of parts.
func waitLog(t *testing.T, tp *testPooler, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, line := range strings.Split(tp.log.tail(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in\n%s", parts, tp.log.tail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicationConnection: a replication client in a transaction-mode
// pool that is full gets a server of its own (an idle one is evicted for
// it), logged in with replication, its parameters and its options as
// given; queries are relayed; SHOW CLIENTS and SHOW SERVERS say logical;
// the server is closed when the client leaves.
func TestReplicationConnection(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"rdb": ""}, "pool_mode = transaction\ndefault_pool_size = 1\n")
	defer tp.shutdown(t, fake)

	// A normal client leaves an idle server: the pool is full.
	normal := dialRepl(t, tp.addr, [][2]string{{"user", "alice"}, {"database", "rdb"}})
	if got, _ := normal.untilReady(); !strings.HasSuffix(got, "Z") {
		t.Fatalf("normal login: %s", got)
	}
	normal.query("select 1")
	if got, _ := normal.untilReady(); !strings.HasSuffix(got, "Z") {
		t.Fatalf("normal query: %s", got)
	}

	rc := dialRepl(t, tp.addr, [][2]string{{"user", "alice"}, {"database", "rdb"},
		{"replication", "database"}, {"application_name", "sub1"},
		{"options", "-c extra_float_digits=3 -c work_mem=64kB"}})
	got, params := rc.untilReady()
	replKey := []byte(params["\x00key"])
	if !strings.HasPrefix(got, "R S") || !strings.HasSuffix(got, "K Z") {
		t.Fatalf("replication login: %s", got)
	}
	if params["application_name"] != "sub1" {
		t.Errorf("welcome application_name %q, want the server's sub1", params["application_name"])
	}
	waitLog(t, tp, "closing because: evicted")

	fake.mu.Lock()
	last := fake.startups[len(fake.startups)-1]
	fake.mu.Unlock()
	if last["replication"] != "database" || last["options"] != "-c extra_float_digits=3 -c work_mem=64kB" || last["application_name"] != "sub1" {
		t.Errorf("the server's startup parameters %v: want replication=database, the options and application_name as given", last)
	}

	fake.take()
	pool := tp.svc.allPools()[0]
	recv0, sent0 := pool.stats.received.Load(), pool.stats.sent.Load()
	rc.query("IDENTIFY_SYSTEM")
	if got, _ := rc.untilReady(); got != "T D C Z" {
		t.Errorf("IDENTIFY_SYSTEM through the pooler: %s, want T D C Z", got)
	}
	// SHOW STATS counts the relayed bytes: the Query's 21 in, the reply out.
	if recv, sent := pool.stats.received.Load()-recv0, pool.stats.sent.Load()-sent0; recv != 21 || sent <= 0 {
		t.Errorf("stats after IDENTIFY_SYSTEM: received %d bytes, sent %d; want 21 and some", recv, sent)
	}
	if msgs := fake.take(); len(msgs) != 1 || msgs[0].typ != 'Q' || !strings.HasPrefix(string(msgs[0].body), "IDENTIFY_SYSTEM") {
		t.Errorf("the server got %v, want the Query", msgs)
	}

	// A cancel request reaches the replication client's own server.
	cancel := []byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e}
	cancel = append(cancel, replKey...)
	if cc, err := net.Dial("tcp", tp.addr); err != nil {
		t.Fatal(err)
	} else {
		cc.Write(cancel)
		cc.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fake.mu.Lock()
		n := fake.cancels
		fake.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server got %d cancel requests, want 1", n)
		}
		time.Sleep(10 * time.Millisecond)
	}

	cv := consoleView{tp.svc}
	var clientRepl, serverRepl []string
	for _, c := range cv.Clients() {
		clientRepl = append(clientRepl, c.Replication+"/"+c.State)
	}
	for _, s := range cv.Servers() {
		serverRepl = append(serverRepl, s.Replication+"/"+s.State)
	}
	if strings.Join(clientRepl, ",") != "none/idle,logical/active" || strings.Join(serverRepl, ",") != "logical/active" {
		t.Errorf("SHOW CLIENTS replication/state %v, SHOW SERVERS %v: want none/idle,logical/active and logical/active", clientRepl, serverRepl)
	}

	rc.conn.Write([]byte{'X', 0, 0, 0, 4})
	rc.conn.Close()
	waitLog(t, tp, "closing because: replication client disconnected")
	waitLog(t, tp, "closing because: client close request")
	deadline = time.Now().Add(5 * time.Second)
	for len(cv.Servers()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("servers left after the replication client: %v", cv.Servers())
		}
		time.Sleep(10 * time.Millisecond)
	}
	normal.conn.Close()
}

// TestReplicationLoginRefused: a server that refuses the walsender fails
// the client with PgBouncer's "login failed", Postgres's words in its
// DETAIL (PgBouncer gives no reason), PgBouncer's "S: login failed" line
// logged, and both closings logged as PgBouncer's "login failed".
func TestReplicationLoginRefused(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"rdb": ""}, "")
	defer tp.shutdown(t, fake)
	rc := dialRepl(t, tp.addr, [][2]string{{"user", "norepl"}, {"database", "rdb"}, {"replication", "yes"}})
	if got, _ := rc.untilReady(); got != "E(login failed: permission denied to start WAL sender)" {
		t.Errorf("refused replication login: %q, want E(login failed: permission denied to start WAL sender)", got)
	}
	waitLog(t, tp, "S: login failed: FATAL: permission denied to start WAL sender", "conn=S-")
	waitLog(t, tp, "closing because: login failed (age=", "conn=S-")
	waitLog(t, tp, "closing because: login failed (age=", "conn=C-")
}

// TestReplicationHBA: a physical replication connection matches only an
// auth_hba_file rule naming the replication keyword; a logical one
// matches by its database like any other.
func TestReplicationHBA(t *testing.T) {
	dir := t.TempDir()
	hba := filepath.Join(dir, "hba.conf")
	users := filepath.Join(dir, "userlist.txt")
	if err := os.WriteFile(hba, []byte("host all all 127.0.0.1/32 trust\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(users, []byte(`"alice" "pw"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"rdb": ""}, fmt.Sprintf("auth_type = hba\nauth_hba_file = %s\nauth_file = %s\n", hba, users))
	defer tp.shutdown(t, fake)
	physical := dialRepl(t, tp.addr, [][2]string{{"user", "alice"}, {"database", "rdb"}, {"replication", "true"}})
	if got, _ := physical.untilReady(); got != `E(no pg_hba.conf entry for host "127.0.0.1", user "alice", database "rdb")` {
		t.Errorf("physical replication without a replication rule: %q", got)
	}
	logical := dialRepl(t, tp.addr, [][2]string{{"user", "alice"}, {"database", "rdb"}, {"replication", "database"}})
	if got, _ := logical.untilReady(); !strings.HasSuffix(got, "K Z") {
		t.Errorf("logical replication under host all all: %q", got)
	}
	// Still connected at the shutdown, which must end its relay (the
	// deferred shutdown checks that no pooler goroutine is left).
	t.Cleanup(func() { logical.conn.Close() })
}

// TestReplicationReconnect: RECONNECT closes a replication server at
// once, as PgBouncer does (it may never be released), and its client is
// told "database configuration changed".
func TestReplicationReconnect(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"rdb": ""}, "")
	defer tp.shutdown(t, fake)
	rc := dialRepl(t, tp.addr, [][2]string{{"user", "alice"}, {"database", "rdb"}, {"replication", "database"}})
	if got, _ := rc.untilReady(); !strings.HasSuffix(got, "K Z") {
		t.Fatalf("replication login: %q", got)
	}
	if err := (consoleView{tp.svc}).Reconnect("rdb"); err != nil {
		t.Fatal(err)
	}
	if got, _ := rc.untilReady(); got != "E(database configuration changed)" {
		t.Errorf("after RECONNECT the replication client got %q, want E(database configuration changed)", got)
	}
	waitLog(t, tp, "closing because: database configuration changed", "conn=S-")
	waitLog(t, tp, "closing because: database configuration changed", "conn=C-")
}
