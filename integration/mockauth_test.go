//go:build linux

package integration

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pgturnstile/pgturnstile/auth"
)

// Authentication before disclosure (issue 15): until a client has
// authenticated, nothing it sees may depend on whether its database or its
// user exists. These tests log in with a raw frontend so that they see the
// authentication request itself (its type, MD5 salt, SCRAM salt and
// iterations), not just the driver's error.

// loginProbe is what one raw login attempt saw.
type loginProbe struct {
	req      string // first request: "md5", "scram", "cleartext", "none" (error or Ok at once)
	md5Salt  [4]byte
	salt     string // SCRAM server-first s=
	iter     string // SCRAM server-first i=
	loggedIn bool   // AuthenticationOk and ReadyForQuery arrived
	err      *pgproto3.ErrorResponse
}

func (p loginProbe) String() string {
	s := "request " + p.req
	if p.req == "scram" {
		s += fmt.Sprintf(" (s=%s i=%s)", p.salt, p.iter)
	}
	switch {
	case p.loggedIn:
		s += ", logged in"
	case p.err != nil:
		s += fmt.Sprintf(", %s %s %q", p.err.Severity, p.err.Code, p.err.Message)
	default:
		s += ", no answer"
	}
	return s
}

// probeLogin logs in to addr as user on db with password, answering
// whichever request comes (MD5, SCRAM-SHA-256 or cleartext) correctly for
// that password, and reports what it saw.
func probeLogin(t testing.TB, addr, db, user, password string) loginProbe {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	fe := pgproto3.NewFrontend(conn, conn)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": user, "database": db}})
	if err := fe.Flush(); err != nil {
		t.Fatalf("send startup: %v", err)
	}
	var p loginProbe
	var sc *testSCRAM
	for {
		msg, err := fe.Receive()
		if err != nil {
			if p.req == "" {
				p.req = "none"
			}
			return p
		}
		switch m := msg.(type) {
		case *pgproto3.AuthenticationMD5Password:
			p.req, p.md5Salt = "md5", m.Salt
			inner := auth.MD5Secret(user, password)[3:]
			sum := md5.Sum(append([]byte(inner), m.Salt[:]...))
			fe.Send(&pgproto3.PasswordMessage{Password: "md5" + hex.EncodeToString(sum[:])})
		case *pgproto3.AuthenticationCleartextPassword:
			p.req = "cleartext"
			fe.Send(&pgproto3.PasswordMessage{Password: password})
		case *pgproto3.AuthenticationSASL:
			p.req = "scram"
			sc = newTestSCRAM(password)
			fe.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte(sc.first())})
		case *pgproto3.AuthenticationSASLContinue:
			for _, a := range strings.Split(string(m.Data), ",") {
				switch {
				case strings.HasPrefix(a, "s="):
					p.salt = a[2:]
				case strings.HasPrefix(a, "i="):
					p.iter = a[2:]
				}
			}
			final, err := sc.final(string(m.Data))
			if err != nil {
				t.Fatalf("server-first %q: %v", m.Data, err)
			}
			fe.Send(&pgproto3.SASLResponse{Data: []byte(final)})
		case *pgproto3.AuthenticationSASLFinal, *pgproto3.ParameterStatus, *pgproto3.BackendKeyData, *pgproto3.NoticeResponse:
			continue
		case *pgproto3.AuthenticationOk:
			if p.req == "" {
				p.req = "none"
			}
			continue
		case *pgproto3.ReadyForQuery:
			p.loggedIn = true
			fe.Send(&pgproto3.Terminate{})
			_ = fe.Flush()
			return p
		case *pgproto3.ErrorResponse:
			if p.req == "" {
				p.req = "none"
			}
			c := *m
			p.err = &c
			return p
		default:
			t.Fatalf("unexpected %T during login", m)
		}
		if err := fe.Flush(); err != nil {
			return p
		}
	}
}

// testSCRAM is the client side of SCRAM-SHA-256, written out here so the
// test does not lean on the code under test.
type testSCRAM struct {
	password, nonce, firstBare string
}

func newTestSCRAM(password string) *testSCRAM {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return &testSCRAM{password: password, nonce: base64.StdEncoding.EncodeToString(b)}
}

func (s *testSCRAM) first() string {
	s.firstBare = "n=,r=" + s.nonce
	return "n,," + s.firstBare
}

func (s *testSCRAM) final(serverFirst string) (string, error) {
	var nonce, saltB64, iterStr string
	for _, a := range strings.Split(serverFirst, ",") {
		if len(a) > 2 {
			switch a[:2] {
			case "r=":
				nonce = a[2:]
			case "s=":
				saltB64 = a[2:]
			case "i=":
				iterStr = a[2:]
			}
		}
	}
	var iter int
	if _, err := fmt.Sscan(iterStr, &iter); err != nil || iter < 1 || iter > 1<<20 {
		return "", fmt.Errorf("iterations %q", iterStr)
	}
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	if err != nil || !strings.HasPrefix(nonce, s.nonce) {
		return "", fmt.Errorf("salt %q or nonce %q", saltB64, nonce)
	}
	salted, err := pbkdf2.Key(sha256.New, s.password, salt, iter, 32)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	withoutProof := "c=biws,r=" + nonce
	sig := mac(stored[:], s.firstBare+","+serverFirst+","+withoutProof)
	for i := range sig {
		sig[i] ^= clientKey[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(sig), nil
}

// noAutoDB is iniSettings without the `*` fallback, so that a database can
// be missing.
func noAutoDB(settings map[string]string, extra string) string {
	ini := iniSettings(settings, extra)
	out := strings.Replace(ini, "* = host=127.0.0.1 port=@PGPORT@\n", "", 1)
	if out == ini {
		panic("iniSettings no longer writes the * entry this helper removes")
	}
	return out
}

// wantSameFailure asserts that every probe got the same request type and
// the same FATAL error (severity, SQLSTATE, text), equal to want.
func wantSameFailure(t testing.TB, probes map[string]loginProbe, req, code, message string) {
	t.Helper()
	for name, p := range probes {
		t.Logf("%s: %s", name, p)
		switch {
		case p.loggedIn:
			t.Errorf("%s: logged in, want a failure like a wrong password", name)
		case p.req != req:
			t.Errorf("%s: request %s, want %s like a wrong password", name, p.req, req)
		case p.err == nil:
			t.Errorf("%s: no ErrorResponse", name)
		case p.err.Severity != "FATAL" || p.err.Code != code || p.err.Message != message ||
			p.err.Detail != "" || p.err.Hint != "":
			t.Errorf("%s: got %s %s %q (detail %q hint %q), want FATAL %s %q and nothing more",
				name, p.err.Severity, p.err.Code, p.err.Message, p.err.Detail, p.err.Hint, code, message)
		}
	}
}

const (
	noSuchDB   = "nosuchdb"
	noSuchUser = "ghost"
)

// TestMockAuthMD5: with auth_type=md5 a wrong password, an unknown user, an
// unknown database, and both, all get an MD5 request with a fresh salt and
// fail with PgBouncer's 28P01 "password authentication failed"; only the
// right password learns "no such database".
func TestMockAuthMD5(t *testing.T) {
	p := startPooler(t, noAutoDB(map[string]string{"auth_type": "md5"}, ""), testUserlist)
	const wrong = "wrong-secret"
	probes := map[string]loginProbe{
		"wrong password":             probeLogin(t, p.Addr(), appDB, appUser, wrong),
		"wrong password, md5 secret": probeLogin(t, p.Addr(), appDB, md5User, wrong),
		"unknown user":               probeLogin(t, p.Addr(), appDB, noSuchUser, wrong),
		"unknown database":           probeLogin(t, p.Addr(), noSuchDB, appUser, wrong),
		"unknown database and user":  probeLogin(t, p.Addr(), noSuchDB, noSuchUser, wrong),
	}
	wantSameFailure(t, probes, "md5", "28P01", "password authentication failed")

	// The mock salt is as random as a real one.
	a, b := probeLogin(t, p.Addr(), noSuchDB, noSuchUser, wrong), probeLogin(t, p.Addr(), noSuchDB, noSuchUser, wrong)
	if a.md5Salt == b.md5Salt {
		t.Errorf("two mock MD5 requests share the salt %x", a.md5Salt)
	}

	// Authenticated: now the client may learn the database is missing.
	got := probeLogin(t, p.Addr(), noSuchDB, appUser, appPassword)
	if got.req != "md5" || got.err == nil || got.err.Code != "08P01" || got.err.Message != "no such database: "+noSuchDB {
		t.Errorf("right password, unknown database: %s; want md5, FATAL 08P01 \"no such database: %s\"", got, noSuchDB)
	}
	wantRefused(t, p.ConnString(noSuchDB, appUser, ""), appPassword, "08P01", "no such database: "+noSuchDB, nil)
	wantRefused(t, p.ConnString(noSuchDB, appUser, ""), wrong, "28P01", "password authentication failed", nil)
	if got := probeLogin(t, p.Addr(), appDB, appUser, appPassword); !got.loggedIn {
		t.Errorf("right password, known database: %s", got)
	}
	p.Alive(t)
}

// TestMockAuthSCRAM: with auth_type=scram-sha-256 every failing login runs
// a whole SCRAM exchange whose salt and iterations look like a real user's
// and are the same on every attempt (PostgreSQL's scram_mock_salt): an
// unknown user, a user whose secret is MD5 only, an unknown database.
// They all fail with 28P01 "SASL authentication failed" like a wrong
// password; the right password on an unknown database gets "no such
// database".
func TestMockAuthSCRAM(t *testing.T) {
	const (
		md5Only   = "md5only" // an MD5 secret cannot do SCRAM
		md5OnlyPw = "md5only-secret"
		stored    = "storedscram" // a stored SCRAM secret
		storedPw  = "storedscram-secret"
		wrong     = "wrong-secret"
	)
	userlist := testUserlist + fmt.Sprintf("%q %q\n%q %q\n",
		md5Only, auth.MD5Secret(md5Only, md5OnlyPw), stored, auth.SCRAMSecret(storedPw, 4096))
	p := startPooler(t, noAutoDB(nil, ""), userlist)

	probes := map[string]loginProbe{
		"wrong password, plain secret": probeLogin(t, p.Addr(), appDB, appUser, wrong),
		"wrong password, SCRAM secret": probeLogin(t, p.Addr(), appDB, stored, wrong),
		"right password, MD5 secret":   probeLogin(t, p.Addr(), appDB, md5Only, md5OnlyPw),
		"unknown user":                 probeLogin(t, p.Addr(), appDB, noSuchUser, wrong),
		"unknown database":             probeLogin(t, p.Addr(), noSuchDB, appUser, wrong),
		"unknown database and user":    probeLogin(t, p.Addr(), noSuchDB, noSuchUser, wrong),
	}
	wantSameFailure(t, probes, "scram", "28P01", "SASL authentication failed")
	for name, pr := range probes {
		raw, err := base64.StdEncoding.DecodeString(pr.salt)
		if err != nil || len(raw) != 16 || pr.iter != "4096" {
			t.Errorf("%s: salt %q iterations %q, want 16 bytes of base64 and 4096 like a real secret", name, pr.salt, pr.iter)
		}
	}
	// Deterministic per user name, as a stored secret is: a second
	// attempt shows the same salt, whatever the database.
	for _, c := range []struct{ db, user string }{{appDB, noSuchUser}, {noSuchDB, noSuchUser}, {appDB, md5Only}, {appDB, appUser}} {
		again := probeLogin(t, p.Addr(), c.db, c.user, wrong)
		first := probes["unknown user"].salt
		switch c.user {
		case md5Only:
			first = probes["right password, MD5 secret"].salt
		case appUser:
			first = probes["wrong password, plain secret"].salt
		}
		if again.salt != first {
			t.Errorf("%s@%s: salt %q on a second attempt, %q on the first", c.user, c.db, again.salt, first)
		}
	}
	if probes["unknown user"].salt == probes["wrong password, plain secret"].salt {
		t.Errorf("unknown user and %s share the salt %s", appUser, probes["unknown user"].salt)
	}

	got := probeLogin(t, p.Addr(), noSuchDB, appUser, appPassword)
	if got.req != "scram" || got.err == nil || got.err.Code != "08P01" || got.err.Message != "no such database: "+noSuchDB {
		t.Errorf("right password, unknown database: %s; want scram, FATAL 08P01 \"no such database: %s\"", got, noSuchDB)
	}
	got = probeLogin(t, p.Addr(), noSuchDB, stored, storedPw)
	if got.err == nil || got.err.Message != "no such database: "+noSuchDB {
		t.Errorf("stored SCRAM secret, right password, unknown database: %s", got)
	}
	wantRefused(t, p.ConnString(noSuchDB, appUser, ""), appPassword, "08P01", "no such database: "+noSuchDB, nil)
	wantRefused(t, p.ConnString(noSuchDB, noSuchUser, ""), wrong, "28P01", "SASL authentication failed", nil)
	if got := probeLogin(t, p.Addr(), appDB, appUser, appPassword); !got.loggedIn {
		t.Errorf("right password, known database: %s", got)
	}
	p.Alive(t)
}

// TestMockAuthConsole: the admin console follows the same rule. An unknown
// user and a wrong password look alike; a user of auth_file that is in
// neither admin_users nor stats_users hears "not allowed" only after
// proving its password.
func TestMockAuthConsole(t *testing.T) {
	p := startPooler(t, noAutoDB(withConsoleUsers(nil), ""), opsUserlist)
	const wrong = "wrong-secret"
	probes := map[string]loginProbe{
		"admin, wrong password":     probeLogin(t, p.Addr(), "pgbouncer", adminUser, wrong),
		"stats, wrong password":     probeLogin(t, p.Addr(), "pgbouncer", statsUser, wrong),
		"unknown user":              probeLogin(t, p.Addr(), "pgbouncer", noSuchUser, wrong),
		"not a console user, wrong": probeLogin(t, p.Addr(), "pgbouncer", aliceUser, wrong),
	}
	wantSameFailure(t, probes, "scram", "28P01", "SASL authentication failed")
	got := probeLogin(t, p.Addr(), "pgbouncer", aliceUser, alicePass)
	if got.req != "scram" || got.err == nil || got.err.Code != "08P01" || got.err.Message != "not allowed" {
		t.Errorf("%s with the right password: %s, want scram then FATAL 08P01 \"not allowed\"", aliceUser, got)
	}
	if got := probeLogin(t, p.Addr(), "pgbouncer", statsUser, statsPass); !got.loggedIn {
		t.Errorf("stats user: %s", got)
	}
	p.Alive(t)
}

// TestMockAuthQuery: with auth_query, a user known only to Postgres gets
// its real exchange on a database that does not exist when auth_dbname
// says where to look it up, and learns "no such database" with the right
// password; a user the query does not find gets the mock exchange there.
// Without auth_dbname there is nowhere to run the query: the login fails
// like a wrong password, as PgBouncer's fake database does. On a database
// that exists, a user auth_query does not find fails like a wrong
// password too (PgBouncer says "no such user" at once; a deliberate
// difference, so that nobody can probe which roles exist).
func TestMockAuthQuery(t *testing.T) {
	scenarioRoles(t)
	ini := func(authDB string) string {
		return "[databases]\n" +
			"appdb = host=127.0.0.1 port=@PGPORT@ dbname=appdb\n\n" +
			"[pgbouncer]\n" +
			"listen_addr = 127.0.0.1\nlisten_port = 0\nunix_socket_dir =\n" +
			"auth_type = md5\nauth_file = @AUTH_FILE@\n" +
			"auth_user = " + scenAuthUser + "\n" +
			"auth_query = SELECT usename, passwd FROM pg_shadow WHERE usename=$1\n" +
			"auth_dbname = " + authDB + "\n" +
			"pool_mode = transaction\nquery_wait_timeout = 20\n"
	}
	p := startPooler(t, ini(appDB), scenarioUserlist)
	probes := map[string]loginProbe{
		"wrong password":            probeLogin(t, p.Addr(), appDB, scenApp, "wrong"),
		"unknown user":              probeLogin(t, p.Addr(), appDB, noSuchUser, "wrong"),
		"unknown database":          probeLogin(t, p.Addr(), noSuchDB, scenApp, "wrong"),
		"unknown database and user": probeLogin(t, p.Addr(), noSuchDB, noSuchUser, "wrong"),
	}
	wantSameFailure(t, probes, "md5", "28P01", "password authentication failed")
	got := probeLogin(t, p.Addr(), noSuchDB, scenApp, scenAppPw)
	if got.err == nil || got.err.Code != "08P01" || got.err.Message != "no such database: "+noSuchDB {
		t.Errorf("auth_query user, right password, unknown database: %s", got)
	}
	if got := probeLogin(t, p.Addr(), appDB, scenApp, scenAppPw); !got.loggedIn {
		t.Errorf("auth_query user, right password, appdb: %s", got)
	}

	p2 := startPooler(t, ini(""), scenarioUserlist)
	got = probeLogin(t, p2.Addr(), noSuchDB, scenApp, scenAppPw)
	if got.req != "md5" || got.err == nil || got.err.Code != "28P01" || got.err.Message != "password authentication failed" {
		t.Errorf("no auth_dbname, auth_query user, unknown database: %s; want md5 then 28P01 like a wrong password", got)
	}
	if got := probeLogin(t, p2.Addr(), appDB, scenApp, scenAppPw); !got.loggedIn {
		t.Errorf("no auth_dbname, auth_query user, appdb: %s", got)
	}
	// An auth_file user still authenticates, then learns.
	got = probeLogin(t, p2.Addr(), noSuchDB, scenAuthUser, scenAuthPw)
	if got.err == nil || got.err.Message != "no such database: "+noSuchDB {
		t.Errorf("auth_file user, unknown database: %s", got)
	}
}

// TestMockAuthHBA: with auth_type=hba the exchange is the one the matching
// rule names, for a database that does not exist as for one that does:
// the rule matches on the name the client sent.
func TestMockAuthHBA(t *testing.T) {
	hba := writeTemp(t, "hba.conf", "host appdb all 127.0.0.1/32 md5\nhost all all 127.0.0.1/32 scram-sha-256\n")
	p := startPooler(t, noAutoDB(map[string]string{"auth_type": "hba", "auth_hba_file": hba}, ""), testUserlist)
	const wrong = "wrong-secret"
	wantSameFailure(t, map[string]loginProbe{
		"appdb, wrong password": probeLogin(t, p.Addr(), appDB, appUser, wrong),
		"appdb, unknown user":   probeLogin(t, p.Addr(), appDB, noSuchUser, wrong),
	}, "md5", "28P01", "password authentication failed")
	wantSameFailure(t, map[string]loginProbe{
		"otherdb, wrong password":   probeLogin(t, p.Addr(), otherDB, appUser, wrong),
		"unknown database":          probeLogin(t, p.Addr(), noSuchDB, appUser, wrong),
		"unknown database and user": probeLogin(t, p.Addr(), noSuchDB, noSuchUser, wrong),
	}, "scram", "28P01", "SASL authentication failed")
	got := probeLogin(t, p.Addr(), noSuchDB, appUser, appPassword)
	if got.req != "scram" || got.err == nil || got.err.Message != "no such database: "+noSuchDB {
		t.Errorf("right password, unknown database: %s", got)
	}
	if got := probeLogin(t, p.Addr(), otherDB, appUser, appPassword); !got.loggedIn {
		t.Errorf("right password, %s: %s", otherDB, got)
	}
}
