package pooler

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/auth"
)

// TestSCRAMIterationsAdHoc: the SCRAM exchange for a plain-text auth_file
// password announces scram_iterations (i= in server-first-message), and
// a RELOAD-style Apply of another value takes effect for the next login.
func TestSCRAMIterationsAdHoc(t *testing.T) {
	defer auth.SetSCRAMIterations(auth.DefaultSCRAMIterations)
	users := filepath.Join(t.TempDir(), "userlist.txt")
	if err := os.WriteFile(users, []byte(`"alice" "pw"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := startFakePostgres(t)
	tp := startTestPooler(t, fake, map[string]string{"ldb": ""}, fmt.Sprintf("auth_type = scram-sha-256\nauth_file = %s\nscram_iterations = 1234\n", users))
	defer tp.shutdown(t, fake)

	serverFirst := func() string {
		t.Helper()
		conn, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(startupPacket(0, [][2]string{{"user", "alice"}, {"database", "ldb"}})); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		typ, body, err := readLoginMessage(br)
		if err != nil || typ != 'R' || binary.BigEndian.Uint32(body) != 10 {
			t.Fatalf("want AuthenticationSASL, got %q %q %v", typ, body, err)
		}
		first := "n,,n=,r=clientnonce"
		msg := []byte{'p', 0, 0, 0, 0}
		msg = append(msg, "SCRAM-SHA-256\x00"...)
		msg = binary.BigEndian.AppendUint32(msg, uint32(len(first)))
		msg = append(msg, first...)
		binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-1))
		if _, err := conn.Write(msg); err != nil {
			t.Fatal(err)
		}
		typ, body, err = readLoginMessage(br)
		if err != nil || typ != 'R' || binary.BigEndian.Uint32(body) != 11 {
			t.Fatalf("want AuthenticationSASLContinue, got %q %q %v", typ, body, err)
		}
		return string(body[4:])
	}
	if got := serverFirst(); !strings.HasSuffix(got, ",i=1234") {
		t.Errorf("server-first-message %q, want i=1234", got)
	}
	cfg := tp.svc.config()
	next := *cfg
	next.Settings.SCRAMIterations = 2048
	if err := tp.svc.Apply(&next, true); err != nil {
		t.Fatal(err)
	}
	if got := serverFirst(); !strings.HasSuffix(got, ",i=2048") {
		t.Errorf("after Apply: server-first-message %q, want i=2048", got)
	}
}
