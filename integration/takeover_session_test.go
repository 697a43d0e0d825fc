//go:build linux

package integration

import (
	"context"
	"testing"
	"time"
)

// Issue 32, item 3: an online restart hands idle session-mode clients
// over with their servers, as PgBouncer 1.18 does. Debian's default is
// pool_mode = session: before, such a pooler handed over no one, and the
// old process lived on for as long as its clients stayed connected.
//
// A session client idle between transactions moves with its Postgres
// backend, whose session state (a temporary table, a SET) goes on in the
// new process; one inside BEGIN stays with the old process until it
// leaves, and reconnects to the new one.
func TestOnlineRestartMovesIdleSessionClient(t *testing.T) {
	needPG(t)
	sock := t.TempDir()
	p1 := startPooler(t, iniSettings(map[string]string{"unix_socket_dir": sock, "pool_mode": "session"}, ""), testUserlist)

	idle := connectPgx(t, p1.App())
	defer idle.Close(context.Background())
	for _, q := range []string{
		"CREATE TEMP TABLE kept (x int)",
		"INSERT INTO kept VALUES (1), (2), (3)",
		"SET application_name = 'before-restart'",
		"SET my.mark = 'kept'",
	} {
		if _, err := idle.Exec(ctxT(t, 5*time.Second), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	pidBefore := queryInt(t, idle, "SELECT pg_backend_pid()")

	inTx := connectPgx(t, p1.App())
	if _, err := inTx.Exec(ctxT(t, 5*time.Second), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := inTx.Exec(ctxT(t, 5*time.Second), "CREATE TEMP TABLE in_tx (x int)"); err != nil {
		t.Fatal(err)
	}
	inTxPid := queryInt(t, inTx, "SELECT pg_backend_pid()")

	p2 := rebootPooler(t, p1)
	if !p2.WaitLog("takeover: took over 1 clients", 5*time.Second) {
		t.Errorf("the new process did not take over the idle session client; its log:\n%s\nold log:\n%s", p2.Log(), p1.Log())
	}
	if !p1.WaitLog("takeover: handed over 1 clients, 1 servers", 5*time.Second) {
		t.Errorf("the old process did not hand over the client with its server; its log:\n%s", p1.Log())
	}

	// The client in a transaction is still the old process's, on its
	// backend, until it finishes and leaves.
	select {
	case <-p1.exited:
		t.Fatal("the old process exited while a client in a transaction was still connected")
	default:
	}
	if _, err := inTx.Exec(ctxT(t, 5*time.Second), "INSERT INTO in_tx VALUES (1)"); err != nil {
		t.Fatalf("the client in a transaction after the restart: %v", err)
	}
	if pid := queryInt(t, inTx, "SELECT pg_backend_pid()"); pid != inTxPid {
		t.Errorf("the client in a transaction is on backend %d after the restart, want %d", pid, inTxPid)
	}
	if _, err := inTx.Exec(ctxT(t, 5*time.Second), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	inTx.Close(ctxT(t, 5*time.Second))
	select {
	case <-p1.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the old process did not exit once its last client left; its log:\n%s", p1.Log())
	}

	// The old process is gone: the idle client is served by the new one,
	// on the same backend, its session whole.
	if n := queryInt(t, idle, "SELECT sum(x) FROM kept"); n != 6 {
		t.Errorf("sum of the temporary table after the restart = %d, want 6", n)
	}
	if mark := queryText(t, idle, "SELECT current_setting('my.mark')"); mark != "kept" {
		t.Errorf("my.mark after the restart = %q, want kept", mark)
	}
	if app := queryText(t, idle, "SELECT current_setting('application_name')"); app != "before-restart" {
		t.Errorf("application_name after the restart = %q, want before-restart", app)
	}
	if pid := queryInt(t, idle, "SELECT pg_backend_pid()"); pid != pidBefore {
		t.Errorf("backend after the restart = %d, want %d (the server handed over with its client)", pid, pidBefore)
	}
	// The session goes on: a transaction, then a new client.
	if _, err := idle.Exec(ctxT(t, 5*time.Second), "BEGIN; INSERT INTO kept VALUES (4); COMMIT"); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, idle, "SELECT sum(x) FROM kept"); n != 10 {
		t.Errorf("sum of the temporary table after an insert = %d, want 10", n)
	}
	again := connectPgx(t, p1.App())
	defer again.Close(context.Background())
	if n := queryInt(t, again, "SELECT 41 + 1"); n != 42 {
		t.Errorf("a new client of the new process: 41 + 1 = %d", n)
	}
	if rel := queryText(t, again, "SELECT coalesce(to_regclass('kept')::text, 'none')"); rel != "none" {
		t.Errorf("a new client finds table kept (%s), want none: another session's temporary table", rel)
	}
	p2.Alive(t)
}
