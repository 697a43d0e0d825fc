//go:build linux

package integration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Protocol features that must pass through untouched in transaction mode:
// notices, empty and multi-statement queries, FunctionCall (fast path),
// an error in the middle of a pipeline; and LISTEN/NOTIFY in session mode.

func TestNoticesEmptyAndMultiStatement(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 20*time.Second)
	var notices []string
	cfg, err := pgconn.ParseConfig(p.App())
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Severity+" "+n.Message) }
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	if _, err := c.Exec(ctx, "DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if len(notices) != 1 || notices[0] != "NOTICE hello 42" {
		t.Fatalf("notices = %q", notices)
	}

	res, err := c.Exec(ctx, "").ReadAll()
	if err != nil || len(res) != 1 || res[0].CommandTag.String() != "" {
		t.Fatalf("empty query: %+v %v", res, err)
	}

	res, err = c.Exec(ctx, "SELECT 1; SELECT 'two'; SELECT 3").ReadAll()
	if err != nil || len(res) != 3 || string(res[1].Rows[0][0]) != "two" || string(res[2].Rows[0][0]) != "3" {
		t.Fatalf("multi-statement: %d results %v", len(res), err)
	}
	// A multi-statement query that fails in the middle runs as one implicit
	// transaction: nothing before the error is kept.
	_, err = c.Exec(ctx, "CREATE TEMP TABLE x_multi(i int); SELECT 1/0; SELECT 3").ReadAll()
	if err == nil || !strings.Contains(err.Error(), "division by zero") {
		t.Fatalf("want division by zero, got %v", err)
	}
	if _, err := c.Exec(ctx, "SELECT * FROM x_multi").ReadAll(); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("temp table survived a failed implicit transaction: %v", err)
	}
}

func TestPipelineErrorInTheMiddle(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	ctx := ctxT(t, 20*time.Second)
	c, err := pgconn.Connect(ctx, p.App())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	pl := c.StartPipeline(ctx)
	pl.SendQueryParams("SELECT 1", nil, nil, nil, nil)
	pl.SendQueryParams("SELECT 1/0", nil, nil, nil, nil)
	pl.SendQueryParams("SELECT 'skipped'", nil, nil, nil, nil)
	if err := pl.Sync(); err != nil {
		t.Fatal(err)
	}
	pl.SendQueryParams("SELECT 'after sync'", nil, nil, nil, nil)
	if err := pl.Sync(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		r, err := pl.GetResults()
		if err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Fatal(err)
			}
			got = append(got, "err:"+pe.Code)
			continue
		}
		if r == nil {
			break
		}
		switch rr := r.(type) {
		case *pgconn.ResultReader:
			res := rr.Read()
			if res.Err != nil {
				got = append(got, "err:"+res.Err.(*pgconn.PgError).Code)
			} else {
				got = append(got, string(res.Rows[0][0]))
			}
		case *pgconn.PipelineSync:
			got = append(got, "sync")
		}
		if len(got) > 10 {
			break
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	want := "1 err:22012 sync after sync sync"
	if strings.Join(got, " ") != want {
		t.Fatalf("pipeline results %q, want %q", strings.Join(got, " "), want)
	}
}

func TestFunctionCallLargeObjects(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"default_pool_size": "1"}, ""), testUserlist)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.bin")
	out := filepath.Join(dir, "out.bin")
	data := []byte(strings.Repeat("large object through the fast path\x00\xff", 3000))
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	conn := "host=127.0.0.1 port=" + strconv.Itoa(p.Port) + " dbname=" + appDB + " user=" + appUser
	// psql's \lo_import/\lo_export use libpq's fast-path FunctionCall.
	stdout, stderr, err := psql(t, appPassword, "-X", "-d", conn, "-c", `\lo_import `+in)
	if err != nil {
		t.Fatalf("lo_import: %v %s", err, stderr)
	}
	f := strings.Fields(stdout)
	if len(f) < 2 || f[0] != "lo_import" {
		t.Fatalf("lo_import output %q", stdout)
	}
	oid := f[1]
	if _, stderr, err := psql(t, appPassword, "-X", "-d", conn, "-c", `\lo_export `+oid+` `+out); err != nil {
		t.Fatalf("lo_export: %v %s", err, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil || string(got) != string(data) {
		t.Fatalf("round trip: %d bytes, want %d (%v)", len(got), len(data), err)
	}
	psql(t, appPassword, "-X", "-d", conn, "-c", `\lo_unlink `+oid)
}

func TestListenNotifySessionMode(t *testing.T) {
	needPG(t)
	p := startPooler(t, iniSettings(map[string]string{"pool_mode": "session"}, ""), testUserlist)
	ctx := ctxT(t, 20*time.Second)
	cfg, err := pgconn.ParseConfig(p.App())
	if err != nil {
		t.Fatal(err)
	}
	var payload string
	cfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) { payload = n.Channel + ":" + n.Payload }
	l, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if _, err := l.Exec(ctx, "LISTEN pgts_chan").ReadAll(); err != nil {
		t.Fatal(err)
	}
	n := connectPgx(t, p.App())
	if _, err := n.Exec(ctx, "SELECT pg_notify('pgts_chan', 'ping 7')"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := l.WaitForNotification(wctx); err != nil {
		t.Fatalf("no notification: %v", err)
	}
	if payload != "pgts_chan:ping 7" {
		t.Fatalf("notification %q", payload)
	}
}
