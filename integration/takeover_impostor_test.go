//go:build linux

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Issue 32, item 2: pgturnstile -R trusts nobody on the old process's
// Unix socket but a process of its own user (or root), and takes nothing
// a SHOW FDS row forges.

// impostorEnv makes the test binary an impostor (TestMain): it listens on
// the Unix socket named by the variable, takes one connection, and prints
// how many bytes came on it.
const impostorEnv = "PGTURNSTILE_TEST_IMPOSTOR"

// runImpostor is the impostor process's life.
func runImpostor(path string) int {
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("impostor:", err)
		return 1
	}
	defer ln.Close()
	os.Chmod(path, 0o777)
	fmt.Println("ready")
	conn, err := ln.Accept()
	if err != nil {
		fmt.Println("impostor:", err)
		return 1
	}
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	n, _ := conn.Read(make([]byte, 4096))
	conn.Close()
	fmt.Printf("received %d bytes\n", n)
	return 0
}

// takeoverIni is a configuration whose Unix socket is dir's, on port.
func takeoverIni(dir string, port int) string {
	return strings.Replace(iniSettings(map[string]string{"unix_socket_dir": dir}, ""),
		"listen_port = 0", "listen_port = "+strconv.Itoa(port), 1)
}

// freePort is a TCP port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rebootRefused runs pgturnstile -R on ini and waits for it to exit; it
// must exit 1 with a FATAL line that says want.
func rebootRefused(t *testing.T, ini, want string) *Pooler {
	t.Helper()
	bin := poolerBinary(t)
	p := launchPooler(t, ini, testUserlist, func(iniPath string) *exec.Cmd {
		return exec.Command(bin, "-R", iniPath)
	})
	select {
	case <-p.exited:
	case <-time.After(40 * time.Second):
		t.Fatalf("pgturnstile -R did not exit; its log:\n%s", p.Log())
	}
	p.stopped.Store(true) // its exit is the point
	if p.cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("pgturnstile -R exited with %v, want 1", p.cmd.ProcessState)
	}
	for _, line := range strings.Split(p.Log(), "\n") {
		if strings.Contains(line, "FATAL") && strings.Contains(line, want) {
			return p
		}
	}
	t.Errorf("pgturnstile -R did not log a FATAL line with %q; its log:\n%s", want, p.Log())
	return p
}

// TestTakeoverRefusesOtherUser: a process of another user (nobody) binds
// the socket's name while the pooler is down. pgturnstile -R refuses it
// on its credentials (SO_PEERCRED) and sends it nothing: no startup
// packet, so no SUSPEND, no SHOW FDS, and nothing it answers is taken.
func TestTakeoverRefusesOtherUser(t *testing.T) {
	needPG(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	port := freePort(t)
	sock := filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy nobody can run: the test binary's directory is root's.
	binDir, err := os.MkdirTemp("", "pgturnstile-impostor-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	os.Chmod(binDir, 0o755)
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	impBin := filepath.Join(binDir, "impostor")
	if err := os.WriteFile(impBin, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	imp := exec.Command(impBin, "-test.run=^$")
	imp.Env = append(os.Environ(), impostorEnv+"="+sock)
	imp.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: 65534, Gid: 65534},
		// To bind in the test's directory; the uid is what the
		// pooler sees.
		AmbientCaps: []uintptr{1}, // CAP_DAC_OVERRIDE
		Pdeathsig:   syscall.SIGKILL,
	}
	out, err := imp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := imp.Start(); err != nil {
		t.Fatal(err)
	}
	defer imp.Process.Kill()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("impostor did not start: %q", lines.Text())
	}

	p := rebootRefused(t, takeoverIni(dir, port), "takeover refused: the process on "+sock+" runs as uid 65534")
	if p.LogContains("takeover_init: launching connection") && p.LogContains("handed over") {
		t.Errorf("pgturnstile -R took something over from the impostor; its log:\n%s", p.Log())
	}
	var got string
	if lines.Scan() {
		got = lines.Text()
	}
	imp.Wait()
	if got != "received 0 bytes" {
		t.Errorf("the impostor says %q, want received 0 bytes (nothing sent to it)", got)
	}
}

// fakeConsole plays an old process of this test's user (root, whom -R
// trusts): it answers the login and SUSPEND, and sends rows as SHOW FDS,
// each with its descriptor. It records the queries it got.
type fakeConsole struct {
	mu      sync.Mutex
	queries []string
	done    chan struct{}
}

type fakeRow struct {
	fd                   int
	task, user, database string
	state                map[string]any
}

func startFakeConsole(t *testing.T, path string, rows []fakeRow) *fakeConsole {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o777)
	fc := &fakeConsole{done: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); <-fc.done })
	go func() {
		defer close(fc.done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		uc := c.(*net.UnixConn)
		be := pgproto3.NewBackend(uc, uc)
		if _, err := be.ReceiveStartupMessage(); err != nil {
			return
		}
		send := func(msgs ...pgproto3.BackendMessage) {
			var b []byte
			for _, m := range msgs {
				b, _ = m.Encode(b)
			}
			uc.Write(b)
		}
		send(&pgproto3.AuthenticationOk{}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
		for {
			msg, err := be.Receive()
			if err != nil {
				return
			}
			q, ok := msg.(*pgproto3.Query)
			if !ok {
				continue
			}
			fc.mu.Lock()
			fc.queries = append(fc.queries, q.String)
			fc.mu.Unlock()
			switch {
			case strings.HasPrefix(q.String, "SUSPEND"):
				send(&pgproto3.CommandComplete{CommandTag: []byte("SUSPEND")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
			case strings.HasPrefix(q.String, "SHOW FDS"):
				var fields []pgproto3.FieldDescription
				for _, n := range []string{"fd", "task", "user", "database", "pgturnstile_state"} {
					fields = append(fields, pgproto3.FieldDescription{Name: []byte(n), DataTypeOID: 25, DataTypeSize: -1})
				}
				send(&pgproto3.RowDescription{Fields: fields})
				for _, r := range rows {
					st, _ := json.Marshal(r.state)
					b, _ := (&pgproto3.DataRow{Values: [][]byte{[]byte(strconv.Itoa(r.fd)), []byte(r.task), []byte(r.user), []byte(r.database), st}}).Encode(nil)
					if _, _, err := uc.WriteMsgUnix(b, syscall.UnixRights(r.fd), nil); err != nil {
						return
					}
				}
				send(&pgproto3.CommandComplete{CommandTag: []byte("SHOW")}, &pgproto3.ReadyForQuery{TxStatus: 'I'})
			case strings.HasPrefix(q.String, "SHUTDOWN"):
				return // what the old process does: let go, close
			}
		}
	}()
	return fc
}

func (fc *fakeConsole) got(prefix string) bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, q := range fc.queries {
		if strings.HasPrefix(q, prefix) {
			return true
		}
	}
	return false
}

// TestTakeoverRefusesForgedRows: an old process -R trusts by its
// credentials sends SHOW FDS rows no pgturnstile sends: a client logged
// in as postgres (not in auth_file) on a real TCP connection, a client
// whose descriptor is /dev/null, a server whose descriptor is one end of
// a socketpair (the fake server connection that would be handed other
// clients' queries). Each time -R refuses with a FATAL line that names
// the row, never sends SHUTDOWN (so nothing is taken over) and exits.
func TestTakeoverRefusesForgedRows(t *testing.T) {
	c := needPG(t)
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcpLn.Close()
	cli, err := net.Dial("tcp", tcpLn.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	acc, err := tcpLn.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer acc.Close()
	accFile, err := acc.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer accFile.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(pair[0])
	defer syscall.Close(pair[1])

	key := "0102030405060708"
	cases := []struct {
		name string
		row  fakeRow
		want string
	}{
		{"superuser not in auth_file", fakeRow{int(accFile.Fd()), "client", "postgres", appDB, map[string]any{
			"key": key, "raddr": acc.RemoteAddr().String(), "laddr": acc.LocalAddr().String()}},
			`takeover refused: client postgres@` + appDB + `: user "postgres" is not in auth_file`},
		{"client that is a file", fakeRow{int(devNull.Fd()), "client", appUser, appDB, map[string]any{
			"key": key, "local": true}},
			"takeover refused: SHOW FDS row 1 (client " + appUser + "@" + appDB + "): descriptor"},
		{"server that is a socketpair", fakeRow{pair[0], "server", appUser, appDB, map[string]any{
			"key": "01020304", "pid": 4242, "endpoint": fmt.Sprintf("127.0.0.1:%d", c.port)}},
			"takeover refused: SHOW FDS row 1 (server " + appUser + "@" + appDB + "): descriptor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			port := freePort(t)
			fc := startFakeConsole(t, filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port)), []fakeRow{tc.row})
			p := rebootRefused(t, takeoverIni(dir, port), tc.want)
			if !fc.got("SHOW FDS") {
				t.Errorf("the fake console got no SHOW FDS: %q", fc.queries)
			}
			if fc.got("SHUTDOWN") {
				t.Errorf("pgturnstile -R sent SHUTDOWN: it took the forged row over; its log:\n%s", p.Log())
			}
		})
	}
}
