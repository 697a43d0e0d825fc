//go:build linux

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Hostile and malformed input after login: message types the protocol
// does not define, oversized and stalled messages, a second SSLRequest,
// and error texts that must not carry addresses.

// rawSession logs in to db as user through the pooler, which must use
// auth_type = trust, and returns the bare socket with nothing pending on
// it. (Not pgconn and Hijack: pgconn's background reader, started when a
// write is slow, may still be reading the socket after Hijack and swallow
// the pooler's next message.)
func rawSession(p *Pooler, db, user string) (net.Conn, error) {
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(startupPacket("user", user, "database", db)); err != nil {
		conn.Close()
		return nil, err
	}
	for {
		typ, body, err := readMsg(conn)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("login: %w", err)
		}
		switch {
		case typ == 'E':
			conn.Close()
			return nil, fmt.Errorf("login: %v", errorFields(body))
		case typ == 'R' && binary.BigEndian.Uint32(body) != 0:
			conn.Close()
			return nil, fmt.Errorf("login: the pooler asks for a password (auth request %d); use auth_type = trust", binary.BigEndian.Uint32(body))
		case typ == 'Z':
			_ = conn.SetDeadline(time.Time{})
			return conn, nil
		}
	}
}

// rawSessionIn is rawSession to otherDB as appUser, inside a transaction
// block when inTx, closed when the test ends.
func rawSessionIn(t *testing.T, p *Pooler, inTx bool) net.Conn {
	t.Helper()
	conn, err := rawSession(p, otherDB, appUser)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if inTx {
		if st, err := rawQuery(conn, "BEGIN; SELECT 1"); err != nil || st != 'T' {
			t.Fatalf("BEGIN: status %q, %v", st, err)
		}
	}
	return conn
}

// rawQuery runs sql as a simple Query on conn and returns the status of
// its ReadyForQuery.
func rawQuery(conn net.Conn, sql string) (byte, error) {
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetDeadline(time.Time{})
	q, err := (&pgproto3.Query{String: sql}).Encode(nil)
	if err != nil {
		return 0, err
	}
	if _, err := conn.Write(q); err != nil {
		return 0, err
	}
	for {
		typ, body, err := readMsg(conn)
		if err != nil {
			return 0, err
		}
		switch typ {
		case 'E':
			return 0, fmt.Errorf("%s: ErrorResponse %v", sql, errorFields(body))
		case 'Z':
			return body[0], nil
		}
	}
}

// fatalThenClose reads what the pooler sends until it closes conn: exactly
// one ErrorResponse is expected. It fails when conn stays open past limit.
func fatalThenClose(conn net.Conn, limit time.Duration) (map[byte]string, error) {
	return fatalThenCloseAfter(conn, limit, "")
}

// fatalThenCloseAfter is fatalThenClose where messages of the types in
// before may come first: the replies to what the client sent before the
// refused input, which the pooler may relay before its FATAL (as
// PostgreSQL itself answers a query before it reads the bytes after it).
func fatalThenCloseAfter(conn net.Conn, limit time.Duration, before string) (map[byte]string, error) {
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	var fields map[byte]string
	for {
		typ, body, err := readMsg(conn)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fields, fmt.Errorf("still open after %v (error so far: %v)", limit, fields)
			}
			if fields == nil {
				return nil, fmt.Errorf("closed without an ErrorResponse: %v", err)
			}
			return fields, nil
		}
		if fields == nil && typ != 'E' && strings.IndexByte(before, typ) >= 0 {
			continue
		}
		if typ != 'E' || fields != nil {
			return fields, fmt.Errorf("unexpected message %q %q", typ, body)
		}
		fields = errorFields(body)
	}
}

// wantFatal checks an ErrorResponse's severity, SQLSTATE and message.
func wantFatal(fields map[byte]string, code, message string) error {
	if fields['S'] != "FATAL" || fields['C'] != code || fields['M'] != message {
		return fmt.Errorf("got %s %s %q, want FATAL %s %q", fields['S'], fields['C'], fields['M'], code, message)
	}
	return nil
}

// message frames a message of type typ around body.
func message(typ byte, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{typ}, uint32(len(body)+4)), body...)
}

// unknownMessages are inputs a logged-in client must not send: types the
// protocol does not define, a PasswordMessage after the login, and a
// startup packet or SSLRequest sent again (type byte 0).
var unknownMessages = []struct {
	name string
	raw  []byte
}{
	{"type A", message('A', nil)},
	{"type Z", message('Z', []byte{'I'})},
	{"type 0xff", message(0xff, []byte("junk"))},
	{"type x", message('x', nil)},
	{"password after login", message('p', []byte("secret\x00"))},
	{"startup packet again", startupPacket("user", appUser, "database", otherDB)},
	{"SSLRequest again", []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}},
}

// idleBackends waits until every backend of db/user is idle (none in a
// transaction or running) and returns their pids.
func idleBackends(t testing.TB, db, user string) map[int32]bool {
	t.Helper()
	su := directSuperuser(t, "postgres")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var busy int
		err := su.QueryRow(ctxT(t, 5*time.Second), `SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND datname = $1 AND usename = $2 AND state <> 'idle'`, db, user).Scan(&busy)
		if err != nil {
			t.Fatal(err)
		}
		if busy == 0 {
			return backendPIDs(t, su, db, user)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends of %s/%s still not idle after 10 s", busy, db, user)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fillPool makes the pool of db open n servers: n clients hold one each
// at the same time.
func fillPool(t testing.TB, connstr string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		conn := connectPgx(t, connstr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := conn.Exec(context.Background(), "SELECT pg_sleep(0.3)")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestHostileUnknownMessageTypes: 16 connections log in and send a message
// type the protocol does not define, over and over for 10 s (a third of
// them inside a transaction, with a server linked). Each gets FATAL 08P01
// "unknown pkt" and is closed; nothing reaches Postgres, so not one
// backend ends (before, each such message ended one); a linked server is
// rolled back and reused; another client's queries all succeed meanwhile.
func TestHostileUnknownMessageTypes(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	const poolSize = 4
	p := startPooler(t, iniSettings(map[string]string{
		"auth_type":         "trust", // cheap logins: the test makes thousands
		"default_pool_size": fmt.Sprint(poolSize),
	}, ""), testUserlist)
	connstr := p.ConnString(otherDB, appUser, appPassword)
	fillPool(t, connstr, poolSize)
	before := idleBackends(t, otherDB, appUser)
	if len(before) != poolSize {
		t.Fatalf("pool opened %d servers, want %d", len(before), poolSize)
	}

	// Every backend pid seen while the attack runs.
	su := directSuperuser(t, "postgres")
	seen := map[int32]bool{}
	for pid := range before {
		seen[pid] = true
	}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			case <-time.After(100 * time.Millisecond):
			}
			rows, err := su.Query(context.Background(), poolerBackendsSQL, otherDB, appUser)
			if err != nil {
				continue
			}
			for rows.Next() {
				var pid int32
				if rows.Scan(&pid) == nil {
					seen[pid] = true
				}
			}
			rows.Close()
		}
	}()

	const attackers = 16
	const attack = 10 * time.Second
	end := time.Now().Add(attack)
	var wg sync.WaitGroup

	// The bystander: one query after another for as long as the attack.
	bystander := connectPgx(t, connstr)
	var okQueries int
	var latencies []time.Duration
	var bystanderErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(end) {
			start := time.Now()
			var n int
			if err := bystander.QueryRow(context.Background(), "SELECT 1").Scan(&n); err != nil {
				bystanderErr = err
				return
			}
			latencies = append(latencies, time.Since(start))
			okQueries++
		}
	}()

	var sent, fatals, linked atomic.Int64
	var failMu sync.Mutex
	var failures []string
	var failed int
	fail := func(f string, args ...any) {
		failMu.Lock()
		defer failMu.Unlock()
		failed++
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(f, args...))
		}
	}
	for a := 0; a < attackers; a++ {
		wg.Add(1)
		go func(a int) {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				conn, err := rawSession(p, otherDB, appUser)
				if err != nil {
					fail("attacker %d: login: %v", a, err)
					return
				}
				bad := unknownMessages[(a+i)%len(unknownMessages)]
				if i%3 == 0 {
					// Inside a transaction: a server is linked.
					if st, err := rawQuery(conn, "BEGIN; SELECT 1"); err != nil || st != 'T' {
						fail("attacker %d: iteration %d (%s): BEGIN: status %q, %v", a, i, conn.LocalAddr(), st, err)
						conn.Close()
						continue
					}
					linked.Add(1)
				}
				if _, err := conn.Write(bad.raw); err != nil {
					fail("attacker %d: %s: write: %v", a, bad.name, err)
					conn.Close()
					return
				}
				sent.Add(1)
				fields, err := fatalThenClose(conn, 5*time.Second)
				if err == nil {
					err = wantFatal(fields, "08P01", "unknown pkt")
				}
				conn.Close()
				// Keep going after a wrong answer: the count of backends
				// ended is the figure that matters.
				if err != nil {
					fail("attacker %d: iteration %d (%s): %s: %v", a, i, conn.LocalAddr(), bad.name, err)
				} else {
					fatals.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}(a)
	}
	wg.Wait()
	close(stopSampling)
	<-sampled

	for _, f := range failures {
		t.Error(f)
	}
	if failed > len(failures) {
		t.Errorf("... and %d more", failed-len(failures))
	}
	if bystanderErr != nil {
		t.Errorf("bystander query failed after %d good ones: %v", okQueries, bystanderErr)
	}
	after := idleBackends(t, otherDB, appUser)
	var ended, opened []int32
	for pid := range seen {
		if !after[pid] {
			ended = append(ended, pid)
		}
	}
	for pid := range after {
		if !before[pid] {
			opened = append(opened, pid)
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	var p50, p99 time.Duration
	if len(latencies) > 0 {
		p50, p99 = latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	}
	t.Logf("%d unknown messages sent (%d inside a transaction), %d answered FATAL 08P01 unknown pkt; backends: %d ended, %d opened; bystander: %d queries, p50 %v, p99 %v",
		sent.Load(), linked.Load(), fatals.Load(), len(ended), len(opened), okQueries, p50, p99)
	if len(ended) != 0 || len(opened) != 0 {
		t.Errorf("backends ended %v, opened %v; want none: unknown messages must not reach Postgres", ended, opened)
	}
	if fatals.Load() < attackers {
		t.Errorf("only %d bad messages were answered", fatals.Load())
	}
	p.Alive(t)
}

// TestHostileHugeHeaders: after login, a type-0 header claiming 1 GiB or
// 512 MiB (how a startup packet sent again reads) is refused on its header,
// at once, and a Query claiming 1 GiB past max_packet_size is refused with
// "max_packet_size exceeded", with and without a server linked: the pooler
// does not wait for bodies it will never use, and a linked server is
// rolled back and kept, not closed.
func TestHostileHugeHeaders(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	gib := binary.BigEndian.AppendUint32(nil, 1<<30)
	halfGib := binary.BigEndian.AppendUint32(nil, 1<<29)
	cases := []struct {
		name, maxPacket string
		raw             []byte
		want            []string // any of these
	}{
		// Over Postgres's own 1 GiB message limit, which caps
		// max_packet_size: refused for its length or its type.
		{"type 0 claiming 1 GiB", "", append([]byte{0}, gib...), []string{"max_packet_size exceeded", "unknown pkt"}},
		{"type 0 claiming 512 MiB", "", append([]byte{0}, halfGib...), []string{"unknown pkt"}},
		{"Query claiming 1 GiB", "1048576", append([]byte{'Q'}, gib...), []string{"max_packet_size exceeded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			settings := map[string]string{"default_pool_size": "1", "auth_type": "trust"}
			if tc.maxPacket != "" {
				settings["max_packet_size"] = tc.maxPacket
			}
			p := startPooler(t, iniSettings(settings, ""), testUserlist)
			connstr := p.ConnString(otherDB, appUser, appPassword)
			fillPool(t, connstr, 1)
			before := idleBackends(t, otherDB, appUser)
			for _, inTx := range []bool{false, true} {
				conn := rawSessionIn(t, p, inTx)
				start := time.Now()
				if _, err := conn.Write(tc.raw); err != nil {
					t.Fatal(err)
				}
				fields, err := fatalThenClose(conn, 3*time.Second)
				if err == nil {
					err = wantFatal(fields, "08P01", tc.want[0])
					for _, w := range tc.want[1:] {
						if err != nil && wantFatal(fields, "08P01", w) == nil {
							err = nil
						}
					}
				}
				if err != nil {
					t.Fatalf("in a transaction: %v: %v", inTx, err)
				}
				t.Logf("in a transaction: %v: FATAL %q after %v", inTx, fields['M'], time.Since(start).Round(time.Millisecond))
			}
			after := idleBackends(t, otherDB, appUser)
			if fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("backends %v before, %v after: the linked server must be rolled back and kept", before, after)
			}
			selectOne(t, connstr)
		})
	}
}

// TestHostileStalledSenders: 25 clients on a pool of 20 servers each send
// the 5-byte header of a Query and stall. No server is taken for a message
// that has not arrived, so a normal client's query still gets a server at
// once (query_wait_timeout is 3 s: it would fail if it had to wait for
// one). With client_message_timeout, a staller is closed with FATAL
// client_message_timeout; one inside a transaction leaves its server
// rolled back and in the pool, while a stall in the middle of a message
// larger than the read buffer, part of which the server already has,
// closes that server.
func TestHostileStalledSenders(t *testing.T) {
	needPG(t)
	waitNoBackends(t, otherDB, appUser)
	header := []byte{'Q', 0, 0, 0, 100}

	t.Run("no server held", func(t *testing.T) {
		p := startPooler(t, iniSettings(map[string]string{
			"auth_type":          "trust",
			"default_pool_size":  "20",
			"query_wait_timeout": "3",
		}, ""), testUserlist)
		connstr := p.ConnString(otherDB, appUser, appPassword)
		for i := 0; i < 25; i++ {
			conn, err := rawSession(p, otherDB, appUser)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			stall := header
			if i%2 == 1 {
				stall = append(append([]byte{}, header...), "SELECT"...) // part of the body too
			}
			if _, err := conn.Write(stall); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond) // let the pooler read the headers
		c := connectPgx(t, connstr)
		for i := 0; i < 3; i++ {
			if n := queryInt(t, c, "SELECT 7"); n != 7 {
				t.Fatalf("SELECT 7 = %d", n)
			}
		}
		if n := countBackends(t, otherDB, appUser); n > 1 {
			t.Errorf("%d backends open for one client's queries: stalled clients took servers", n)
		}
	})

	t.Run("client_message_timeout", func(t *testing.T) {
		p := startPooler(t, iniSettings(map[string]string{
			"auth_type":              "trust",
			"default_pool_size":      "2",
			"client_message_timeout": "1",
		}, ""), testUserlist)
		connstr := p.ConnString(otherDB, appUser, appPassword)
		fillPool(t, connstr, 2)
		before := idleBackends(t, otherDB, appUser)

		stall := func(t *testing.T, inTx bool, raw []byte) {
			t.Helper()
			conn := rawSessionIn(t, p, inTx)
			defer conn.Close() // gone when stall returns, as before the next step
			start := time.Now()
			if _, err := conn.Write(raw); err != nil {
				t.Fatal(err)
			}
			fields, err := fatalThenClose(conn, 5*time.Second)
			if err == nil {
				err = wantFatal(fields, "08P01", "client_message_timeout")
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < 900*time.Millisecond {
				t.Errorf("closed after %v, before client_message_timeout (1 s)", d)
			}
		}
		stall(t, false, header)
		stall(t, true, append(append([]byte{}, header...), "SELECT"...))
		if after := idleBackends(t, otherDB, appUser); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("backends %v before, %v after: a staller's server must be rolled back and kept", before, after)
		}

		// A Query of 10000 bytes, larger than the 4 KiB read buffer: its
		// first 6000 bytes are passed on before the client stalls.
		big := binary.BigEndian.AppendUint32([]byte{'Q'}, 10004)
		big = append(big, bytes.Repeat([]byte{' '}, 6000)...)
		stall(t, true, big)
		after := idleBackends(t, otherDB, appUser)
		kept := 0
		for pid := range after {
			if before[pid] {
				kept++
			}
		}
		if kept != len(before)-1 {
			t.Errorf("backends %v before, %v after: want exactly the one holding half a message closed", before, after)
		}
		selectOne(t, connstr)
		if !p.LogContains("client_message_timeout") {
			t.Errorf("log does not name client_message_timeout:\n%s", p.Log())
		}
	})
}

// TestHostileSSLRequestTwice: a second SSLRequest during login, after the
// first was answered 'N' or inside the TLS session the first one started,
// is refused at once as Postgres refuses it ("unsupported frontend
// protocol 1234.5679"), not left waiting for client_login_timeout.
func TestHostileSSLRequestTwice(t *testing.T) {
	needPG(t)
	sslRequest := []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}
	const want = "unsupported frontend protocol 1234.5679: server supports 3.0 to 3.0"
	check := func(t *testing.T, conn net.Conn) {
		t.Helper()
		start := time.Now()
		if _, err := conn.Write(sslRequest); err != nil {
			t.Fatal(err)
		}
		fields, err := fatalThenClose(conn, 3*time.Second)
		if err == nil {
			err = wantFatal(fields, "08P01", want)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("refused after %v", time.Since(start).Round(time.Millisecond))
	}

	// firstSSLRequest sends the first SSLRequest and checks its answer.
	firstSSLRequest := func(t *testing.T, p *Pooler, want byte) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := conn.Write(sslRequest); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] != want {
			t.Fatalf("first SSLRequest: %q, %v, want %q", b[0], err, want)
		}
		_ = conn.SetReadDeadline(time.Time{})
		return conn
	}

	t.Run("after N", func(t *testing.T) {
		p := startPooler(t, iniSettings(nil, ""), testUserlist)
		check(t, firstSSLRequest(t, p, 'N'))
	})

	t.Run("inside TLS", func(t *testing.T) {
		pki := newPKI(t, "pooler")
		p := startPooler(t, iniSettings(tlsSettings(pki, "allow", nil), ""), testUserlist)
		conn := firstSSLRequest(t, p, 'S')
		tc := tls.Client(conn, &tls.Config{RootCAs: pki.Pool(), ServerName: "localhost"})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		check(t, tc)
	})
}

// TestHostileErrorTexts: a server that cannot be reached gives clients
// PgBouncer's texts. The first client keeps waiting for a server (a
// failed connect is retried every server_login_retry) until
// query_wait_timeout; a client that logs in while the last login failed
// less than server_login_retry ago is refused at once with "server login
// has been failing, cached error: connect failed (server_login_retry)".
// Neither names the address (which goes to the log).
func TestHostileErrorTexts(t *testing.T) {
	needPG(t)
	// Nothing listens on port 1.
	ini := strings.Replace(iniSettings(map[string]string{"server_login_retry": "30", "query_wait_timeout": "3"}, ""),
		"[databases]\n", "[databases]\ndeaddb = host=127.0.0.1 port=1 dbname=deaddb\n", 1)
	p := startPooler(t, ini, testUserlist)
	connstr := p.ConnString("deaddb", appUser, appPassword)
	first := make(chan error, 1)
	go func() {
		_, err := tryConnectPgx(t, pgxConfig(t, connstr))
		first <- err
	}()
	if !p.WaitLog("server login failed", 10*time.Second) {
		t.Fatalf("no failed server login logged:\n%s", p.Log())
	}
	for i, want := range []string{
		"server login has been failing, cached error: connect failed (server_login_retry)",
		"query_wait_timeout",
	} {
		var err error
		if i == 0 {
			_, err = tryConnectPgx(t, pgxConfig(t, connstr))
		} else {
			err = <-first
		}
		pe := wantPgError(t, err, "FATAL", "08P01", "")
		if pe.Message != want {
			t.Errorf("client %d: %q, want %q", i+1, pe.Message, want)
		}
		if strings.Contains(pe.Message, "127.0.0.1") || strings.Contains(pe.Message, "refused") {
			t.Errorf("client %d: the message names the address or the system error: %q", i+1, pe.Message)
		}
	}
	if !p.LogContains("127.0.0.1:1") {
		t.Errorf("the log lacks the detail (address):\n%s", p.Log())
	}
}
