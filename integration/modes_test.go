//go:build linux

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSessionMode: in session mode a client keeps its server for the whole
// connection, so session state (SET, temp tables) survives between
// transactions while another client works on the same pool.
func TestSessionMode(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{
		"pool_mode":         "session",
		"default_pool_size": "2",
	}, ""), testUserlist)
	a := connectPgx(t, p.App())
	b := connectPgx(t, p.App())
	pidA := queryInt(t, a, "SELECT pg_backend_pid()")
	pidB := queryInt(t, b, "SELECT pg_backend_pid()")
	if pidA == pidB {
		t.Fatalf("two session-mode clients share backend %d", pidA)
	}
	if _, err := a.Exec(ctxT(t, 10*time.Second), "SET search_path = pg_catalog, public"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctxT(t, 10*time.Second), "CREATE TEMP TABLE session_only (v int)"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if n := queryInt(t, b, "SELECT $1::int", i); n != int64(i) {
			t.Fatal(n)
		}
		if got := queryInt(t, a, "SELECT pg_backend_pid()"); got != pidA {
			t.Errorf("session client moved from backend %d to %d", pidA, got)
		}
		if n := queryInt(t, a, "SELECT count(*) FROM session_only"); n != 0 {
			t.Errorf("temp table count %d", n)
		}
	}
	if sp := queryText(t, a, "SHOW search_path"); sp != "pg_catalog, public" {
		t.Errorf("search_path = %q after other transactions", sp)
	}
	// A third client waits for a server and gets one as soon as a session ends.
	_ = a.Close(context.Background())
	c := connectPgx(t, p.App())
	if n := queryInt(t, c, "SELECT 3"); n != 3 {
		t.Fatal(n)
	}
	// The server a left is reset before reuse (server_reset_query = DISCARD ALL).
	if n := queryInt(t, c, "SELECT count(*) FROM pg_class WHERE relname = 'session_only' AND relpersistence = 't'"); n != 0 {
		t.Errorf("the next session sees %d leftover temp tables", n)
	}
}

// TestStatementMode: single statements work; an explicit transaction block
// is refused as PgBouncer refuses it.
func TestStatementMode(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{
		"pool_mode":         "statement",
		"default_pool_size": "1",
	}, ""), testUserlist)
	conn := connectPgx(t, p.App())
	other := connectPgx(t, p.App())
	for i := 0; i < 3; i++ {
		if n := queryInt(t, conn, "SELECT $1::int", i); n != int64(i) {
			t.Fatal(n)
		}
		if n := queryInt(t, other, "SELECT $1::int", i+10); n != int64(i+10) {
			t.Fatal(n)
		}
	}
	if _, err := conn.Exec(ctxT(t, 10*time.Second), "INSERT INTO smoke VALUES (100, 'statement') ON CONFLICT (id) DO UPDATE SET v = excluded.v"); err != nil {
		t.Fatalf("autocommit INSERT: %v", err)
	}
	if got := queryText(t, other, "SELECT v FROM smoke WHERE id = 100"); got != "statement" {
		t.Errorf("other client reads %q", got)
	}

	begin := connectPgx(t, p.App())
	_, err := begin.Exec(ctxT(t, 10*time.Second), "BEGIN", pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		// Some poolers answer BEGIN and refuse the next statement.
		_, err = begin.Exec(ctxT(t, 10*time.Second), "SELECT 1", pgx.QueryExecModeSimpleProtocol)
	}
	e := asPgError(t, err)
	t.Logf("BEGIN in statement mode: %s %s %q", e.Severity, e.Code, e.Message)
	if !strings.Contains(e.Message, "transaction blocks not allowed in statement pooling mode") {
		t.Errorf("BEGIN in statement mode: %s %q, want %q", e.Code, e.Message, "transaction blocks not allowed in statement pooling mode")
	}
	// The refused transaction did not leave the single server dirty.
	if n := queryInt(t, other, "SELECT 42"); n != 42 {
		t.Fatal(n)
	}
	selectOne(t, p.App())
}
