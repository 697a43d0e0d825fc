package pooler

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// TestLoginTranscripts pins what a client sees during its login, message by
// message, for the paths of client.login that need no TLS or password: the
// encryption requests and their refusal when repeated, CancelRequest, the
// protocol checks, startup parameters, the unknown database, the welcome
// and the console's welcome. The PgBouncer-compatible texts and SQLSTATEs
// matter to users' alerting, so they are compared whole.
func TestLoginTranscripts(t *testing.T) {
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"ldb": ""}, `log_connections = 1
ignore_startup_parameters = extra_float_digits
`)
	defer tp.shutdown(t, fake)

	ssl := []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}
	gss := []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30}
	user := func(db string, more ...[2]string) []byte {
		return startupPacket(0, append([][2]string{{"user", "alice"}, {"database", db}}, more...))
	}
	welcome := "R0 S* K Z(I)"
	for _, tc := range []struct {
		name string
		send [][]byte
		want string
	}{
		{"welcome", [][]byte{user("ldb", [2]string{"application_name", "app1"}, [2]string{"extra_float_digits", "2"})}, welcome},
		{"sslRefused", [][]byte{ssl, user("ldb")}, "N " + welcome},
		{"gssThenSSL", [][]byte{gss, ssl, user("ldb")}, "N N " + welcome},
		{"sslTwice", [][]byte{ssl, ssl}, "N E(FATAL 08P01 unsupported frontend protocol 1234.5679: server supports 3.0 to 3.0)"},
		{"gssTwice", [][]byte{gss, ssl, gss}, "N N E(FATAL 08P01 unsupported frontend protocol 1234.5680: server supports 3.0 to 3.0)"},
		{"cancel", [][]byte{{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, 1, 2, 3, 4, 5, 6, 7, 8}}, ""},
		{"v2", [][]byte{{0, 0, 0, 8, 0, 2, 0, 0}}, "E(FATAL 08P01 old V2 protocol not supported)"},
		{"newerMinor", [][]byte{startupPacket(2, [][2]string{{"user", "alice"}, {"database", "ldb"}})}, "v(0 []) " + welcome},
		{"pqOption", [][]byte{user("ldb", [2]string{"_pq_.x", "1"})}, "v(0 [_pq_.x]) " + welcome},
		{"badParam", [][]byte{user("ldb", [2]string{"foo", "1"})}, "E(FATAL 08P01 unsupported startup parameter: foo)"},
		{"noUser", [][]byte{startupPacket(0, [][2]string{{"database", "ldb"}})}, "E(FATAL 08P01 no username supplied)"},
		{"noDatabase", [][]byte{user("nope")}, "E(FATAL 08P01 no such database: nope)"},
		{"console", [][]byte{user("pgbouncer")}, welcome},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, params := loginTranscript(t, tp.addr, tc.send)
			if got != tc.want {
				t.Errorf("transcript\n got %q\nwant %q", got, tc.want)
			}
			if tc.name == "console" && (params["TimeZone"] != "GMT" || !strings.HasPrefix(params["server_version"], "15.0 (")) {
				// auth_type any makes anyone a stats user of the console,
				// whose welcome is its own.
				t.Errorf("console welcome parameters %v: want TimeZone GMT, server_version 15.0 (...)", params)
			}
			if tc.name == "welcome" {
				// The client's own parameter wins over the server's; an
				// ignored one is neither refused nor reported.
				if params["application_name"] != "app1" || params["server_version"] != "16.4" {
					t.Errorf("welcome parameters %v: want application_name app1 and the fake's server_version", params)
				}
				if _, ok := params["extra_float_digits"]; ok {
					t.Errorf("welcome reports the ignored parameter extra_float_digits: %v", params)
				}
			}
		})
	}

	// log_connections: the attempt and, for an unknown database, the
	// failure, in PgBouncer's words, with the client's prefix attributes
	// (the command's handler writes them as "C-n: db/user@addr ").
	logs := tp.log.tail()
	for _, re := range []string{
		`INFO login attempt: db=nope user=alice tls=no replication=no conn=C-\d+ db=nope user=alice addr=127\.0\.0\.1:\d+`,
		`INFO login failed: db=nope user=alice conn=C-\d+ db=nope user=alice addr=127\.0\.0\.1:\d+`,
	} {
		if !regexp.MustCompile(re).MatchString(logs) {
			t.Errorf("no log line matching %q in\n%s", re, logs)
		}
	}
}

// loginTranscript connects, sends each packet in turn (the next one after
// the pooler has answered the last, as a client would), and renders what
// the pooler sent until it closed the connection or sent ReadyForQuery:
// single-byte encryption answers as themselves, messages by type with the
// fields that matter; the welcome's ParameterStatus messages, whose order
// is a map's, collapse to "S*" and come back as a map.
func loginTranscript(t *testing.T, addr string, send [][]byte) (string, map[string]string) {
	return loginTranscriptPassword(t, addr, send, "")
}

// loginTranscriptPassword is loginTranscript answering a cleartext
// password request (R3) with password.
func loginTranscriptPassword(t *testing.T, addr string, send [][]byte, password string) (string, map[string]string) {
	t.Helper()
	return loginTranscriptNet(t, "tcp", addr, send, password)
}

// loginTranscriptNet is loginTranscriptPassword over network ("unix" for
// the Unix socket).
func loginTranscriptNet(t *testing.T, network, addr string, send [][]byte, password string) (string, map[string]string) {
	t.Helper()
	conn, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	var out []string
	params := map[string]string{}
	for i, pkt := range send {
		if _, err := conn.Write(pkt); err != nil {
			t.Fatalf("write packet %d: %v", i, err)
		}
		if i == len(send)-1 || binary.BigEndian.Uint32(pkt[4:]) == 196608 {
			break
		}
		// An encryption request: one byte back before the next packet.
		var b [1]byte
		if _, err := io.ReadFull(conn, b[:]); err != nil {
			t.Fatalf("answer to packet %d: %v", i, err)
		}
		out = append(out, string(b[:]))
	}
	br := bufio.NewReader(conn)
	for {
		typ, body, err := readLoginMessage(br)
		if errors.Is(err, io.EOF) || isClosed(err) {
			break
		}
		if err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		switch typ {
		case 'R':
			code := binary.BigEndian.Uint32(body)
			out = append(out, fmt.Sprintf("R%d", code))
			if code == 3 {
				msg := append([]byte{'p', 0, 0, 0, 0}, password...)
				msg = append(msg, 0)
				binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-1))
				if _, err := conn.Write(msg); err != nil {
					t.Fatalf("send password: %v", err)
				}
			}
		case 'S':
			var m pgproto3.ParameterStatus
			_ = m.Decode(body)
			params[m.Name] = m.Value
			if len(out) == 0 || out[len(out)-1] != "S*" {
				out = append(out, "S*")
			}
		case 'v':
			var m pgproto3.NegotiateProtocolVersion
			_ = m.Decode(body)
			out = append(out, fmt.Sprintf("v(%d %v)", m.NewestMinorProtocol, m.UnrecognizedOptions))
		case 'E':
			var m pgproto3.ErrorResponse
			_ = m.Decode(body)
			out = append(out, fmt.Sprintf("E(%s %s %s)", m.Severity, m.Code, m.Message))
		case 'Z':
			out = append(out, fmt.Sprintf("Z(%c)", body[0]))
		default:
			out = append(out, string(typ))
		}
		if typ == 'Z' {
			break
		}
	}
	if slices.Contains(out, "Z(I)") {
		// Logged in: leave politely so the pool is not left waiting.
		conn.Write([]byte{'X', 0, 0, 0, 4})
	}
	return strings.Join(out, " "), params
}

// readLoginMessage reads one backend message, refusing a length no login
// message has.
func readLoginMessage(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n < 4 || n > 1<<16 {
		return 0, nil, fmt.Errorf("type %q: bad length %d", hdr[0], n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return hdr[0], body, nil
}

// TestLoginAuthTranscripts pins the authentication paths of a login that
// need no TLS: auth_hba_file rules (reject, no entry, trust, password),
// trust for a user nobody knows (PgBouncer's "\"trust\" authentication
// failed"), the unknown database after a proved
// password, and the console's "not allowed" after authentication.
func TestLoginAuthTranscripts(t *testing.T) {
	dir := t.TempDir()
	hba := filepath.Join(dir, "hba.conf")
	users := filepath.Join(dir, "userlist.txt")
	if err := os.WriteFile(hba, []byte(strings.Join([]string{
		"host all bob 127.0.0.1/32 reject",
		"host all alice 127.0.0.1/32 password",
		"host all all 127.0.0.1/32 trust",
	}, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(users, []byte(`"alice" "pw"`+"\n"+`"erin" "x"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"ldb": ""}, fmt.Sprintf(`auth_type = hba
auth_hba_file = %s
auth_file = %s
admin_users = erin
`, hba, users))
	defer tp.shutdown(t, fake)

	user := func(name, db string) []byte {
		return startupPacket(0, [][2]string{{"user", name}, {"database", db}})
	}
	welcome := "R0 S* K Z(I)"
	for _, tc := range []struct {
		name     string
		send     []byte
		password string
		want     string
	}{
		{"reject", user("bob", "ldb"), "", `E(FATAL 28000 no pg_hba.conf entry for host "127.0.0.1", user "bob", database "ldb")`},
		{"password", user("alice", "ldb"), "pw", "R3 " + welcome},
		{"wrongPassword", user("alice", "ldb"), "nope", "R3 E(FATAL 28P01 password authentication failed)"},
		{"passwordUnknownDB", user("alice", "nope"), "pw", "R3 E(FATAL 08P01 no such database: nope)"},
		{"wrongPasswordUnknownDB", user("alice", "nope"), "x", "R3 E(FATAL 28P01 password authentication failed)"},
		{"trustUnknownUser", user("carol", "ldb"), "", `E(FATAL 08P01 "trust" authentication failed)`},
		{"trustKnownUser", user("erin", "ldb"), "", welcome},
		{"consoleNotAllowed", user("alice", "pgbouncer"), "pw", "R3 E(FATAL 08P01 not allowed)"},
		{"consoleAdmin", user("erin", "pgbouncer"), "", welcome},
		{"consoleUnknownUser", user("carol", "pgbouncer"), "", `E(FATAL 08P01 "trust" authentication failed)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := loginTranscriptPassword(t, tp.addr, [][]byte{tc.send}, tc.password)
			if got != tc.want {
				t.Errorf("transcript\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
