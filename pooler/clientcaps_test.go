package pooler

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgturnstile/pgturnstile/admin"
)

// capLogin logs user in to db of tp and, when the login succeeds, keeps
// the connection open until the test ends (or close is called). It returns
// the transcript as loginTranscriptPassword writes it, answering a
// password request with password.
func capLogin(t *testing.T, tp *testPooler, user, db, password string) (transcript string, close func()) {
	t.Helper()
	conn, err := net.Dial("tcp", tp.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // a failsafe, not a measurement
	if _, err := conn.Write(startupPacket(0, [][2]string{{"user", user}, {"database", db}})); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var out []string
	for {
		typ, body, err := readLoginMessage(br)
		if err != nil {
			break
		}
		switch typ {
		case 'R':
			code := int(body[3])
			out = append(out, fmt.Sprintf("R%d", code))
			if code == 3 {
				msg := append([]byte{'p', 0, 0, 0, byte(4 + len(password) + 1)}, password...)
				conn.Write(append(msg, 0))
			}
			continue
		case 'E':
			out = append(out, "E("+errorText(body)+")")
		case 'Z':
			out = append(out, "Z")
		default:
			continue
		}
		if typ == 'Z' || typ == 'E' {
			break
		}
	}
	return strings.Join(out, " "), func() { conn.Write([]byte{'X', 0, 0, 0, 4}); conn.Close() }
}

// errorText is an ErrorResponse's severity, code and message.
func errorText(body []byte) string {
	var sev, code, msg string
	for len(body) > 1 {
		f := body[0]
		end := strings.IndexByte(string(body[1:]), 0)
		if end < 0 {
			break
		}
		v := string(body[1 : 1+end])
		switch f {
		case 'S':
			sev = v
		case 'C':
			code = v
		case 'M':
			msg = v
		}
		body = body[2+end:]
	}
	return sev + " " + code + " " + msg
}

const (
	dbFull   = "E(FATAL 08P01 client connections exceeded (max_db_client_connections))"
	userFull = "E(FATAL 08P01 client connections exceeded (max_user_client_connections))"
)

// waitCount waits (a failsafe, not a measurement) until get returns want:
// a client's count goes when its goroutine sees it leave.
func waitCount(t *testing.T, what string, want int, get func() int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := get()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", what, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dbRow(tp *testPooler, name string) admin.Database {
	for _, d := range tp.svc.Console().Databases() {
		if d.Name == name {
			return d
		}
	}
	return admin.Database{Name: "(none)"}
}

func userRow(tp *testPooler, name string) (admin.User, bool) {
	for _, u := range tp.svc.Console().Users() {
		if u.Name == name {
			return u, true
		}
	}
	return admin.User{}, false
}

func capsAuthFile(t *testing.T, users ...string) string {
	t.Helper()
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%q \"pw\"\n", u)
	}
	f := filepath.Join(t.TempDir(), "userlist.txt")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestClientCapsDatabase: max_db_client_connections, per database and
// global, refuses the login over the cap with PgBouncer's FATAL, before
// the password exchange; SHOW DATABASES shows the cap and the count; a
// client that leaves, or was refused, frees its place; SET changes the
// global cap at once; on the console admin_users are exempt and
// stats_users are not.
func TestClientCapsDatabase(t *testing.T) {
	fake := startFakePostgres(t)
	users := capsAuthFile(t, "erin", "root", "watcher")
	tp := startTestPooler(t, fake, map[string]string{
		"capped": "max_db_client_connections=2",
		"plain":  "",
	}, fmt.Sprintf("auth_type = plain\nauth_file = %s\nadmin_users = root\nstats_users = watcher\n", users))
	// A cleanup, not a defer: it runs after those of capLogin, which
	// close the clients that are still connected.
	t.Cleanup(func() { tp.shutdown(t, fake) })

	// The database's own cap: two in, the third (and a fourth: a refused
	// client does not keep its place) refused without a password asked.
	got1, close1 := capLogin(t, tp, "erin", "capped", "pw")
	got2, _ := capLogin(t, tp, "erin", "capped", "pw")
	if got1 != "R3 R0 Z" || got2 != "R3 R0 Z" {
		t.Fatalf("logins under the cap: %q, %q", got1, got2)
	}
	for i := 0; i < 2; i++ {
		if got, _ := capLogin(t, tp, "erin", "capped", "pw"); got != dbFull {
			t.Errorf("login over the cap: %q, want %q", got, dbFull)
		}
	}
	if d := dbRow(tp, "capped"); d.MaxClientConnections != 2 || d.CurrentClientConnections != 2 {
		t.Errorf("SHOW DATABASES capped: max_client_connections %d, current_client_connections %d; want 2, 2", d.MaxClientConnections, d.CurrentClientConnections)
	}
	if d := dbRow(tp, "plain"); d.MaxClientConnections != 0 || d.CurrentClientConnections != 0 {
		t.Errorf("SHOW DATABASES plain: %d, %d; want 0, 0", d.MaxClientConnections, d.CurrentClientConnections)
	}
	// One leaves: its place is free again.
	close1()
	waitCount(t, "capped's current_client_connections", 1, func() int { return dbRow(tp, "capped").CurrentClientConnections })
	if got, _ := capLogin(t, tp, "erin", "capped", "pw"); got != "R3 R0 Z" {
		t.Errorf("login after one left: %q", got)
	}

	// The global cap, set at runtime, applies to databases without
	// their own; capped keeps its 2.
	if err := tp.svc.Console().Set("max_db_client_connections", "1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := capLogin(t, tp, "erin", "plain", "pw"); got != "R3 R0 Z" {
		t.Errorf("first login to plain: %q", got)
	}
	if got, _ := capLogin(t, tp, "erin", "plain", "pw"); got != dbFull {
		t.Errorf("second login to plain under the global cap 1: %q", got)
	}
	if d := dbRow(tp, "plain"); d.MaxClientConnections != 1 {
		t.Errorf("SHOW DATABASES plain max_client_connections = %d, want 1", d.MaxClientConnections)
	}

	// The console counts as the database pgbouncer under the global cap:
	// an admin is let in over it, a stats user is not.
	for i := 0; i < 2; i++ {
		if got, _ := capLogin(t, tp, "root", "pgbouncer", "pw"); got != "R3 R0 Z" {
			t.Errorf("admin console login %d: %q", i, got)
		}
	}
	if got, _ := capLogin(t, tp, "watcher", "pgbouncer", "pw"); got != dbFull {
		t.Errorf("stats user over the console's cap: %q", got)
	}
	if d := dbRow(tp, "pgbouncer"); d.MaxClientConnections != 1 || d.CurrentClientConnections != 2 {
		t.Errorf("SHOW DATABASES pgbouncer: %d, %d; want 1, 2", d.MaxClientConnections, d.CurrentClientConnections)
	}
	if !strings.Contains(tp.log.tail(), "closing because: client connections exceeded (max_db_client_connections) (age=") {
		t.Errorf("no closing line for the refused client:\n%s", tp.log.tail())
	}
}

// TestClientCapsUser: max_user_client_connections, per [users] entry and
// global, counts a user's clients across databases by the name it logs in
// as (not a database's forced user), refuses the one over the cap, and
// follows SET USER and a reload; a user nobody defined is never counted,
// a user auth_query finds counts from then on.
func TestClientCapsUser(t *testing.T) {
	fake := startFakePostgres(t)
	users := capsAuthFile(t, "erin", "frank")
	tp := startTestPooler(t, fake, map[string]string{
		"a":      "",
		"forced": "user=frank",
		"aq":     "auth_user=erin auth_query='SELECT /* fake:null */ $1'",
	}, fmt.Sprintf("auth_type = trust\nauth_file = %s\nmax_user_client_connections = 3\n[users]\nerin = max_user_client_connections=2\n", users))
	// A cleanup, not a defer: it runs after those of capLogin, which
	// close the clients that are still connected.
	t.Cleanup(func() { tp.shutdown(t, fake) })

	// erin's own cap, across databases and through a forced user.
	if got, _ := capLogin(t, tp, "erin", "a", ""); got != "R0 Z" {
		t.Fatalf("erin 1: %q", got)
	}
	if got, _ := capLogin(t, tp, "erin", "forced", ""); got != "R0 Z" {
		t.Fatalf("erin 2: %q", got)
	}
	if got, _ := capLogin(t, tp, "erin", "a", ""); got != userFull {
		t.Errorf("erin 3: %q, want %q", got, userFull)
	}
	// Also to a database that does not exist: the user cap comes first,
	// as PgBouncer checks it on its stand-in database.
	if got, _ := capLogin(t, tp, "erin", "nodb", ""); got != userFull {
		t.Errorf("erin 3 to an unknown database: %q, want %q", got, userFull)
	}
	// frank, the forced user, counts only his own logins: the global 3.
	for i := 1; i <= 3; i++ {
		if got, _ := capLogin(t, tp, "frank", "a", ""); got != "R0 Z" {
			t.Fatalf("frank %d: %q", i, got)
		}
	}
	if got, _ := capLogin(t, tp, "frank", "a", ""); got != userFull {
		t.Errorf("frank 4: %q, want %q", got, userFull)
	}
	for name, want := range map[string][2]int{"erin": {2, 2}, "frank": {3, 3}} {
		u, ok := userRow(tp, name)
		if !ok || u.MaxUserClientConnections != want[0] || u.CurrentClientConnections != want[1] {
			t.Errorf("SHOW USERS %s: %+v, want max_user_client_connections %d, current_client_connections %d", name, u, want[0], want[1])
		}
	}
	// A name nobody defined is not counted, nor listed.
	if got, _ := capLogin(t, tp, "nobody", "a", ""); got != `E(FATAL 08P01 "trust" authentication failed)` {
		t.Errorf("unknown user: %q", got)
	}
	if u, ok := userRow(tp, "nobody"); ok {
		t.Errorf("SHOW USERS lists an unknown user: %+v", u)
	}
	// A user auth_query finds counts from then on, under the global cap.
	for i := 1; i <= 3; i++ {
		if got, _ := capLogin(t, tp, "carol", "aq", ""); got != "R0 Z" {
			t.Fatalf("carol %d: %q", i, got)
		}
	}
	if got, _ := capLogin(t, tp, "carol", "aq", ""); got != userFull {
		t.Errorf("carol 4: %q, want %q", got, userFull)
	}
	if u, ok := userRow(tp, "carol"); !ok || u.CurrentClientConnections != 3 {
		t.Errorf("SHOW USERS carol: %+v (listed %v), want current_client_connections 3", u, ok)
	}

	// SET USER raises erin's cap.
	if err := tp.svc.Console().SetUser("erin", "max_user_client_connections=3"); err != nil {
		t.Fatal(err)
	}
	if got, _ := capLogin(t, tp, "erin", "a", ""); got != "R0 Z" {
		t.Errorf("erin after SET USER: %q", got)
	}
	if u, _ := userRow(tp, "erin"); u.MaxUserClientConnections != 3 || u.CurrentClientConnections != 3 {
		t.Errorf("SHOW USERS erin after SET USER: %+v", u)
	}
	// A reload with a line for erin replaces the SET USER value.
	cfg := tp.svc.config().Clone()
	cfg.Users["erin"].MaxUserClientConnections = 1
	if err := tp.svc.Apply(cfg, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := capLogin(t, tp, "erin", "a", ""); got != userFull {
		t.Errorf("erin after the reload: %q, want %q", got, userFull)
	}
	if u, _ := userRow(tp, "erin"); u.MaxUserClientConnections != 1 || u.CurrentClientConnections != 3 {
		t.Errorf("SHOW USERS erin after the reload: %+v", u)
	}
}

// TestClientCapsAuthAny: under auth_type=any the user counted is the
// database's forced user, whatever name the client gives, as PgBouncer
// takes the forced user as the login user there.
func TestClientCapsAuthAny(t *testing.T) {
	fake := startFakePostgres(t)
	users := capsAuthFile(t, "frank")
	tp := startTestPooler(t, fake, map[string]string{"forced": "user=frank"},
		fmt.Sprintf("auth_file = %s\n[users]\nfrank = max_user_client_connections=1\n", users))
	t.Cleanup(func() { tp.shutdown(t, fake) })
	if got, _ := capLogin(t, tp, "x", "forced", ""); got != "R0 Z" {
		t.Fatalf("first client: %q", got)
	}
	if got, _ := capLogin(t, tp, "y", "forced", ""); got != userFull {
		t.Errorf("second client of frank's: %q, want %q", got, userFull)
	}
	if u, ok := userRow(tp, "frank"); !ok || u.CurrentClientConnections != 1 {
		t.Errorf("SHOW USERS frank: %+v (listed %v), want current_client_connections 1", u, ok)
	}
}
