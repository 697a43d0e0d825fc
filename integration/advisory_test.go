//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/auth"
)

// One regression test per class of PgBouncer security advisory, against
// the real binary: each asserts the safe outcome (refused, no identity
// switch, no hang, no crash, bounded memory) and that the pooler still
// serves a normal client afterwards.

// rawMsg frames a typed protocol message.
func rawMsg(typ byte, body []byte) []byte {
	b := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(4+len(body)))
	return append(b, body...)
}

// readRawMsg reads one typed message.
func readRawMsg(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n < 4 || n > 1<<20 {
		return 0, nil, fmt.Errorf("bad length %d", n)
	}
	body := make([]byte, n-4)
	_, err := io.ReadFull(r, body)
	return h[0], body, err
}

// startRaw dials p, sends a startup packet for db and user and returns the
// connection and the first message's type and body.
func startRaw(t testing.TB, p *Pooler, db, user string) (net.Conn, byte, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(startupPacket("user", user, "database", db)); err != nil {
		t.Fatal(err)
	}
	typ, body, err := readRawMsg(conn)
	if err != nil {
		t.Fatalf("first message: %v", err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, typ, body
}

// authCode is the request code of an Authentication message body.
func authCode(typ byte, body []byte) int {
	if typ != 'R' || len(body) < 4 {
		return -1
	}
	return int(binary.BigEndian.Uint32(body))
}

// wantRefusedRaw asserts the pooler answered with one FATAL ErrorResponse
// of this SQLSTATE (and message, when not "") and closed, without ever
// sending AuthenticationOk.
func wantRefusedRaw(t testing.TB, what string, r rawReply, code, message string) {
	t.Helper()
	if bytes.Contains(r.raw, []byte{'R', 0, 0, 0, 8, 0, 0, 0, 0}) {
		t.Errorf("%s: the pooler sent AuthenticationOk (raw %q)", what, r.raw)
	}
	switch {
	case !r.closed:
		t.Errorf("%s: connection still open after 5 s; want a refusal", what)
	case len(r.errs) != 1:
		t.Errorf("%s: %d ErrorResponses (other messages %v, raw %q), want 1", what, len(r.errs), r.other, r.raw)
	default:
		e := r.errs[0]
		t.Logf("%s: %s %s %q", what, e.Severity, e.Code, e.Message)
		if e.Severity != "FATAL" || e.Code != code || (message != "" && e.Message != message) {
			t.Errorf("%s: got %s %s %q, want FATAL %s %q", what, e.Severity, e.Code, e.Message, code, message)
		}
	}
}

// rssKB is the pooler's resident set size.
func rssKB(t testing.TB, p *Pooler) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestAdvisorySecondStartupDuringSCRAM: a second StartupMessage sent in the
// middle of a SCRAM exchange for a database that does not exist
// (PgBouncer's impersonation advisory) is a protocol violation: the login
// ends with 08P01 and nobody is logged in, as the first user or the second.
func TestAdvisorySecondStartupDuringSCRAM(t *testing.T) {
	p := startPooler(t, noAutoDB(nil, ""), testUserlist)
	second := startupPacket("user", appUser, "database", appDB)
	for _, tc := range []struct {
		name  string
		steps int // SCRAM messages sent before the second startup packet
	}{
		{"after AuthenticationSASL", 0},
		{"after SASLContinue", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, typ, body := startRaw(t, p, noSuchDB, appUser)
			if authCode(typ, body) != 10 {
				t.Fatalf("first message %q %q, want AuthenticationSASL", typ, body)
			}
			if tc.steps > 0 {
				sc := newTestSCRAM(appPassword)
				first := sc.first()
				init := append([]byte("SCRAM-SHA-256\x00"), binary.BigEndian.AppendUint32(nil, uint32(len(first)))...)
				if _, err := conn.Write(rawMsg('p', append(init, first...))); err != nil {
					t.Fatal(err)
				}
				typ, body, err := readRawMsg(conn)
				if err != nil || authCode(typ, body) != 11 {
					t.Fatalf("after client-first: %q %q %v, want AuthenticationSASLContinue", typ, body, err)
				}
			}
			if _, err := conn.Write(second); err != nil {
				t.Fatal(err)
			}
			wantRefusedRaw(t, tc.name, readUntilClose(t, conn, 5*time.Second), "08P01", "")
			p.Alive(t)
		})
	}
	// The same bytes sent at once, before any answer.
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(append(startupPacket("user", appUser, "database", noSuchDB), second...)); err != nil {
		t.Fatal(err)
	}
	r := readUntilClose(t, conn, 5*time.Second)
	wantRefusedRaw(t, "pipelined", rawReply{errs: r.errs, closed: r.closed, raw: r.raw}, "08P01", "")
	selectOne(t, p.App())
}

// TestAdvisoryEmptyOptionName: an `options` startup parameter naming an
// empty setting (PgBouncer looped forever on "-c=") is refused at once
// with PgBouncer's text.
func TestAdvisoryEmptyOptionName(t *testing.T) {
	p := startPooler(t, iniSettings(nil, ""), testUserlist)
	const refusal = "unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed"
	for _, opt := range []string{"-c=", "--=x", "--=", "-c =x", " -c= ", "-c", "--", "-c=-c=", "-c search_path=x -c="} {
		t.Run(strconv.Quote(opt), func(t *testing.T) {
			conn, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			if _, err := conn.Write(startupPacket("user", appUser, "database", appDB, "options", opt)); err != nil {
				t.Fatal(err)
			}
			wantRefusedRaw(t, "options="+strconv.Quote(opt), readUntilClose(t, conn, 5*time.Second), "08P01", refusal)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusal took %v", d)
			}
		})
	}
	p.Alive(t)
	selectOne(t, p.App())
}

// TestAdvisoryHugeLength: lengths above 2^31 (PgBouncer's integer overflow)
// with max_packet_size at its largest are refused with an ErrorResponse,
// in the startup packet, in a login message and in a message after login,
// without waiting for gigabytes, without a crash and without allocating
// for them.
func TestAdvisoryHugeLength(t *testing.T) {
	p := startPooler(t, iniSettings(map[string]string{"max_packet_size": "4294967295"}, ""), testUserlist)
	bystander := connectPgx(t, p.App())
	rss0 := rssKB(t, p)
	for _, n := range []uint32{0x80000000, 0xFFFFFFF0, 0xFFFFFFFF} {
		hdr := binary.BigEndian.AppendUint32(nil, n)
		t.Run(fmt.Sprintf("startup %#x", n), func(t *testing.T) {
			conn, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(append(hdr, 0, 3, 0, 0)); err != nil {
				t.Fatal(err)
			}
			wantRefusedRaw(t, "startup", readUntilClose(t, conn, 5*time.Second), "08P01", "")
		})
		t.Run(fmt.Sprintf("password message %#x", n), func(t *testing.T) {
			conn, typ, body := startRaw(t, p, appDB, appUser)
			if authCode(typ, body) != 10 {
				t.Fatalf("first message %q, want AuthenticationSASL", typ)
			}
			if _, err := conn.Write(append(append([]byte{'p'}, hdr...), "SCRAM-SHA-256\x00"...)); err != nil {
				t.Fatal(err)
			}
			wantRefusedRaw(t, "password message", readUntilClose(t, conn, 5*time.Second), "08P01", "")
		})
		// After login, and again once the client has been parked (a
		// client silent for 100 ms after its login is; its reader is
		// rebuilt when it wakes).
		for _, idle := range []time.Duration{0, 400 * time.Millisecond} {
			t.Run(fmt.Sprintf("query %#x after %v", n, idle), func(t *testing.T) {
				pc, err := pgconn.Connect(ctxT(t, 10*time.Second), p.App())
				if err != nil {
					t.Fatal(err)
				}
				raw := pc.Conn()
				defer raw.Close()
				time.Sleep(idle)
				if _, err := raw.Write(append(append([]byte{'Q'}, hdr...), "SELECT 1"...)); err != nil {
					t.Fatal(err)
				}
				r := readUntilClose(t, raw, 5*time.Second)
				if !r.closed || len(r.errs) == 0 {
					t.Errorf("Query with length %#x: closed=%v errors=%d raw=%q; want a FATAL ErrorResponse and a close", n, r.closed, len(r.errs), r.raw)
				} else {
					e := r.errs[len(r.errs)-1]
					t.Logf("Query with length %#x: %s %s %q", n, e.Severity, e.Code, e.Message)
					if e.Severity != "FATAL" || e.Code != "08P01" {
						t.Errorf("got %s %s %q, want FATAL 08P01", e.Severity, e.Code, e.Message)
					}
				}
			})
		}
		p.Alive(t)
	}
	if grew := rssKB(t, p) - rss0; grew > 64<<10 {
		t.Errorf("pooler RSS grew by %d KiB over the huge headers", grew)
	}
	if n := queryInt(t, bystander, "SELECT 13"); n != 13 {
		t.Fatalf("bystander: %d", n)
	}
	selectOne(t, p.App())
}

// TestAdvisoryMalformedSCRAM: SCRAM client messages whose inner lengths lie
// (longer than the message, -1, near 2^31, missing) or that are otherwise
// broken are refused with 08P01, and the pooler carries on.
func TestAdvisoryMalformedSCRAM(t *testing.T) {
	p := startPooler(t, iniSettings(nil, ""), testUserlist)
	const first = "n,,n=,r=abcdefghijklmnopqrstuvwx"
	initial := func(n uint32, data string) []byte {
		b := append([]byte("SCRAM-SHA-256\x00"), binary.BigEndian.AppendUint32(nil, n)...)
		return append(b, data...)
	}
	cases := []struct {
		name string
		body []byte
	}{
		{"inner length beyond the message", initial(1000, first)},
		{"inner length -1", initial(0xFFFFFFFF, first)},
		{"inner length -1, no data", initial(0xFFFFFFFF, "")},
		{"inner length 2^31-1", initial(0x7FFFFFFF, first)},
		{"inner length 0xFFFFFFF0", initial(0xFFFFFFF0, first)},
		{"inner length short of the data", initial(3, first)},
		{"no inner length", []byte("SCRAM-SHA-256\x00ab")},
		{"no mechanism terminator", []byte("SCRAM-SHA-256")},
		{"empty body", nil},
		{"client-first without nonce", initial(5, "n,,n=")},
		{"client-first with NUL", initial(uint32(len(first)+1), first+"\x00")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, typ, body := startRaw(t, p, appDB, appUser)
			if authCode(typ, body) != 10 {
				t.Fatalf("first message %q, want AuthenticationSASL", typ)
			}
			if _, err := conn.Write(rawMsg('p', tc.body)); err != nil {
				t.Fatal(err)
			}
			wantRefusedRaw(t, tc.name, readUntilClose(t, conn, 5*time.Second), "08P01", "")
		})
	}
	finals := []struct {
		name string
		body string
	}{
		{"garbage", "garbage"},
		{"proof not base64", "c=biws,r=%s,p=!!!"},
		{"proof too short", "c=biws,r=%s,p=AAAA"},
		{"no proof", "c=biws,r=%s"},
	}
	for _, tc := range finals {
		t.Run("client-final "+tc.name, func(t *testing.T) {
			conn, typ, body := startRaw(t, p, appDB, appUser)
			if authCode(typ, body) != 10 {
				t.Fatalf("first message %q, want AuthenticationSASL", typ)
			}
			if _, err := conn.Write(rawMsg('p', initial(uint32(len(first)), first))); err != nil {
				t.Fatal(err)
			}
			typ, body, err := readRawMsg(conn)
			if err != nil || authCode(typ, body) != 11 {
				t.Fatalf("after client-first: %q %v", typ, err)
			}
			nonce := strings.TrimPrefix(strings.Split(string(body[4:]), ",")[0], "r=")
			msg := tc.body
			if strings.Contains(msg, "%s") {
				msg = fmt.Sprintf(msg, nonce)
			}
			if _, err := conn.Write(rawMsg('p', []byte(msg))); err != nil {
				t.Fatal(err)
			}
			wantRefusedRaw(t, tc.name, readUntilClose(t, conn, 5*time.Second), "08P01", "malformed SCRAM message")
		})
	}
	p.Alive(t)
	selectOne(t, p.App())
}

// fakeServer is a tiny PostgreSQL impostor for the pooler's server side:
// it speaks just enough of the protocol to misbehave in one way, chosen by
// the database name the pooler asks for.
type fakeServer struct {
	t    testing.TB
	ln   net.Listener
	port int
	mu   sync.Mutex
	seen []string // database names, in order of arrival
}

func startFakeServer(t testing.TB) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeServer{t: t, ln: ln, port: ln.Addr().(*net.TCPAddr).Port}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go fs.serve(conn)
		}
	}()
	return fs
}

// errorNoCode is an ErrorResponse with severity and message and no
// SQLSTATE; fields "" gives one with no fields at all.
func errorNoCode(severity, message string) []byte {
	var b []byte
	if severity != "" {
		b = append(append(append(b, 'S'), severity...), 0)
		b = append(append(append(b, 'V'), severity...), 0)
	}
	if message != "" {
		b = append(append(append(b, 'M'), message...), 0)
	}
	return rawMsg('E', append(b, 0))
}

func (fs *fakeServer) serve(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	be := pgproto3.NewBackend(r, conn)
	var db string
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return
		}
		if sm, ok := msg.(*pgproto3.StartupMessage); ok {
			db = sm.Parameters["database"]
			break
		}
		if _, err := conn.Write([]byte{'N'}); err != nil { // no TLS, no GSS
			return
		}
	}
	fs.mu.Lock()
	fs.seen = append(fs.seen, db)
	fs.mu.Unlock()
	auth := func(code uint32, data string) []byte {
		return rawMsg('R', append(binary.BigEndian.AppendUint32(nil, code), data...))
	}
	write := func(b ...[]byte) bool {
		_, err := conn.Write(bytes.Join(b, nil))
		return err == nil
	}
	salt := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	// scram runs the server side up to client-final, with a server-first
	// built by serverFirst from the client's nonce.
	scram := func(serverFirst func(cnonce string) string) bool {
		if !write(auth(10, "SCRAM-SHA-256\x00\x00")) {
			return false
		}
		typ, body, err := readRawMsg(r)
		if err != nil || typ != 'p' {
			return false
		}
		i := bytes.Index(body, []byte("r="))
		if i < 0 {
			return false
		}
		cnonce := string(body[i+2:])
		if !write(auth(11, serverFirst(cnonce))) {
			return false
		}
		typ, _, err = readRawMsg(r)
		return err == nil && typ == 'p'
	}
	normal := func(cnonce string) string { return "r=" + cnonce + "SRV,s=" + salt + ",i=4096" }
	switch db {
	case "bigfinal": // server-final larger than any buffer
		if scram(normal) {
			write(auth(12, "v="+strings.Repeat("A", 1<<20)))
		}
	case "garbagefinal": // server-final that is not base64
		if scram(normal) {
			write(auth(12, "v="+strings.Repeat("\xff!,", 2000)))
		}
	case "longnonce": // a long (but buffer-sized) nonce, then garbage
		if scram(func(c string) string { return "r=" + c + strings.Repeat("N", 8000) + ",s=" + salt + ",i=4096" }) {
			write(auth(12, "v="+strings.Repeat("x", 8000)))
		}
	case "hugenonce": // a server-first larger than any buffer
		scram(func(c string) string { return "r=" + c + strings.Repeat("N", 1<<20) + ",s=" + salt + ",i=4096" })
	case "intmaxiter":
		scram(func(c string) string { return "r=" + c + "SRV,s=" + salt + ",i=2147483647" })
	case "bigiter":
		scram(func(c string) string { return "r=" + c + "SRV,s=" + salt + ",i=16777216" })
	case "skipfinal": // no server signature, straight to AuthenticationOk
		if scram(normal) {
			write(auth(0, ""), rawMsg('Z', []byte{'I'}))
		}
	case "nocode_login":
		write(errorNoCode("FATAL", "no sqlstate here"))
	case "nocode_empty":
		write(errorNoCode("", ""))
	case "nocode_query":
		write(auth(0, ""),
			rawMsg('S', []byte("server_version\x0015.0\x00")),
			rawMsg('S', []byte("client_encoding\x00UTF8\x00")),
			rawMsg('S', []byte("standard_conforming_strings\x00on\x00")),
			rawMsg('K', []byte{0, 0, 0, 1, 0, 0, 0, 2}),
			rawMsg('Z', []byte{'I'}))
		for {
			typ, body, err := readRawMsg(r)
			if err != nil || typ == 'X' {
				return
			}
			if typ != 'Q' {
				continue
			}
			q := string(bytes.TrimRight(body, "\x00"))
			switch {
			case strings.Contains(q, "boom_empty"):
				write(errorNoCode("", ""), rawMsg('Z', []byte{'I'}))
			case strings.Contains(q, "boom"):
				write(errorNoCode("ERROR", "no sqlstate here"), rawMsg('Z', []byte{'I'}))
			default:
				write(rawMsg('C', []byte("SELECT 0\x00")), rawMsg('Z', []byte{'I'}))
			}
		}
	}
}

// TestAdvisoryHostileServer: the pooler logging in to a server that
// misbehaves (huge or garbage SCRAM messages, an iteration count meant to
// burn CPU, no server signature, ErrorResponses without a SQLSTATE) fails
// that login cleanly and promptly, tells the client with a SQLSTATE, and
// stays up. An iteration count above 2^20 is refused before any PBKDF2
// work (auth.maxServerSCRAMIterations).
func TestAdvisoryHostileServer(t *testing.T) {
	fs := startFakeServer(t)
	dbs := []string{"bigfinal", "garbagefinal", "longnonce", "hugenonce", "intmaxiter", "bigiter", "skipfinal", "nocode_login", "nocode_empty", "nocode_query"}
	var extra strings.Builder
	extra.WriteString("[databases]\n")
	for _, db := range dbs {
		fmt.Fprintf(&extra, "fake_%s = host=127.0.0.1 port=%d dbname=%s\n", db, fs.port, db)
	}
	p := startPooler(t, iniSettings(map[string]string{"server_connect_timeout": "5"}, extra.String()), testUserlist)

	for _, db := range dbs[:len(dbs)-1] {
		t.Run(db, func(t *testing.T) {
			start := time.Now()
			pc, err := pgconn.Connect(ctxT(t, 15*time.Second), p.ConnString("fake_"+db, appUser, appPassword))
			if err == nil {
				pc.Close(ctxT(t, 2*time.Second))
				t.Fatalf("logged in through a server that %s", db)
			}
			e := asPgError(t, err)
			t.Logf("%s: %s %s %q after %v", db, e.Severity, e.Code, e.Message, time.Since(start).Round(time.Millisecond))
			if e.Severity != "FATAL" || e.Code == "" || e.Message == "" {
				t.Errorf("got %s %q %q, want FATAL with a SQLSTATE and a message", e.Severity, e.Code, e.Message)
			}
			if strings.HasPrefix(db, "nocode") && e.Code != "08P01" {
				t.Errorf("server error without SQLSTATE reached the client as %q, want 08P01", e.Code)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("the failed login took %v", d)
			}
			p.Alive(t)
		})
	}

	t.Run("nocode_query", func(t *testing.T) {
		pc, err := pgconn.Connect(ctxT(t, 15*time.Second), p.ConnString("fake_nocode_query", appUser, appPassword))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctxT(t, 2*time.Second))
		for _, q := range []string{"SELECT boom", "SELECT boom_empty"} {
			_, err = pc.Exec(ctxT(t, 5*time.Second), q).ReadAll()
			if err == nil {
				t.Fatalf("%s: no error", q)
			}
			// Server errors pass through untouched (STYLE.md): the client
			// gets exactly what the server sent. The pooler must not choke
			// on it.
			e := asPgError(t, err)
			t.Logf("%s: %s %q %q", q, e.Severity, e.Code, e.Message)
			if _, err := pc.Exec(ctxT(t, 5*time.Second), "SELECT fine").ReadAll(); err != nil {
				t.Fatalf("after %s: %v", q, err)
			}
		}
		p.Alive(t)
	})
	selectOne(t, p.App())
	fs.mu.Lock()
	t.Logf("fake server saw logins for %v", fs.seen)
	fs.mu.Unlock()
}

// TestAdvisoryConsoleNonAdmin: a stats_users user may look but not act:
// KILL_CLIENT (PgBouncer's CVE-2026-6667) and every other control command
// get "admin access needed", and the client it named lives on.
func TestAdvisoryConsoleNonAdmin(t *testing.T) {
	p := startPooler(t, iniSettings(withConsoleUsers(nil), ""), opsUserlist)
	victim := connectPgx(t, p.App())
	stats := consoleAs(t, p, statsUser, statsPass, nil)
	admin := adminConsole(t, p)
	var ids []string
	for _, row := range show(t, admin, "SHOW CLIENTS").rows {
		ids = append(ids, row["id"])
	}
	if len(ids) == 0 {
		t.Fatal("SHOW CLIENTS lists no client")
	}
	cmds := []string{"KILL", "KILL appdb", "PAUSE", "PAUSE appdb", "SUSPEND", "SHUTDOWN", "RELOAD",
		"DISABLE appdb", "RECONNECT appdb", "WAIT_CLOSE appdb", "SET default_pool_size = 1"}
	for _, id := range ids {
		cmds = append(cmds, "KILL_CLIENT "+id)
	}
	for _, q := range cmds {
		adminExecErr(t, stats, q, "08P01", "admin access needed")
	}
	if n := queryInt(t, victim, "SELECT 14"); n != 14 {
		t.Fatalf("victim: %d", n)
	}
	show(t, stats, "SHOW CLIENTS")
	p.Alive(t)
}

// TestAdvisoryAuthQuerySearchPath: a search_path chosen by a client never
// steers auth_query (PgBouncer's CVE-2025-12819). A schema "evil" holds a
// pg_shadow that answers for app_user with a password the attacker knows;
// a client naming it first in its search_path (startup parameter, options,
// or left on a shared auth_user server by an earlier session) still gets
// the real secret checked.
func TestAdvisoryAuthQuerySearchPath(t *testing.T) {
	scenarioRoles(t)
	const evilPw = "evil-pw"
	su := directSuperuser(t, appDB)
	ctx := ctxT(t, 30*time.Second)
	setup := []string{
		"DROP SCHEMA IF EXISTS evil CASCADE",
		"CREATE SCHEMA evil",
		fmt.Sprintf("CREATE VIEW evil.pg_shadow AS SELECT '%s'::name AS usename, '%s'::text AS passwd", scenApp, auth.MD5Secret(scenApp, evilPw)),
		"GRANT USAGE ON SCHEMA evil TO PUBLIC",
		"GRANT SELECT ON evil.pg_shadow TO PUBLIC",
	}
	for _, s := range setup {
		if _, err := su.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	// Runs before su's own cleanup closes it (cleanups run last first).
	t.Cleanup(func() { _, _ = su.Exec(context.Background(), "DROP SCHEMA IF EXISTS evil CASCADE") })
	// The trap works when it is on the path: this is what the pooler must
	// never let a client arrange.
	if got := queryText(t, su, "SELECT passwd FROM evil.pg_shadow WHERE usename = $1", scenApp); got != auth.MD5Secret(scenApp, evilPw) {
		t.Fatalf("trap view returns %q", got)
	}

	ini := "[databases]\n" +
		"appdb = host=127.0.0.1 port=@PGPORT@ dbname=appdb\n\n" +
		"[pgbouncer]\n" +
		"listen_addr = 127.0.0.1\nlisten_port = 0\nunix_socket_dir =\n" +
		"auth_type = md5\nauth_file = @AUTH_FILE@\n" +
		"auth_user = " + scenAuthUser + "\n" +
		"auth_query = SELECT usename, passwd FROM pg_shadow WHERE usename=$1\n" +
		"track_extra_parameters = search_path\n" +
		"pool_mode = transaction\ndefault_pool_size = 1\nquery_wait_timeout = 20\n"
	p := startPooler(t, ini, scenarioUserlist)
	const evilPath = "evil, pg_catalog"
	wrong := "password authentication failed"

	// A session of the auth_user itself leaves search_path on the one
	// server of its pool (default_pool_size = 1), which auth_query shares:
	// a plain SET stays on the server in transaction pooling, and
	// Postgres before 18 does not report it.
	authConn := connectPgx(t, p.ConnString(appDB, scenAuthUser, scenAuthPw))
	if _, err := authConn.Exec(ctxT(t, 10*time.Second), "SET search_path = "+evilPath); err != nil {
		t.Fatal(err)
	}
	if got := queryText(t, authConn, "SELECT current_setting('search_path')"); got != evilPath {
		t.Fatalf("auth_user session search_path %q", got)
	}

	tweaks := map[string]func(*pgconn.Config){
		"startup search_path":       func(c *pgconn.Config) { c.RuntimeParams["search_path"] = evilPath },
		"options -c search_path":    func(c *pgconn.Config) { c.RuntimeParams["options"] = "-c search_path=evil,pg_catalog" },
		"left by an earlier client": func(c *pgconn.Config) {},
	}
	for name, tweak := range tweaks {
		t.Run(name, func(t *testing.T) {
			cfg, err := pgconn.ParseConfig(p.ConnString(appDB, scenApp, evilPw))
			if err != nil {
				t.Fatal(err)
			}
			tweak(cfg)
			pc, err := pgconn.ConnectConfig(ctxT(t, 15*time.Second), cfg)
			if err == nil {
				pc.Close(ctxT(t, 2*time.Second))
				t.Fatalf("logged in as %s with the password of the evil schema's pg_shadow", scenApp)
			}
			wantPgError(t, err, "FATAL", "28P01", wrong)
		})
	}
	// The real password still works, and the auth_user's own session
	// keeps the search_path it asked for.
	cfg := pgxConfig(t, p.ConnString(appDB, scenApp, scenAppPw))
	cfg.RuntimeParams["search_path"] = evilPath
	conn, err := tryConnectPgx(t, cfg)
	if err != nil {
		t.Fatalf("real password with search_path %q: %v", evilPath, err)
	}
	if got := queryText(t, conn, "SELECT current_user"); got != scenApp {
		t.Errorf("current_user %q", got)
	}
	if got := queryText(t, authConn, "SELECT current_setting('search_path')"); got != evilPath {
		t.Errorf("auth_user session search_path %q after the auth queries, want %q", got, evilPath)
	}
	p.Alive(t)
}
